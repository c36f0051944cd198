"""
A server start reads what every assistant's start and first tick read - its object, its light
documents and the documents the shell writes straight - for all of them at once, at the first
script's `at_server_start` (`attribute_reads.read_at_start`): each assistant gets its own, a
write-ahead log that holds records is still replayed before its state is read, and what Evennia
writes to a straight document afterwards is what is read.
"""

import shutil
from unittest.mock import patch

from assistant_npc import MECHANICAL, WithAda, game_dir
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from evennia.utils import create
from evennia.utils.test_resources import EvenniaTest
from test_durability import crash

from ai_assistant import adapters, durability
from ai_assistant.plumbing import documents
from ai_assistant.typeclasses import AssistantCharacter

GAME_DIR = game_dir("start_reads")
TEST_SETTINGS = MECHANICAL
NAMES = ("Bob", "Cy", "Dee")


def restart(npc):
    """What a new server process holds of `npc` before its script starts: nothing."""
    crash(npc)
    npc.assistant.script.ndb.ai_start_read = None
    npc.attributes.backend.reset_cache()
    npc.assistant.script.attributes.backend.reset_cache()


@override_settings(AI_ASSISTANT=TEST_SETTINGS, GAME_DIR=GAME_DIR)
class TestStartReads(WithAda, EvenniaTest):
    def setUp(self):
        shutil.rmtree(durability.log_folder(), ignore_errors=True)
        super().setUp()
        self.npcs = [self.npc] + [
            create.create_object(AssistantCharacter, key=name, location=self.room1,
                                 home=self.room1) for name in NAMES]
        for npc in self.npcs:  # each its own documents, in the database
            state = npc.assistant.ports().state
            state.set(documents.PROJECTS, [{"title": f"{npc.key}'s ledger"}])
            state.set(documents.CURRENT_GOALS, [{"text": f"{npc.key} finds the map"}])
            adapters.store_overrides(npc, {"ticks.flush_every": 3 + len(npc.key)})
            npc.assistant.flush()
        for npc in self.npcs:
            restart(npc)

    def start_first(self):
        """The first script's start, as Evennia's server runs it."""
        with CaptureQueriesContext(connection) as queries:
            self.npcs[0].assistant.script.at_server_start()
        return len(queries)

    def test_the_first_start_reads_every_assistants_own_documents(self):
        self.start_first()
        for npc in self.npcs:
            script = npc.assistant.script
            # read already, each its own, without a query of its own
            assert npc.ndb.ai_state_cache[documents.PROJECTS] == [
                {"title": f"{npc.key}'s ledger"}]
            assert script.ndb.ai_state_cache[documents.CURRENT_GOALS] == [
                {"text": f"{npc.key} finds the map"}]
        with CaptureQueriesContext(connection) as queries:
            for npc in self.npcs[1:]:
                npc.assistant.script.at_server_start()
                state = npc.assistant.ports().state
                for name in documents.REGISTRY:
                    if not documents.heavy(name):
                        state.get(name)
                assert npc.assistant.ports().settings.get("ticks.flush_every") == (
                    3 + len(npc.key))
                assert state.get(documents.PROJECTS) == [{"title": f"{npc.key}'s ledger"}]
        assert len(queries) == 0, [query["sql"] for query in queries]

    def test_the_reads_of_a_start_do_not_grow_with_the_assistants(self):
        few = self.start_first()
        for name in ("Eve", "Fay", "Gus", "Hal", "Ivy"):
            self.npcs.append(create.create_object(AssistantCharacter, key=name,
                                                  location=self.room1, home=self.room1))
        for npc in self.npcs:
            restart(npc)
        assert self.start_first() == few

    def test_a_log_that_holds_records_is_replayed_before_the_state_is_read(self):
        bob = self.npcs[1]
        state = bob.assistant.ports().state
        state.set(documents.PROJECTS, [{"title": "the new ledger"}])  # logged, not flushed
        state.set(documents.CURRENT_GOALS, [{"text": "Bob sails at dawn"}])
        restart(bob)  # a kill -9: the log holds both, the database the old values
        self.start_first()
        assert bob.ndb.ai_state_cache[documents.PROJECTS] == [{"title": "Bob's ledger"}]
        bob.assistant.script.at_server_start()
        state = bob.assistant.ports().state
        assert state.get(documents.PROJECTS) == [{"title": "the new ledger"}]
        assert state.get(documents.CURRENT_GOALS) == [{"text": "Bob sails at dawn"}]
        assert bob.attributes.get(documents.PROJECTS) == [{"title": "the new ledger"}]

    def test_a_straight_document_written_after_the_start_read_is_read_as_written(self):
        bob = self.npcs[1]
        self.start_first()
        adapters.store_overrides(bob, {"ticks.flush_every": 42})  # @assistant/config
        bob.assistant.reset()
        assert bob.assistant.ports().settings.get("ticks.flush_every") == 42
        assert bob.assistant.ports().state.get(documents.CONFIG_OVERRIDES) == {
            "ticks.flush_every": 42}

    def test_a_start_read_that_fails_leaves_each_assistant_to_read_its_own(self):
        with patch("ai_assistant.attribute_reads._read_owners", side_effect=RuntimeError):
            self.start_first()
        bob = self.npcs[1]
        assert bob.ndb.ai_state_cache is None
        bob.assistant.script.at_server_start()
        assert bob.assistant.ports().state.get(documents.PROJECTS) == [
            {"title": "Bob's ledger"}]
        assert bob.assistant.script.ticker_interval is not None

    def test_the_games_settings_are_checked_once_and_again_when_they_change(self):
        bob, cy = self.npcs[1], self.npcs[2]
        assert bob.assistant.ports().settings._tree is cy.assistant.ports().settings._tree
        changed = {**TEST_SETTINGS, "ticks": {"awake": 7}}
        with override_settings(AI_ASSISTANT=changed):
            bob.assistant.reset()
            assert bob.assistant.ports().settings.get("ticks.awake") == 7
            assert bob.assistant.ports().settings.get("ticks.flush_every") == 6  # its own
        with patch.dict("os.environ", {"AI_ASSISTANT_LLM_MODEL": "llama3.1"}):
            cy.assistant.reset()
            assert cy.assistant.ports().settings.get("llm.model") == "llama3.1"
