"""
mem0's own search ranks the same on the postgres store as on the embedded one (issue 33).

That search is what a new claim is judged against (kept as a duplicate, stored superseding,
stored beside: `policy.judge_claim`) and what the `search_facts` tool returns, so a store
that ranked differently would change what an assistant remembers and finds. mem0 adds a BM25
half on pgvector that the embedded store's local qdrant lacks; the postgres store turns it off.

Real mem0, the real local embedder, the embedded qdrant files and a real PostgreSQL with
pgvector (tests/memory_store.py).
"""

import pytest
from memory_store import empty_memory_table
from support import result_of, sync_runner

from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.plumbing.settings import DEFAULTS, Settings

# An invented village: memories that share the query's words without answering it, and ones
# that answer it in other words, so a word score would reorder what meaning ranks.
MEMORIES = [
    "Corwen the smith forges horseshoes for the mill ponies every spring.",
    "Corwen asked where the forge bellows came from; nobody knew.",
    "The forge by the river was Corwen's grandfather's before it was his.",
    "Corwen dislikes the forge smoke and sneezes at dusk.",
    "The smith hammers plough blades and gate hinges for the farms.",
    "Iron nails and hooks come from the smithy near the bridge.",
    "Tamsin bakes rye bread for the whole lane on market day.",
    "Tamsin keeps bees behind the chapel.",
]
QUERIES = ["What does Corwen forge?", "Who makes the iron tools?", "Corwen forge smoke"]


@pytest.fixture
def both_stores(postgres_memory_url, tmp_path):
    """The same assistant's store, embedded and on PostgreSQL, told the same memories."""
    empty_memory_table(postgres_memory_url)
    embedded = make_semantic_store(Settings(DEFAULTS, {"memory.store": "embedded"}),
                                   str(tmp_path / "embedded"), "corwen", runner=sync_runner)
    on_postgres = {"memory.store": "postgres", "memory.postgres_url": postgres_memory_url}
    postgres = make_semantic_store(Settings(DEFAULTS, on_postgres), str(tmp_path / "postgres"),
                                   "corwen", runner=sync_runner)
    yield embedded, postgres
    embedded.close()
    postgres.close()
    empty_memory_table(postgres_memory_url)


def ranked(store, query, limit):
    """`(text, cosine, rank score)` per hit, best first."""
    return [(hit["memory"], round(hit["score"], 4), round(hit["rank_score"], 4))
            for hit in result_of(store.search(query, limit=limit))]


def test_search_ranks_the_same_on_both_stores(both_stores):
    embedded, postgres = both_stores
    for text in MEMORIES:
        for store in both_stores:
            result_of(store.add(text, metadata={"source_entity": "Tamsin",
                                                "source_trust": 0.9}))
    for query in QUERIES:
        for limit in (3, 10):
            on_embedded = ranked(embedded, query, limit)
            assert on_embedded, query
            on_postgres = ranked(postgres, query, limit)
            assert on_postgres == on_embedded, (query, limit)
    # hits come best first by meaning on both: no word score reorders them
    scores = [score for _, score, _ in ranked(postgres, QUERIES[0], 10)]
    assert scores == sorted(scores, reverse=True)


def test_a_claim_is_judged_against_the_same_memories_on_both_stores(both_stores):
    for text in MEMORIES:
        for store in both_stores:
            result_of(store.add(text, metadata={"source_entity": "Tamsin",
                                                "source_trust": 0.9}))
    claim = "Corwen the smith forges horseshoes for the mill ponies each spring."
    decided = [result_of(store.add(claim, metadata={"source_entity": "Tamsin",
                                                    "source_trust": 0.9}))[0]
               for store in both_stores]
    assert [item["event"] for item in decided] == [decided[0]["event"]] * 2
    assert decided[0]["memory"] == decided[1]["memory"]
