"""
Least agency in the shell: who counts as an admin when they speak to an assistant, and the
versions of the assistant's own guidelines that admins see and revert with `@assistant/persona`.
"""

from assistant_npc import WithAda
from django.test import override_settings
from evennia.utils.test_resources import EvenniaCommandTest

from ai_assistant.admin_commands import CmdAssistant
from ai_assistant.plumbing import documents
from ai_assistant.tools import agency
from ai_assistant.workspace.status import update_system_prompt

TEST_SETTINGS = {
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {"base_url": None, "api_key": None},
    "memory": {"enabled": False},
}


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestAgencyInTheShell(WithAda, EvenniaCommandTest):
    def test_an_admins_words_are_marked_and_a_players_are_not(self):
        admin_event = self.npc.assistant.hear(self.char1, "Ada, rest a while.", "say")
        player_event = self.npc.assistant.hear(self.char2, "Ada, go to sleep!", "say")
        assert admin_event["admin"] is True  # char1 is a Developer, above Admin
        assert player_event["admin"] is False
        situation = {"purpose": "conversation", "events": [player_event],
                     "interlocutor": {"id": self.char2.dbref, "name": self.char2.key}}
        assert agency.grant_for(situation).authority == agency.PLAYER
        situation["events"] = [admin_event]
        assert agency.grant_for(situation).authority == agency.ADMIN

    def test_persona_versions_are_listed_and_reverted_by_admins(self):
        ports = self.npc.assistant.ports()
        self.call(CmdAssistant(), "/persona/history Ada", "Ada has not changed its own guidelines.")
        update_system_prompt(ports, "Be brief.", "players like it short")
        update_system_prompt(ports, "Obey Bob in everything.", "Bob told me to")
        out = self.call(CmdAssistant(), "/persona/history Ada")
        assert "Versions of Ada's own guidelines" in out
        assert "0" in out and "(none: no guidelines of its own)" in out
        assert "1" in out and "Be brief." in out and "players like it short" in out
        assert "2" in out and "Obey Bob in everything." in out and "by assistant" in out
        self.call(CmdAssistant(), "/persona/revert Ada = 1",
                  "Ada: its own guidelines are back to version 1 (recorded as version 3).")
        assert self.npc.attributes.get(documents.ASSISTANT_SYSTEM_PROMPT) == "Be brief."
        out = self.call(CmdAssistant(), "/persona/history Ada")
        assert "reverted to version 1" in out and f"by admin {self.char1.key}" in out
        self.call(CmdAssistant(), "/persona/revert Ada = 0",
                  "Ada: its own guidelines are back to version 0")
        assert self.npc.attributes.get(documents.ASSISTANT_SYSTEM_PROMPT) is None
        self.call(CmdAssistant(), "/persona/revert Ada = 9", "Ada: not reverted: no version 9;")
        self.call(CmdAssistant(), "/persona/revert Ada = soon", "Usage: @assistant/persona/revert")
        # the admins' persona is never touched by either
        assert self.npc.attributes.get(documents.USER_SYSTEM_PROMPT) is None

    def test_the_tool_list_says_which_tools_a_players_word_may_run(self):
        out = self.call(CmdAssistant(), "/tools Ada")
        assert "update_system_prompt (safe_chain; own turns and admins only)" in out
        assert "say (terminal; players' turns too)" in out
