"""
Every reply reaches the player: the never-silent fallback line, whispers answered privately,
out-of-character events ignored, and colour codes stripped from what the model reads.
"""

import pytest
import support
from scripted_llm import FakeWorld, Reply, drive, sync_runner
from twisted.internet import task

from ai_assistant.agent import awake, perception
from ai_assistant.agent.react import run_react_cycle
from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.markup import strip_markup
from ai_assistant.plumbing.ports import MemoryState, iso
from ai_assistant.plumbing.settings import DEFAULTS, deep_merge


def hear(ports, kind, text, sender="Bob", sender_id="#2"):
    PerceptionQueue(ports).add(perception.make_event(
        kind=kind, text=text, sender=sender, sender_id=sender_id, time=iso(ports.clock.now()),
        classification=perception.classify(kind, text, names=["Ada"])))


@pytest.fixture
def clock():
    return task.Clock()


@pytest.fixture
def make(llm_config, clock):
    def factory(**overrides):
        state, log = MemoryState(), support.Log()
        client = LLMClient(deep_merge(DEFAULTS, {"llm": llm_config})["llm"], npc_key="ada-t",
                           npc_name="Ada", state=state, log=log, runner=sync_runner, clock=clock)
        world = FakeWorld(present=[{"id": "#2", "name": "Bob", "is_player": True},
                                   {"id": "#3", "name": "Cara", "is_player": True}])
        return support.make_ports({"llm": llm_config}, key="ada-t", state=state, llm=client,
                                  world=world, log=log, overrides=overrides)
    return factory


def tick(ports, clock):
    return drive(awake.run_awake_tick(ports, run_cycle=run_react_cycle), clock)


# --- never silent ------------------------------------------------------------------------------


def test_only_unknown_tools_still_get_the_fallback_line_and_the_reason_is_kept(
        llm_server, make, clock):
    ports = make()
    llm_server.default = Reply.tool("teleport", {"where": "moon"})
    hear(ports, "talk", "hello")
    report = tick(ports, clock)
    assert ports.world.said == [ports.settings.get("react.fallback_line")]
    assert report["cycles"][0]["fallback"] and report["cycles"][0]["stopped"] == "max_errors"
    unanswered = ports.state.get(documents.LOOP_STATE)["last_unanswered"]
    assert unanswered == {"time": iso(ports.clock.now()), "who": "Bob", "reason": "max_errors"}
    assert "could not answer Bob: max_errors" in ports.log.text()


def test_the_fallback_line_is_configurable_per_assistant(llm_server, make, clock):
    ports = make(**{"react.fallback_line": "Hm? Say again, dear."})
    llm_server.script(Reply.error(500), Reply.error(500), Reply.error(500), Reply.error(500))
    hear(ports, "talk", "hello")
    tick(ports, clock)
    assert ports.world.said == ["Hm? Say again, dear."]
    assert "llm_error" in ports.state.get(documents.LOOP_STATE)["last_unanswered"]["reason"]


def test_iteration_limit_without_an_answer_gets_the_line(llm_server, make, clock):
    ports = make(**{"react.max_iterations_per_tick": 2})
    llm_server.default = Reply.tool("inspect_location")
    hear(ports, "talk", "hello")
    tick(ports, clock)
    assert ports.world.said == [ports.settings.get("react.fallback_line")]
    assert ports.state.get(documents.LOOP_STATE)["last_unanswered"]["reason"] == "max_iterations"


def test_no_fallback_after_an_answer_or_when_nobody_asked(llm_server, make, clock):
    ports = make()
    llm_server.script(Reply.tool("say", {"message": "Hi!"}))
    hear(ports, "talk", "hello")
    tick(ports, clock)
    assert ports.world.said == ["Hi!"]
    hear(ports, "say", "nice weather", sender="Cara", sender_id="#3")  # chatter: not answered
    assert tick(ports, clock)["answered"] == 0 and ports.world.said == ["Hi!"]


def test_an_empty_fallback_line_says_nothing(llm_server, make, clock):
    ports = make(**{"react.fallback_line": ""})
    llm_server.default = Reply.tool("teleport")
    hear(ports, "talk", "hello")
    tick(ports, clock)
    assert ports.world.said == []
    assert ports.state.get(documents.LOOP_STATE)["last_unanswered"]["who"] == "Bob"


