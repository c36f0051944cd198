"""
`@assistant/memory/move`: the in-game command that moves every assistant's memories between
the embedded store and PostgreSQL (real Evennia command, real mem0, real qdrant files in a
temporary game folder, a real PostgreSQL with pgvector from tests/memory_store.py).
"""

import pytest
from django.test import override_settings
from evennia.utils.test_resources import EvenniaCommandTest
from memory_store import empty_memory_table
from support import result_of, sync_runner

from ai_assistant import admin_memory_move
from ai_assistant.adapters import semantic_data_dir
from ai_assistant.admin_commands import CmdAssistant
from ai_assistant.memory.longterm.mem0_store import close_all_stores, make_semantic_store
from ai_assistant.memory.longterm.store_move import PostgresVectors
from ai_assistant.plumbing.settings import DEFAULTS, Settings

TEXTS = ["The lighthouse keeper is called Mora.", "The harbour closes at dusk.",
         "Potions cost 10 gold."]


class TestMemoryMoveCommand(EvenniaCommandTest):
    @pytest.fixture(autouse=True)
    def _stores(self, postgres_memory_url, tmp_path, monkeypatch):
        self.url = postgres_memory_url
        monkeypatch.setattr(admin_memory_move, "MOVE_RUNNER", sync_runner)
        empty_memory_table(postgres_memory_url)
        with override_settings(GAME_DIR=str(tmp_path), AI_ASSISTANT={
                "memory": {"postgres_url": postgres_memory_url}}):
            yield
        close_all_stores()
        empty_memory_table(postgres_memory_url)

    def fill_embedded(self):
        store = make_semantic_store(Settings(DEFAULTS, {"memory.store": "embedded"}),
                                    semantic_data_dir(), "assistant_ada", runner=sync_runner)
        for text in TEXTS:
            result_of(store.add(text))
        store.close()

    def test_the_move_and_its_report(self):
        self.fill_embedded()
        out = self.call(CmdAssistant(), "/memory/move = postgres")
        assert "in the background; the game keeps running" in out
        assert "3 copied, 0 already there, 3 memories of 1 assistants" in out
        assert "Counts and vectors agree" in out
        assert PostgresVectors(self.url).counts() == {"assistant_ada": 3}
        again = self.call(CmdAssistant(), "/memory/move = postgres")
        assert "0 copied, 3 already there" in again

    def test_bad_requests_get_a_clear_message(self):
        out = self.call(CmdAssistant(), "/memory/move = redis")
        assert out.startswith("Usage: @assistant/memory/move = postgres")
        # no URL, and a game database that is not PostgreSQL (on any run: an alias it lacks)
        with override_settings(AI_ASSISTANT={"memory": {"postgres_url": "",
                                                        "postgres_database": "absent"}}):
            out = self.call(CmdAssistant(), "/memory/move = postgres")
        assert "The move stopped" in out and "not PostgreSQL" in out
        assert "Traceback" not in out

    def test_the_database_url_is_never_echoed(self):
        from evennia.utils import create

        from ai_assistant.admin_commands import all_assistants
        from ai_assistant.typeclasses import AssistantCharacter

        create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                             home=self.room1)
        try:
            out = self.call(CmdAssistant(),
                            "/config Ada = memory.postgres_url postgresql://u:pw1234@db/mem")
            shown = self.call(CmdAssistant(), "/config Ada")
        finally:
            for npc in all_assistants():
                if npc.assistant.script:
                    npc.assistant.script.unsubscribe()
        assert "memory.postgres_url = (hidden)" in out
        assert "pw1234" not in out + shown and "(hidden)" in shown
