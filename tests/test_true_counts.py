"""
Counts and matches that are true (issue 34.5): a header counts what it lists, and a journal
search lists as matches only the entries that match the query (the others the ranking brings
along are "related"), in the game, the inspector's API and the core.
"""

import pytest
import support
from django.test import override_settings
from evennia.utils import create
from evennia.utils.ansi import strip_ansi
from evennia.utils.test_resources import EvenniaCommandTest
from inspector_fixtures import InspectorTestCase

from ai_assistant.commands import CmdAssistant, all_assistants
from ai_assistant.memory import entities, journal
from ai_assistant.memory.search.journal_search import search_journal, split_matches
from ai_assistant.typeclasses import AssistantCharacter

LINES = ("Bob said the lighthouse lamp went out last night.",
         "Bob said the weather turned cold and grey.",
         "A gull stole a fish from the market stall.")


def write_journal(ports):
    for line in LINES:
        speaker = "Bob" if line.startswith("Bob") else "Cleo"
        journal.add_entry(ports, line, source_type="direct", source_entity=speaker)


@pytest.mark.core
def test_the_search_brings_a_neighbour_but_only_the_match_matches():
    ports = support.make_ports()
    write_journal(ports)
    hits = search_journal(ports, "lighthouse")
    # the weather line rides along on its neighbour's relevance (context): it is in the hits
    assert {entry["content"] for _, entry in hits} >= set(LINES[:2])
    matches, related = split_matches(ports, "lighthouse", hits)
    assert [entry["content"] for _, entry in matches] == [LINES[0]]
    assert LINES[1] in [entry["content"] for _, entry in related]
    # a speaker the query names, and a lemma of a word ("lamps"), match too
    assert len(split_matches(ports, "lamps", search_journal(ports, "lamps"))[0]) == 1
    by_bob, _ = split_matches(ports, "Bob", search_journal(ports, "Bob"))
    assert len(by_bob) == 2


@pytest.mark.core
def test_a_profile_header_counts_what_it_lists():
    profile = {"name": "Bob", "entity_id": "#2", "entity_type": "player",
               "observations": [{"time": f"t{i}", "source": "heard", "text": f"obs {i}"}
                                for i in range(12)]}
    text = entities.format_profile(profile)
    assert "Recent observations (10 of 12):" in text
    assert text.count("] (heard) obs ") == 10 and "obs 11" in text and "obs 1\n" not in text
    profile["observations"] = profile["observations"][:3]
    assert "Recent observations (3):" in entities.format_profile(profile)


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
        journal.add_entry(self.ports, "The harbour master's dog barked at the gulls.",
                          source_type="direct", source_entity="Alice")
        self.client.force_login(self.builder)
        url = f"/api/assistants/{self.npc.id}/journal/?q=master"
        found = self.client.get(url).json()
        assert found["count"] == len(found["results"]) == 2
        assert all("master" in entry["content"] for entry in found["results"])
        assert all("master" not in entry["content"] for entry in found["related"])