# --- whispers ----------------------------------------------------------------------------------


def test_a_whisper_is_private_and_answered_privately(llm_server, make, clock):
    ports = make()
    llm_server.script(Reply.tool("say", {"message": "Your secret is safe."}))
    hear(ports, "whisper", "the key is under the mat")
    tick(ports, clock)
    assert ports.world.said == [] and ports.world.whispers == [("Bob", "Your secret is safe.")]
    entry = Journal(ports).entries()[-1]
    assert "whispered to me (private)" in entry["content"] and "private" in entry["tags"]
    history = Conversation(ports).for_speaker("#2")
    assert [m["content"] for m in history] == ["(whispered) the key is under the mat",
                                               "(whispered) Your secret is safe."]
    user = llm_server.requests[0]["messages"][1]["content"]
    assert "whisper from Bob" in user and "your answer goes back privately" in user


def test_the_fallback_line_to_a_whisper_is_whispered(llm_server, make, clock):
    ports = make()
    llm_server.default = Reply.tool("teleport")
    hear(ports, "whisper", "psst")
    tick(ports, clock)
    assert ports.world.said == []
    assert ports.world.whispers == [("Bob", ports.settings.get("react.fallback_line"))]


# --- out of character --------------------------------------------------------------------------


@pytest.mark.parametrize("kind, text, sender", [
    ("pose", "Npc01 pauses, thinking.", "Npc01"),
    ("pose", "pauses, thinking.", "Npc01"),
    ("say", "(OOC: brb, dinner)", "Cara"),
    ("say", "[OOC] lag spike, sorry", "Cara"),
    ("say", "OOC: back", "Cara"),
    ("pose", "Npc01 gives Bob a polite but vacant look. (This assistant is in mechanical mode.)",
     "Npc01"),
])
def test_out_of_character_events_are_not_perceived(kind, text, sender):
    ports = support.make_ports(world=FakeWorld())
    assert perception.is_out_of_character(kind, text, sender)
    hear(ports, kind, text, sender=sender, sender_id="#7")
    assert ports.state.get(documents.PENDING_EVENTS, []) == []


@pytest.mark.parametrize("kind, text", [
    ("pose", "Bob smiles and waves."), ("say", "I'm out of coffee (sadly)."),
    ("say", "The assistant at the bank was rude."),
])
def test_in_character_events_are_perceived(kind, text):
    assert not perception.is_out_of_character(kind, text, "Bob")


def test_the_thinking_emote_shown_is_one_perception_ignores(llm_server, make, clock):
    ports = make()
    shown = []
    llm_server.script(Reply.tool("say", {"message": "Hi."}))
    hear(ports, "talk", "hello")

    class Call:
        def active(self):
            return False

    def call_later(delay, func, *args):
        if func == ports.world.emote:  # (the reply deadline and the cooldown are timers too)
            shown.append(args[0])
        return Call()

    drive(awake.run_awake_tick(ports, run_cycle=run_react_cycle, call_later=call_later), clock)
    assert shown == [perception.THINKING_EMOTE]
    assert perception.is_out_of_character("pose", f"Ada {shown[0]}", "Ada")


# --- markup ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, plain", [
    ("|wThe Tavern|n", "The Tavern"),
    ("|rred|R dark|!Rdull |[bback|[Rback2 |hbright|H", "red darkdull backback2 bright"),
    ("|123xterm|[001bg |=agrey|[=zgbg", "xtermbg greygbg"),
    ("|#ff0000hex|[#0f0short", "hexshort"),
    ("a|/b|-c|_d|>e", "a\nb\tc d    e"),
    ("|uunder|U |iit|I |sstrike|S |*inv|^blink", "under it strike invblink"),
    ("pipe || kept", "pipe | kept"),
    ("|lclook north|ltthe north door|le", "the north door"),
    ("|luhttps://x.org|ltsite|le", "https://x.org"),
    ("\x1b[1mbold\x1b[0m", "bold"),
    ("no markup | here |z", "no markup | here |z"),
    (None, ""),
])
def test_strip_markup(text, plain):
    assert strip_markup(text) == plain


def test_event_text_is_queued_without_markup():
    ports = support.make_ports(world=FakeWorld())
    hear(ports, "talk", "|rhello|n there")
    assert ports.state.get(documents.PENDING_EVENTS)[0]["text"] == "hello there"
