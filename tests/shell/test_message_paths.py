"""
Player text is never format-parsed: braces, `$func()` markers and `{0}` reach the room and the
assistants as typed, on every message path (talk, say, pose, whisper, the assistant's own
speech and emotes, its notices), and an LLM error that contains braces does not break a tick.
Ambiguous assistant names get Evennia's multimatch prompt in `talk` and `@assistant`. And the
shell side of forgetting: a random memory scope per assistant (an old one keeps its id-based
scope), and deleting an assistant deletes its long-term memories.
"""

import re
from unittest.mock import patch

from assistant_npc import AssistantsInPlace, WithAda, run_reactor_turns
from django.test import override_settings
from evennia.commands.default.general import CmdSay, CmdWhisper
from evennia.utils import create
from evennia.utils.ansi import strip_ansi
from evennia.utils.test_resources import EvenniaCommandTest

from ai_assistant.admin_commands import CmdAssistant
from ai_assistant.agent import awake, perception
from ai_assistant.commands import AssistantCmdSet, CmdPose, CmdTalk
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import LLMUnavailable
from ai_assistant.typeclasses import AssistantCharacter

TEST_SETTINGS = {
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {"base_url": None, "api_key": None},
    "memory": {"enabled": False},
}
BRACES = "I like {curly} braces, {0}, {you} and $You() }{"


