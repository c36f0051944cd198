"""
Moving every assistant's memories between the embedded store and PostgreSQL
(`memory/longterm/store_move.py`): real mem0, the real embedder, real qdrant files and a real
PostgreSQL with pgvector (tests/memory_store.py).

The move copies ids, vectors and payloads, checks counts and a sample of vectors, writes
nothing the second time, resumes after a kill -9, and moves back the same way.
"""

import copy
import os
import subprocess
import sys
import textwrap

import pytest
from memory_store import empty_memory_table, unread_rows
from support import result_of, sync_runner

from ai_assistant.memory.longterm import pgvector_store
from ai_assistant.memory.longterm.mem0_store import close_all_stores, make_semantic_store
from ai_assistant.memory.longterm.store_move import PostgresVectors, move_memories, open_stores
from ai_assistant.memory.longterm.supersede import is_superseded
from ai_assistant.plumbing.settings import DEFAULTS, Settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MEMORIES = {
    "assistant_ada": ["The lighthouse keeper is called Mora.", "Mora keeps a grey cat named Ash.",
                      "Potions cost 10 gold.", "Potions cost 50 gold.",
                      "The harbour closes at dusk."],
    "assistant_bea": ["The baker sells rye bread on market days.",
                      "The guild meets at midnight in the cellar.",
                      "Bob hides the vault key under the swordfish statue."],
}
TOTAL = sum(len(texts) for texts in MEMORIES.values())


@pytest.fixture
def game(postgres_memory_url, tmp_path):
    """A game's settings tree and data folder, its embedded store filled, the table empty."""
    empty_memory_table(postgres_memory_url)
    tree = copy.deepcopy(DEFAULTS)
    tree["memory"]["postgres_url"] = postgres_memory_url
    data = str(tmp_path / "data")
    ids = {}
    for key, texts in MEMORIES.items():
        store = make_semantic_store(Settings(tree, {"memory.store": "embedded"}), data, key,
                                    runner=sync_runner)
        ids[key] = [result_of(store.add(text))[0]["id"] for text in texts]
        store.close()
    yield tree, data, ids
    close_all_stores()
    empty_memory_table(postgres_memory_url)


def open_as(tree, data, key, store):
    return make_semantic_store(Settings(tree, {"memory.store": store}), data, key,
                               runner=sync_runner)


def analyzed_rows(url):
    """The rows of the memory table as the planner's statistics last counted them."""
    import psycopg

    with psycopg.connect(url) as connection:
        return connection.execute("SELECT reltuples FROM pg_class WHERE relname = %s",
                                  (pgvector_store.TABLE,)).fetchone()[0]


def test_a_move_copies_every_memory_and_checks_it(game):
    tree, data, ids = game
    embedded, postgres, close = open_stores(tree, data)
    try:
        report = move_memories(embedded, postgres, batch=3, sample=10)
        assert report["problems"] == []
        assert (report["copied"], report["skipped"], report["scopes"]) == (TOTAL, 0, 2)
        assert report["checked"] == TOTAL  # every vector of so few compared
        assert postgres.counts() == {key: len(texts) for key, texts in MEMORIES.items()}
        # the moved rows have the terms recall reads: no assistant's first recall writes them
        assert unread_rows(postgres.url) == 0
        # and the planner knows the table holds them (not as it was before the move)
        assert analyzed_rows(postgres.url) == TOTAL
        again = move_memories(embedded, postgres)  # idempotent: nothing written twice
        assert (again["copied"], again["skipped"], again["problems"]) == (0, TOTAL, [])
    finally:
        close()
    close_all_stores()
    ada = open_as(tree, data, "assistant_ada", "postgres")
    assert {item["id"] for item in result_of(ada.list())} == set(ids["assistant_ada"])
    hits = {hit["memory"]: hit for hit in result_of(ada.search("potion prices", limit=2))}
    assert is_superseded(hits["Potions cost 10 gold."])  # the marks moved with the payload
    (hit,) = result_of(ada.search("what is the cat called?", limit=1))
    assert hit["memory"] == "Mora keeps a grey cat named Ash."
    assert result_of(ada.search("vault key", limit=5))[0]["memory"] != MEMORIES[
        "assistant_bea"][2]  # bea's secret stays bea's


def test_a_newer_copy_wins_and_the_move_goes_back(game, tmp_path):
    tree, data, ids = game
    embedded, postgres, close = open_stores(tree, data)
    try:
        move_memories(embedded, postgres)
    finally:
        close()
    close_all_stores()
    bea = open_as(tree, data, "assistant_bea", "postgres")  # the game now runs on PostgreSQL
    result_of(bea.update(ids["assistant_bea"][0], "The baker sells rye and barley bread."))
    (later,) = result_of(bea.add("The ferry leaves at 8 in the morning."))
    close_all_stores()
    back = str(tmp_path / "back")  # a fresh embedded store: the way back
    embedded, postgres, close = open_stores(tree, back)
    try:
        report = move_memories(postgres, embedded)
        assert report["problems"] == [] and report["copied"] == TOTAL + 1
        stale = move_memories(embedded, postgres)  # the older copies do not overwrite
        assert stale["copied"] == 0
    finally:
        close()
    close_all_stores()
    bea = open_as(tree, back, "assistant_bea", "embedded")
    assert result_of(bea.get(later["id"]))["memory"] == "The ferry leaves at 8 in the morning."
    assert result_of(bea.get(ids["assistant_bea"][0]))["memory"] == (
        "The baker sells rye and barley bread.")


KILLED_MOVE = textwrap.dedent("""
    import copy, os, signal, sys
    sys.path.insert(0, {root!r})
    from ai_assistant.memory.longterm.store_move import move_memories, open_stores
    from ai_assistant.plumbing.settings import DEFAULTS
    tree = copy.deepcopy(DEFAULTS)
    tree["memory"]["postgres_url"] = {url!r}
    embedded, postgres, close = open_stores(tree, {data!r})

    def progress(copied, skipped):
        if copied >= 2:
            os.kill(os.getpid(), signal.SIGKILL)  # mid-move, nothing cleaned up

    move_memories(embedded, postgres, batch=2, progress=progress)
""")


def test_a_move_killed_mid_way_resumes(game, postgres_memory_url):
    tree, data, _ = game
    close_all_stores()  # the embedded folder is the child's while it runs
    script = KILLED_MOVE.format(root=ROOT, url=postgres_memory_url, data=data)
    env = {**os.environ, "MEM0_TELEMETRY": "False"}
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == -9, child.stderr[-2000:]
    done = sum(PostgresVectors(postgres_memory_url).counts().values())
    assert 2 <= done < TOTAL
    embedded, postgres, close = open_stores(tree, data)
    try:
        report = move_memories(embedded, postgres)
    finally:
        close()
    assert report["problems"] == []
    assert (report["copied"], report["skipped"]) == (TOTAL - done, done)


def test_no_postgres_is_a_clear_refusal(tmp_path):
    tree = copy.deepcopy(DEFAULTS)
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "evennia.db3"}
    tree["memory"]["postgres_url"] = ""
    with pytest.raises(pgvector_store.PostgresStoreError, match="not PostgreSQL"):
        open_stores(tree, str(tmp_path), database=sqlite)
