"""
Each long-term memory's history as mem0 keeps it (`Mem0Store.histories`, `Memories.histories`):
real mem0, the real embedder and store (the embedded one; PostgreSQL with pgvector on the
`make test-postgres` run, where mem0's history database still lives in the data folder).

What is checked: every ADD, UPDATE and DELETE mem0 recorded comes back with the text before and
after and when, oldest first; a metadata-only update (a mark) keeps the text; an assistant never
reads the history of another's memory, though mem0 keeps one history database for the folder;
a store without a history (another port) gives none instead of failing.
"""

import os

import pytest
from support import make_ports, result_of, sync_runner

from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.plumbing.ports import parse_iso
from ai_assistant.plumbing.settings import DEFAULTS, Settings

ELEVEN = "The crew of the Gull is eleven sailors."
TWELVE = "The crew of the Gull is twelve sailors."


@pytest.fixture
def open_store(tmp_path):
    opened = []

    def _open(key):
        store = make_semantic_store(Settings(DEFAULTS), str(tmp_path), key, runner=sync_runner)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


def test_every_change_with_before_after_and_time_oldest_first(open_store, tmp_path):
    store = open_store("npc-ada")
    memory_id = result_of(store.add(ELEVEN, metadata={"entry_id": 1}))[0]["id"]
    result_of(store.update(memory_id, TWELVE))
    result_of(store.update(memory_id, TWELVE, metadata={"wrong": True}))

    history = result_of(store.histories([memory_id]))[memory_id]
    assert [change["event"] for change in history] == ["ADD", "UPDATE", "UPDATE"]
    assert (history[0]["before"], history[0]["after"]) == (None, ELEVEN)
    assert (history[1]["before"], history[1]["after"]) == (ELEVEN, TWELVE)
    assert history[2]["before"] == history[2]["after"] == TWELVE  # a mark keeps the text
    times = [parse_iso(change["time"]) for change in history]
    assert None not in times and times == sorted(times)
    # mem0's history database is in the data folder, whichever store holds the vectors
    assert os.path.exists(tmp_path / "history.db")


def test_another_assistants_memory_has_no_history_for_it(open_store):
    ada, bob = open_store("npc-ada"), open_store("npc-bob")
    adas = result_of(ada.add(ELEVEN))[0]["id"]
    bobs = result_of(bob.add("The bakery opens at dawn."))[0]["id"]
    assert result_of(bob.histories([adas])) == {}
    assert set(result_of(ada.histories([adas, bobs, "not-a-uuid"]))) == {adas}


def test_the_owner_reads_it_and_a_deleted_memory_has_none_left_to_show(open_store):
    ports = make_ports(semantic=open_store("npc-ada"))
    memories = Memories(ports)
    memory_id = result_of(memories.add(ELEVEN))[0]["id"]
    result_of(memories.update(memory_id, TWELVE))
    assert [change["after"] for change in result_of(
        memories.histories([memory_id]))[memory_id]] == [ELEVEN, TWELVE]
    result_of(memories.delete(memory_id))
    assert result_of(memories.histories([memory_id])) == {}  # not this assistant's any more


def test_a_store_that_keeps_no_history_gives_none():
    class NoHistory:
        def list(self, *, limit=100, filters=None):
            raise AssertionError("not asked")

    assert result_of(Memories(make_ports(semantic=NoHistory())).histories(["m1"])) == {}
