"""
The mem0 port with the embedded default (real mem0, real qdrant local mode, real embedder).

Blocking calls go through an injected synchronous runner so results can be asserted without
running the reactor; the port itself is the code under test.
"""

import os

import pytest
from support import result_of, sync_runner

from ai_assistant.memory.longterm import mem0_store
from ai_assistant.memory.longterm.mem0_store import (
    close_all_stores,
    default_mem0_config,
    make_semantic_store,
)
from ai_assistant.memory.persona import ASSISTANT_FACT_EXTRACTION_PROMPT
from ai_assistant.plumbing.settings import DEFAULTS, Settings

pytestmark = pytest.mark.core


@pytest.fixture
def open_store(tmp_path):
    opened = []

    def _open(key="npc-1", settings=None, path=tmp_path):
        store = make_semantic_store(settings or Settings(DEFAULTS), str(path), key,
                                    runner=sync_runner)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


def test_add_search_get_delete_list(open_store):
    store = open_store()
    added = result_of(store.add("Alice prefers tea over coffee.",
                                metadata={"source_trust": 0.9, "entry_id": "e1"}))
    assert len(added) == 1 and added[0]["event"] == "ADD"
    memory_id = added[0]["id"]
    result_of(store.add("The tavern is in the north wing of the castle."))

    hits = result_of(store.search("What does Alice like to drink?", limit=5))
    assert hits[0]["id"] == memory_id
    assert hits[0]["metadata"]["source_trust"] == 0.9
    # `score` is the cosine, on the scale of the calibrated thresholds
    assert hits[0]["score"] > store.relevance_threshold > hits[1]["score"]

    got = result_of(store.get(memory_id))
    assert got["memory"] == "Alice prefers tea over coffee."
    assert got["metadata"]["entry_id"] == "e1"
    assert len(result_of(store.list())) == 2
    assert [m["id"] for m in result_of(store.list(filters={"entry_id": "e1"}))] == [memory_id]

    assert result_of(store.delete(memory_id)) is None
    assert result_of(store.get(memory_id)) is None
    assert len(result_of(store.list())) == 1


def test_search_keeps_low_scoring_true_hits(open_store):
    """mem0's default threshold 0.1 would drop these; the port asks for every candidate."""
    store = open_store()
    result_of(store.add("The blacksmith closes at sunset."))
    hits = result_of(store.search("When does the smithy shut?", limit=3))
    assert [hit["memory"] for hit in hits] == ["The blacksmith closes at sunset."]


def test_near_exact_duplicate_is_not_stored_twice(open_store):
    store = open_store()
    first = result_of(store.add("Bob lost his sword in the swamp."))
    again = result_of(store.add("Bob lost his sword in the swamp!"))
    assert again == [{"id": first[0]["id"], "memory": "Bob lost his sword in the swamp.",
                      "event": "DUPLICATE"}]
    different = result_of(store.add("Bob found a shield in the swamp."))
    assert different[0]["event"] == "ADD"
    assert len(result_of(store.list())) == 2


def test_assistants_are_isolated(open_store):
    ada, bert = open_store("ada"), open_store("bert")
    secret = result_of(bert.add("The key is hidden under the mat."))[0]["id"]
    result_of(ada.add("The tavern serves cider."))

    assert [m["memory"] for m in result_of(ada.list())] == ["The tavern serves cider."]
    assert all(hit["id"] != secret for hit in result_of(ada.search("Where is the key hidden?")))
    assert result_of(ada.get(secret)) is None
    result_of(ada.delete(secret))  # not hers: nothing happens
    assert result_of(bert.get(secret))["memory"] == "The key is hidden under the mat."
    # one qdrant client per path and process: both share one mem0 instance
    assert ada._memory is bert._memory


def test_memories_survive_close_and_reopen(open_store, tmp_path):
    store = open_store()
    memory_id = result_of(store.add("The bridge to the east collapsed."))[0]["id"]
    store.close()
    assert str(tmp_path) not in repr(list(mem0_store._stores))  # the last user closed it
    reopened = open_store()
    assert result_of(reopened.get(memory_id))["memory"] == "The bridge to the east collapsed."


def test_closed_store_fails_cleanly(open_store):
    store = open_store()
    store.close()
    store.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        result_of(store.search("anything"))


def test_close_all_stores_releases_the_path(open_store, tmp_path):
    open_store()
    close_all_stores()
    # a new client can open the same path again in this process
    store = open_store()
    assert result_of(store.list()) == []


def test_bad_input_and_unknown_ids(open_store):
    store = open_store()
    with pytest.raises(ValueError, match="empty"):
        result_of(store.add("   "))
    assert result_of(store.search("")) == []
    assert result_of(store.get("not-a-uuid")) is None
    assert result_of(store.get("00000000-0000-0000-0000-000000000000")) is None


def test_disabled_memory_gives_no_store(tmp_path):
    settings = Settings(DEFAULTS, {"memory.enabled": False})
    assert make_semantic_store(settings, str(tmp_path), "npc") is None


@pytest.mark.embedded_store_only
def test_telemetry_is_off_and_files_stay_in_the_data_folder(open_store, tmp_path):
    import mem0.memory.main
    import mem0.memory.telemetry

    open_store()
    assert os.environ["MEM0_TELEMETRY"] == "False"
    assert mem0.memory.telemetry.MEM0_TELEMETRY is False
    assert mem0.memory.main.MEM0_TELEMETRY is False
    assert (tmp_path / "qdrant").is_dir()
    assert (tmp_path / "history.db").exists()


@pytest.mark.embedded_store_only
def test_config_defaults_and_game_overrides(tmp_path):
    settings = Settings(DEFAULTS, {
        "llm.base_url": "http://127.0.0.1:9/v1",
        "llm.api_key": "sk-test",
        "memory.mem0": {"vector_store": {"config": {"collection_name": "game"}}},
    })
    config, local = default_mem0_config(settings, str(tmp_path))
    store = config["vector_store"]
    assert local is True
    assert store["provider"] == "qdrant" and store["config"]["collection_name"] == "game"
    assert store["config"]["path"] == os.path.join(str(tmp_path), "qdrant")  # merged, not lost
    assert config["custom_instructions"] == ASSISTANT_FACT_EXTRACTION_PROMPT
    assert config["llm"]["config"]["openai_base_url"] == "http://127.0.0.1:9/v1"
    assert config["llm"]["config"]["api_key"] == "sk-test"

    # another provider replaces our section whole (qdrant's options would not fit pgvector)
    other = Settings(DEFAULTS, {"memory.mem0": {
        "embedder": {"provider": "ollama", "config": {"model": "nomic-embed-text"}},
        "vector_store": {"provider": "pgvector", "config": {"dbname": "mud"}},
    }})
    config, local = default_mem0_config(other, str(tmp_path))
    assert local is False
    assert config["embedder"] == {"provider": "ollama", "config": {"model": "nomic-embed-text"}}
    assert config["vector_store"] == {"provider": "pgvector", "config": {"dbname": "mud"}}
    assert config["llm"]["provider"] == "openai"
