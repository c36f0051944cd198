"""
Only the resident assistants keep their heavy documents in memory (`plumbing.residency`): a
released assistant's clean heavy documents leave its `AttributeState` cache and are read again
from the database, the same, when next used; one with an unwritten change stays until flushed.
"""

import pytest
from assistant_npc import MECHANICAL, WithAda
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from evennia.utils import create
from evennia.utils.test_resources import EvenniaTest

from ai_assistant.memory.journal import Journal
from ai_assistant.plumbing import documents, residency
from ai_assistant.plumbing.residency import Residency
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import ToolCache, execute_tool
from ai_assistant.typeclasses import AssistantCharacter

ONE_RESIDENT = {**MECHANICAL, "memory": {**MECHANICAL["memory"], "resident_assistants": 1}}


def without_scores(found):
    return {**found, "results": [{key: value for key, value in hit.items() if key != "score"}
                                 for hit in found["results"]]}


def journal_search(npc, query):
    load_all_tools()
    ports = npc.assistant.ports()
    found = []
    execute_tool("search_journal", ports, {"query": query}, cache=ToolCache()).addBoth(
        found.append)
    assert found and found[0]["success"], found
    return found[0]


@override_settings(AI_ASSISTANT=ONE_RESIDENT)
class TestResidentDocuments(WithAda, EvenniaTest):
    def setUp(self):
        super().setUp()
        self.saved = residency.RESIDENCY
        residency.RESIDENCY = Residency(capacity=1)
        self.addCleanup(setattr, residency, "RESIDENCY", self.saved)
        self.bob = create.create_object(AssistantCharacter, key="Bob", location=self.room1,
                                        home=self.room1)
        for npc, lines in ((self.npc, ("Orla keeps bees behind the mill",
                                       "The ferry leaves at dawn")),
                           (self.bob, ("Bram mended a lantern", "Wolves at the gate"))):
            for line in lines:
                Journal(npc.assistant.ports()).add(line, importance=5)
            npc.assistant.flush()

    def test_a_released_assistant_reads_its_heavy_documents_again_the_same(self):
        before = journal_search(self.npc, "who keeps bees?")
        journal = self.npc.assistant.ports().state.get(documents.JOURNAL)
        journal_search(self.bob, "the lantern")  # Bob is resident now: Ada is released
        cache = self.npc.ndb.ai_state_cache
        assert documents.JOURNAL not in cache and documents.ENTITY_PROFILES not in cache
        assert documents.AWAKE_STATE in cache  # what an idle tick reads stays
        assert documents.MEMORY_LINKS not in self.script.ndb.ai_state_cache
        assert self.npc.assistant.runtime.derived == {}
        with CaptureQueriesContext(connection) as queries:
            again = self.npc.assistant.ports().state.get(documents.JOURNAL)
        assert len(queries) == 1 and again == journal and again is not journal
        after = journal_search(self.npc, "who keeps bees?")
        # a score's recency share moves with the clock between the two searches
        assert without_scores(after) == without_scores(before)
        assert [hit["score"] for hit in after["results"]] == pytest.approx(
            [hit["score"] for hit in before["results"]], abs=0.01)

    def test_an_unwritten_change_stays_through_a_release_and_reaches_the_database(self):
        ports = self.npc.assistant.ports()
        Journal(ports).add("Orla's bees swarmed over the orchard wall", importance=5)
        written = ports.state.get(documents.JOURNAL)
        journal_search(self.bob, "the lantern")  # Ada released with a change not flushed
        assert self.npc.ndb.ai_state_cache[documents.JOURNAL] is written
        self.npc.assistant.flush()
        stored = self.npc.attributes.get(documents.JOURNAL)
        assert [entry["content"] for entry in stored["entries"]][-1] == (
            "Orla's bees swarmed over the orchard wall")

    def test_a_flush_leaves_no_copy_of_a_heavy_document_in_evennias_cache(self):
        ports = self.npc.assistant.ports()
        Journal(ports).add("The mill wheel is fixed", importance=5)
        ports.state.set(documents.TICK_COUNT, 7)
        self.npc.assistant.flush()
        # Evennia keeps the Attributes it writes, with their values: not the heavy ones
        cached = "".join(self.npc.attributes.backend._cache)
        assert f"{documents.JOURNAL}-" not in cached
        assert f"{documents.TICK_COUNT}-" in "".join(self.script.attributes.backend._cache)
        stored = self.npc.attributes.get(documents.JOURNAL)  # read through Evennia: current
        assert stored["entries"][-1]["content"] == "The mill wheel is fixed"

    def test_an_idle_tick_leaves_a_released_assistant_released(self):
        journal_search(self.bob, "the lantern")  # Ada released
        self.script.at_assistant_tick()
        assert documents.JOURNAL not in self.npc.ndb.ai_state_cache
        assert self.bob.assistant.runtime in residency.RESIDENCY
