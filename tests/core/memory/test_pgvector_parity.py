"""
The postgres store remembers and recalls as the embedded one does (issue 33).

mem0's own search ranks the same on both. That search is what a new claim is judged
against (kept as a duplicate, stored superseding, stored beside: `policy.judge_claim`) and what
the `search_facts` tool returns, so a store that ranked differently would change what an
assistant remembers and finds. mem0 adds a BM25 half on pgvector that the embedded store's
local qdrant lacks, and keeps hits with no similarity at all (a negative cosine clamped to 0)
that the local qdrant drops.

Recall ranks the same on both: the database's candidates are ranked in time order, as the
embedded store's mirror holds its memories (an item shares its neighbours' relevance, so the
corpus's order is part of the ranking).

Real mem0, the real local embedder, the embedded qdrant files and a real PostgreSQL with
pgvector (tests/memory_store.py).
"""

import contextlib

import pytest
from memory_store import empty_memory_table
from support import make_ports, result_of, sync_runner

from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.memory.recall.pipeline import RecallQuery, recall
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


# Told one after the other, an hour apart: the topics interleave, so the database's order (best
# first) is not the order they were told in.
TOLD_IN_ORDER = [
    "Corwen the smith forges horseshoes for the mill ponies every spring.",
    "Tamsin bakes rye bread for the whole lane on market day.",
    "Corwen sold a new plough blade to the Pellow farm.",
    "The ferry to Garra island leaves at dawn on Tuesdays.",
    "Tamsin keeps bees behind the chapel and sells the honey.",
    "Corwen's forge by the river was his grandfather's.",
    "The ferry was late twice this month because of fog.",
    "Tamsin's rye loaves sell out before noon.",
]
RECALLED = ["What does Corwen make at his forge?", "Who sells bread or honey?",
            "When does the ferry leave?", "Corwen Tamsin ferry"]


@contextlib.contextmanager
def assistants_on_both_stores(postgres_memory_url, tmp_path, key):
    """The same assistant twice, `key`, its memories embedded and in PostgreSQL."""
    empty_memory_table(postgres_memory_url)
    opened, assistants = [], []
    try:
        for store in ("embedded", "postgres"):
            overrides = {"memory.store": store, "memory.postgres_url": postgres_memory_url}
            semantic = make_semantic_store(Settings(DEFAULTS, overrides),
                                           str(tmp_path / store), key, runner=sync_runner)
            opened.append(semantic)
            assistants.append(make_ports(key=key, semantic=semantic, overrides=overrides))
        yield assistants
    finally:
        for semantic in opened:
            semantic.close()
        empty_memory_table(postgres_memory_url)


def tell_in_order(assistants, texts, speaker):
    """Each assistant stores `texts` as `speaker` told them, an hour apart."""
    for text in texts:
        for ports in assistants:
            metadata = {"source_entity": speaker, "source_trust": 0.9,
                        "timestamp": ports.clock.now().isoformat()}
            result_of(ports.semantic.add(text, metadata=metadata))
            ports.clock.advance(hours=1)


def recalled_by_each(assistants, text, limit):
    """What each assistant recalls for `text`: `(memories with their scores, lines)`."""
    ranked = []
    for ports in assistants:
        recalled, lines = result_of(recall(ports, RecallQuery(text=text, limit=limit)))
        ranked.append(([(found.item["content"], round(found.score, 6)) for found in recalled],
                       lines))
    return ranked


def test_recall_ranks_the_same_on_both_stores(postgres_memory_url, tmp_path):
    with assistants_on_both_stores(postgres_memory_url, tmp_path, "tamsin") as assistants:
        tell_in_order(assistants, TOLD_IN_ORDER, "Orla")
        for text in RECALLED:
            ranked = recalled_by_each(assistants, text, 6)
            assert ranked[0][0], text
            assert ranked[1] == ranked[0], text


# A season of an invented harbour town, told an hour apart: the query's words are common in
# the scope (their weight over a few candidates that nearly all hold them is not their weight
# over every memory), and the answers sit between other lines in time (their neighbours).
SEASON = [
    "The lantern festival is planned for the first full moon of autumn.",
    "Brannoc mended the harbour wall after the spring storm.",
    "Wenna paints paper lanterns in her kitchen every evening.",
    "The harbour master fined a trawler for mooring at the ferry steps.",
    "Wenna went to the market for red paper and candle stubs.",
    "Gulls stole a whole tray of pasties from the bakery window.",
    "Brannoc's boat needs new sails before the festival.",
    "The choir practises sea songs in the chapel on Thursdays.",
    "Wenna sold forty lanterns to the innkeeper for the festival.",
    "A seal slept on the slipway all afternoon.",
    "The ferry to Garra island leaves at dawn on Tuesdays.",
    "Brannoc went fishing past the lighthouse and caught mackerel.",
    "The innkeeper hangs lanterns along the harbour every festival night.",
    "Old Kitto says the festival began when a ship was saved by lantern light.",
    "The bakery is trying a saffron bun recipe for the festival.",
    "Wenna's sister Elowen arrived by the evening ferry.",
    "Fog closed the harbour for two days.",
    "Elowen helps Wenna glue lantern frames.",
    "The lighthouse keeper keeps a log of every passing ship.",
    "Brannoc painted his boat blue and white.",
    "Children float paper boats with candles on the festival night.",
    "The chapel bell cracked and a smith from Penmorva will recast it.",
    "Wenna lost her best brush in the harbour.",
    "Kitto remembers the festival of his boyhood had fireworks.",
]
# what was said since the last sleep: the journal's lines, ranked after every memory
STILL_IN_THE_JOURNAL = ['Wenna said to me: "The lanterns are nearly dry."',
                        'Kitto said to me: "The festival needs more lanterns than last year."']
ASKED = ["Who makes the lanterns for the festival?", "What did Wenna buy at the market?",
         "Where did Brannoc go fishing?", "What happens on the festival night?",
         "What did Kitto say about the festival?"]
FEW_PER_HALF = 3  # the scope's 24 memories, a few per half: candidates are a small part


def test_recall_over_the_databases_candidates_equals_recall_over_every_memory(
        postgres_memory_url, tmp_path, monkeypatch):
    from ai_assistant.memory.longterm import pgvector_recall

    found_by_database = pgvector_recall.recall_candidates

    def few_candidates(pool, scope, vector, text, entry_ids=(), per_half=None, *more, **named):
        return found_by_database(pool, scope, vector, text, entry_ids, FEW_PER_HALF, *more,
                                 **named)

    monkeypatch.setattr(pgvector_recall, "recall_candidates", few_candidates)
    with assistants_on_both_stores(postgres_memory_url, tmp_path, "wenna") as assistants:
        tell_in_order(assistants, SEASON, "Kitto")
        for text in STILL_IN_THE_JOURNAL:
            for ports in assistants:
                Journal(ports).add(text, source_type="direct", source_entity=text.split()[0])
                ports.clock.advance(hours=1)
        for text in ASKED:
            ranked = recalled_by_each(assistants, text, 4)
            assert len(ranked[0][0]) == 4, text
            assert ranked[1] == ranked[0], text
