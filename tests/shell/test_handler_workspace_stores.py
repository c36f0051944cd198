"""The handler exposes the mode and workspace stores: `npc.assistant.mode`, `.goals`, ...."""

from assistant_npc import MECHANICAL, WithAda
from django.test import override_settings
from evennia.utils.test_resources import EvenniaCommandTest


@override_settings(AI_ASSISTANT=MECHANICAL)
class TestHandlerStores(WithAda, EvenniaCommandTest):
    def test_the_mode_store_and_the_documented_operating_mode_agree(self):
        assistant = self.npc.assistant
        assert assistant.mode.current() == assistant.operating_mode == "awake"
        assert assistant.set_mode("sleep", "tired")
        assert assistant.mode.asleep() and assistant.operating_mode == "sleep"
        assert [change["reason"] for change in assistant.mode.history()] == ["tired"]
        # a mode change reaches the script's Attributes at once (game makers read them)
        assert assistant.script.attributes.get("operating_mode") == "sleep"
        assert assistant.script.attributes.get("sleep_phase") is None

    def test_a_tick_is_counted_by_the_mode_store(self):
        self.npc.assistant.script.at_assistant_tick()
        assert self.npc.assistant.mode.ticks() == 1

    def test_the_workspace_stores_write_the_npcs_documents(self):
        assistant = self.npc.assistant
        goal = assistant.goals.add("Build a tavern")["goal"]
        assistant.projects.create("tavern", "Build it")
        assistant.session.add("Bob likes tea")
        assistant.flush()
        assert [g["id"] for g in self.npc.assistant.goals.all()] == [goal["id"]]
        assert self.npc.attributes.get("projects")["active"] == "tavern"
        assert self.npc.attributes.get("session_memory")["key_facts"] == ["Bob likes tea"]
        assert assistant.script.attributes.get("current_goals")[0]["description"] == (
            "Build a tavern")
