"""
The handler exposes the conversation's stores as Evennia's buffs and traits handlers do:
`npc.assistant.conversation`, `.perception`, `.loop`, `.persona` and `.llm_stats`, each reading
and writing the NPC's own Attributes.
"""

from assistant_npc import MECHANICAL, WithAda
from django.test import override_settings
from evennia.utils.test_resources import EvenniaCommandTest

from ai_assistant.admin_commands import CmdAssistant
from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.memory.persona import Persona
from ai_assistant.plumbing.llm import LLMStats
from ai_assistant.workspace.loop_state import LoopState


@override_settings(AI_ASSISTANT=MECHANICAL)
class TestTheHandlersStores(WithAda, EvenniaCommandTest):
    def test_each_store_is_a_property_of_the_handler(self):
        assistant = self.npc.assistant
        for name, owner in (("conversation", Conversation), ("perception", PerceptionQueue),
                            ("loop", LoopState), ("persona", Persona),
                            ("llm_stats", LLMStats)):
            assert isinstance(getattr(assistant, name), owner), name

    def test_what_is_heard_waits_in_the_perception_queue_and_shows_in_the_status(self):
        self.npc.assistant.hear(self.char2, "Ada, where is the inn?", "say")
        waiting = self.npc.assistant.perception.waiting()
        assert [(e["sender"], e["text"]) for e in waiting] == [
            (self.char2.key, "Ada, where is the inn?")]
        self.npc.assistant.loop.record_unanswered(self.char2.key, "no answer")
        self.npc.assistant.conversation.append(
            "user", self.char2.key, "hello", interlocutor={"id": self.char2.dbref,
                                                           "name": self.char2.key})
        out = self.call(CmdAssistant(), "Ada")
        assert "events queued: 1 (dropped: 0); conversations: 1" in out
        assert f"last unanswered: {self.char2.key}" in out

    def test_the_admins_persona_is_kept_on_the_npc(self):
        self.call(CmdAssistant(), "/persona Ada = You keep the harbour's books.",
                  "Ada: persona set")
        assert self.npc.assistant.persona.admin_instructions() == (
            "You keep the harbour's books.")
        self.npc.assistant.reset()  # fresh ports: read back from the Attribute
        assert self.npc.attributes.get("user_system_prompt") == "You keep the harbour's books."
        assert self.npc.assistant.persona.admin_instructions() == (
            "You keep the harbour's books.")