def texts(mock):
    """What a patched `msg` was sent, as plain strings."""
    sent = []
    for call in mock.call_args_list:
        text = call.kwargs.get("text", call.args[0] if call.args else "")
        sent.append(strip_ansi(str(text[0] if isinstance(text, tuple) else text)))
    return sent


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestMessagePaths(WithAda, EvenniaCommandTest):
    def setUp(self):
        super().setUp()
        # a second assistant in the room hears what the others say and do
        self.bob = create.create_object(AssistantCharacter, key="Bob", location=self.room1,
                                        home=self.room1)

    def heard(self, npc=None):
        return [event["text"] for event in
                (npc or self.npc).assistant.ports().state.get(documents.PENDING_EVENTS) or []]

    # --- player text ------------------------------------------------------------------------

    def test_talk_with_braces_is_shown_and_heard_as_typed(self):
        with patch.object(self.char2, "msg") as seen:
            self.call(CmdTalk(), f"Ada = {BRACES}", f'You say to Ada, "{BRACES}"')
        assert texts(seen) == [f'{self.char1.key} says to Ada, "{BRACES}"']
        assert self.heard() == [BRACES]

    def test_talk_is_shown_to_the_players_not_to_the_other_assistants(self):
        with patch.object(self.char2, "msg") as seen, \
                patch.object(type(self.bob), "at_msg_receive", autospec=True,
                             side_effect=lambda *args, **kwargs: True) as receives:
            self.call(CmdTalk(), "Ada = where is the inn?", 'You say to Ada, "where is the inn?"')
        assert texts(seen) == [f'{self.char1.key} says to Ada, "where is the inn?"']
        # Bob is not sent it (he perceived no untyped line before either); Ada hears it once
        assert [call.args[0] for call in receives.call_args_list] == []
        assert self.heard() == ["where is the inn?"] and self.heard(self.bob) == []

    def test_say_with_braces_is_heard_as_typed(self):
        with patch.object(self.char2, "msg") as seen:
            self.call(CmdSay(), f"Ada, {BRACES}", f'You say, "Ada, {BRACES}"')
        assert texts(seen) == [f'{self.char1.key} says, "Ada, {BRACES}"']
        assert self.heard() == [f"Ada, {BRACES}"]

    def test_a_pose_with_braces_is_shown_and_heard_as_typed(self):
        with patch.object(self.char2, "msg") as seen:
            self.call(CmdPose(), f"grins: {BRACES}")
        assert texts(seen) == [f"{self.char1.key} grins: {BRACES}"]
        assert self.heard() == [f"{self.char1.key} grins: {BRACES}"]
        # it is the pose players have: the assistants' cmdset puts it over Evennia's
        cmdset = AssistantCmdSet()
        cmdset.at_cmdset_creation()
        pose = next(cmd for cmd in cmdset.commands if cmd.key == "pose")
        assert isinstance(pose, CmdPose) and {":", "emote"} <= set(pose.aliases)

    def test_a_whisper_with_braces_reaches_only_the_assistant_as_typed(self):
        with patch.object(self.char2, "msg") as seen:
            self.call(CmdWhisper(), f"Ada = {BRACES}")
        assert texts(seen) == []
        assert self.heard() == [BRACES]
        event = self.npc.assistant.ports().state.get(documents.PENDING_EVENTS)[0]
        assert event["kind"] == "whisper" and event["classification"] == "direct_message"

    # --- what the assistant says and does ----------------------------------------------------

    def test_the_assistants_speech_emote_whisper_and_notice_keep_braces(self):
        world = self.npc.assistant.ports().world
        with patch.object(self.char2, "msg") as seen, patch.object(self.char1, "msg") as told:
            world.say(BRACES)
            world.emote(f"smiles {BRACES}")
            assert world.whisper(self.char1.key, BRACES) is None
            assert world.tell(self.char1.dbref, BRACES) is None
        assert texts(seen) == [f'Ada says, "{BRACES}"', f"Ada smiles {BRACES}"]
        assert texts(told) == [f'Ada says, "{BRACES}"', f"Ada smiles {BRACES}",
                               f'Ada whispers: "{BRACES}"', BRACES]
        # another assistant overhears the speech and the emote as they were shown, in reactor
        # turns of its own (`heard_line.overhear`)
        run_reactor_turns()
        assert self.heard(self.bob)[-2:] == [BRACES, f"Ada smiles {BRACES}"]

    def test_a_status_notice_reaches_the_players_but_not_the_other_assistants(self):
        world = self.npc.assistant.ports().world
        with patch.object(self.char2, "msg") as seen, \
                patch.object(type(self.bob), "at_msg_receive", autospec=True,
                             side_effect=lambda *args, **kwargs: True) as bob_receives:
            world.emote(perception.THINKING_EMOTE)
            world.emote("(OOC: the assistant's model is slow today)")
            world.emote("waves at the door.")
        # the players see all three, as before
        assert texts(seen) == ["Ada pauses, thinking.",
                               "Ada (OOC: the assistant's model is slow today)",
                               "Ada waves at the door."]
        # the other assistant is sent only the emote with the character's words in it
        assert [strip_ansi(call.kwargs["text"][0]) for call in bob_receives.call_args_list
                if call.args[0] == self.bob] == ["Ada waves at the door."]

    def test_what_an_assistant_perceives_of_emotes_is_unchanged(self):
        world = self.npc.assistant.ports().world
        world.emote(perception.THINKING_EMOTE)
        world.emote("(OOC: brb)")
        world.emote("waves at the door.")
        run_reactor_turns()  # it overhears in reactor turns of its own
        # it dropped the notices unheard before; now it is not sent them at all
        assert self.heard(self.bob) == ["Ada waves at the door."]

    def test_the_conversation_notice_keeps_braces(self):
        world = self.npc.assistant.ports().world
        conversation = awake.ConversationWorld(
            world, self.npc.assistant.ports(), {"id": self.char2.dbref, "name": self.char2.key})
        with patch.object(self.char2, "msg") as seen:
            conversation.notice(f"(The assistant's LLM said {BRACES})")
        assert texts(seen) == [f"Ada (The assistant's LLM said {BRACES})"]

    def test_an_llm_error_with_braces_does_not_break_the_tick(self):
        from twisted.internet import defer

        class BracesLLM:
            def complete(self, messages, **kwargs):
                return defer.fail(LLMUnavailable("upstream said {error} {0} }{"))

        self.npc.assistant.ports().llm = BracesLLM()
        self.call(CmdTalk(), f"Ada = {BRACES}")
        with patch.object(self.char1, "msg") as told:
            result = []
            self.npc.assistant.run_tick("awake").addBoth(result.append)
        assert isinstance(result[0], dict), result
        loop = self.npc.assistant.ports().state.get(documents.LOOP_STATE)
        assert "{error} {0} }{" in loop["last_unanswered"]["reason"]
        # the speaker still hears the fallback line
        fallback = self.npc.assistant.ports().settings.get("react.fallback_line")
        assert any(fallback in line for line in texts(told))


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestAmbiguousNames(AssistantsInPlace, EvenniaCommandTest):
    def setUp(self):
        super().setUp()
        self.first = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                          home=self.room1)
        self.second = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                           home=self.room1)

    def pending(self, npc):
        return npc.assistant.ports().state.get(documents.PENDING_EVENTS) or []

    def test_talk_to_an_ambiguous_name_gets_the_multimatch_prompt(self):
        out = self.call(CmdTalk(), "Ada = hello")
        assert "More than one match for 'Ada'" in out and "Ada-1" in out and "Ada-2" in out
        assert not self.pending(self.first) and not self.pending(self.second)
        # Evennia's way to pick one
        self.call(CmdTalk(), "Ada-2 = hello", 'You say to Ada, "hello"')
        assert [e["text"] for e in self.pending(self.second)] == ["hello"]
        assert not self.pending(self.first)

    def test_talk_to_nobody_or_to_a_non_assistant(self):
        self.call(CmdTalk(), "Zed = hello", "There is no assistant called 'Zed' here.")
        self.call(CmdTalk(), f"{self.char2.key} = hello",
                  f"There is no assistant called '{self.char2.key}' here.")

    def test_admin_commands_get_the_multimatch_prompt(self):
        out = self.call(CmdAssistant(), "Ada")
        assert "More than one match for 'Ada'" in out and "Ada-2" in out
        assert f"({self.second.dbref})" not in out.split("\n")[0]
        # a dbref or Evennia's number picks one
        out = self.call(CmdAssistant(), self.second.dbref)
        assert self.second.dbref in out and "More than one match" not in out
        out = self.call(CmdAssistant(), "/sleep Ada-1")
        assert self.first.assistant.operating_mode == "sleep"
        assert self.second.assistant.operating_mode == "awake"
        # a single assistant by name, as before
        self.second.key = "Bea"
        self.call(CmdAssistant(), "Bea", "Bea (#")
        self.call(CmdAssistant(), "Zed", "No assistant called 'Zed'.")


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestForgetting(AssistantsInPlace, EvenniaCommandTest):
    def test_memory_scopes_are_random_and_a_missing_one_is_drawn_at_random(self):
        ada = create.create_object(AssistantCharacter, key="Ada", location=self.room1)
        bea = create.create_object(AssistantCharacter, key="Bea", location=self.room1)
        scopes = {ada.assistant.memory_scope, bea.assistant.memory_scope}
        assert len(scopes) == 2
        assert all(re.fullmatch(r"assistant_[0-9a-f]{32}", scope) for scope in scopes)
        assert ada.assistant.ports().key == ada.assistant.memory_scope
        # a scope found missing is drawn as at creation (never from the reusable object id)
        ada.attributes.remove(documents.MEMORY_SCOPE)
        ada.assistant.reset()
        drawn = ada.assistant.ports().key
        assert re.fullmatch(r"assistant_[0-9a-f]{32}", drawn) and drawn not in scopes
        assert ada.assistant.memory_scope == drawn == ada.attributes.get(documents.MEMORY_SCOPE)

    def test_deleting_an_assistant_deletes_its_memories(self):
        from twisted.internet import defer

        ada = create.create_object(AssistantCharacter, key="Ada", location=self.room1)
        forgotten = []

        class Store:
            def delete_all(self):
                forgotten.append(scope)
                return defer.succeed(2)

        scope = ada.assistant.memory_scope
        ada.assistant.ports().semantic = Store()
        with patch("ai_assistant.handler.logger") as logger:
            assert ada.delete()
        assert forgotten == [scope]
        logger.log_info.assert_called_with(f"[ai_assistant] Ada: deleted 2 memories of {scope}")
