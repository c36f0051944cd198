"""
Counts and matches that are true (issue 34.5), in the game and the inspector's API: a journal
search lists as matches only the entries that match the query, the rest apart as "related"
(the core's side: tests/test_journal_matches.py).
"""

from django.test import override_settings
from evennia.utils import create
from evennia.utils.ansi import strip_ansi
from evennia.utils.test_resources import EvenniaCommandTest
from inspector_fixtures import InspectorTestCase
from test_journal_matches import write_journal

from ai_assistant.admin_commands import CmdAssistant, all_assistants
from ai_assistant.memory.journal import Journal
from ai_assistant.typeclasses import AssistantCharacter


@override_settings(AI_ASSISTANT={"llm": {"base_url": None, "api_key": None},
                                 "memory": {"enabled": False}})
class TestJournalSearchInTheGame(EvenniaCommandTest):
    def setUp(self):
        super().setUp()
        self.npc = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                        home=self.room1)
        write_journal(self.npc.assistant.ports())

    def tearDown(self):
        for npc in all_assistants():
            if npc.assistant.script:
                npc.assistant.script.unsubscribe()
        super().tearDown()

    def test_one_match_is_one_match_and_the_rest_is_related(self):
        out = strip_ansi(self.call(CmdAssistant(), "/journal Ada = lighthouse"))
        matches, related = out.split("Related (", 1)
        assert "1 match for 'lighthouse'" in matches and "lighthouse lamp" in matches
        assert "weather" not in matches and "weather turned cold" in related
        none = strip_ansi(self.call(CmdAssistant(), "/journal Ada = zeppelin"))
        assert none.startswith("No journal entries of Ada match 'zeppelin'.")


class TestJournalSearchInTheAPI(InspectorTestCase):
    def test_the_api_counts_only_matches_and_lists_the_related_apart(self):
        Journal(self.ports).add("The harbour master's dog barked at the gulls.",
                          source_type="direct", source_entity="Alice")
        self.client.force_login(self.builder)
        url = f"/api/assistants/{self.npc.id}/journal/?q=master"
        found = self.client.get(url).json()
        assert found["count"] == len(found["results"]) == 2
        assert all("master" in entry["content"] for entry in found["results"])
        assert all("master" not in entry["content"] for entry in found["related"])
