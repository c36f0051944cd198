"""Episodic search: tokenising, the specification's formula, BM25, filters, boosts, speed."""

import math
import time
from datetime import UTC, datetime, timedelta

import numpy
import pytest

from ai_assistant.memory.journal import Journal
from ai_assistant.memory.search import dense
from ai_assistant.memory.search import index as index_module
from ai_assistant.memory.search.filters import SearchFilters
from ai_assistant.memory.search.index import JournalIndexCache, get_index
from ai_assistant.memory.search.journal_search import search_entries, search_journal
from ai_assistant.memory.search.params import SearchParams
from ai_assistant.memory.search.scoring import score_episodic_memory
from ai_assistant.memory.search.terms import relevance_keyword_overlap, tokenize
from ai_assistant.plumbing.ports import iso

NOW = datetime(2025, 1, 10, 12, 0, tzinfo=UTC)


def entry(id, content, hours_ago=48.0, importance=5, **extra):
    return {
        "id": id,
        "timestamp": iso(NOW - timedelta(hours=hours_ago)),
        "content": content,
        "importance": importance,
        "tags": extra.pop("tags", []),
        "related_projects": extra.pop("related_projects", []),
        "source_entity": extra.pop("source_entity", None),
        "source_trust": extra.pop("source_trust", 0.8),
        **extra,
    }


RELEVANCE_ONLY = {"alpha_recency": 0.0, "alpha_importance": 0.0}


def test_tokenize_normalises_case_punctuation_stopwords_and_word_forms():
    assert tokenize("The Painting, painted; PAINTS!") == ["paint", "paint", "paint"]
    assert tokenize("Orla's kids are running") == ["orla", "kid", "run"]
    assert tokenize("Orla’s boat, O'Brien’s nets") == ["orla", "boat", "obrien", "net"]
    assert tokenize("making a cake to make") == ["make", "cake", "make"]
    assert tokenize("the of and") == []


def test_irregular_word_forms_meet_their_lemma():
    assert tokenize("went bought children made saw") == tokenize("go buy child make see")
    # words the lemma tables do not know still lose their suffixes
    assert tokenize("Xeonoblades") == ["xeonoblad"]


def test_derived_word_forms_meet_their_stem():
    # the lemma tables only know inflections; the stemmer joins derivations too
    assert tokenize("promotions") == tokenize("promote")
    assert tokenize("musical activities") == tokenize("music activity")
    assert tokenize("in 2023") == ["2023"]


def test_a_question_finds_a_derived_form():
    entries = [
        entry(1, "I put the winter coats on promotion at the stall.", source_entity="Ilse"),
        entry(2, "The coats are warm but heavy.", source_entity="Ilse"),
    ]
    results = search_entries(entries, "How did Ilse promote her stall?", now=NOW,
                             params=SearchParams(context_weight=0, **RELEVANCE_ONLY))
    assert [r[1]["id"] for r in results] == [1]


def test_a_question_finds_the_irregular_form_it_asks_about():
    entries = [
        entry(1, "These figurines I bought yesterday remind me of family.", source_entity="Mel"),
        entry(2, "We buy a lot of paint.", source_entity="Bob"),
        entry(3, "The children went to the museum.", source_entity="Mel"),
    ]
    params = SearchParams(context_weight=0, **RELEVANCE_ONLY)
    results = search_entries(entries, "What figurines did Mel buy?", now=NOW, params=params)
    assert results[0][1]["id"] == 1
    results = search_entries(entries, "Where did the child go?", now=NOW, params=params)
    assert [r[1]["id"] for r in results] == [3]


def test_seed_keyword_overlap_is_kept():
    assert relevance_keyword_overlap("alice dragon", "Alice fought the dragon.") == 0.5
    assert relevance_keyword_overlap("", "anything") == 0.0


def test_seed_formula_worked_example():
    item = entry(1, "alice met a dragon", hours_ago=1, importance=7)
    expected = (math.exp(-0.99) + 0.7 + 0.5) / 3
    assert score_episodic_memory(item, "alice unicorn", NOW) == pytest.approx(expected)
    # weights and decay are parameters
    weighted = score_episodic_memory(
        item, "alice unicorn", NOW, alpha_recency=0, alpha_importance=2, alpha_relevance=1,
        recency_decay=0.5,
    )  # fmt: skip
    assert weighted == pytest.approx((2 * 0.7 + 0.5) / 3)


def test_bm25_ranks_the_matching_entry_first_across_word_forms():
    entries = [
        entry(1, "Bob sold bread at the market"),
        entry(2, "Tamsin carved a heron from driftwood last spring"),
        entry(3, "It rained all day"),
    ]
    results = search_entries(entries, "When did Tamsin carve a heron?", now=NOW,
                             params=SearchParams(context_weight=0, **RELEVANCE_ONLY))
    assert results[0][1]["id"] == 2
    assert results[0][0] == pytest.approx(1.0)
    assert all(r[1]["id"] != 3 for r in results)


def test_rare_terms_weigh_more_than_common_ones():
    entries = [entry(i, "the market is busy today") for i in range(1, 7)]
    entries.append(entry(7, "a dragon was seen today"))
    results = search_entries(entries, "busy dragon", now=NOW,
                             params=SearchParams(context_weight=0, **RELEVANCE_ONLY))
    assert results[0][1]["id"] == 7
    assert len(results) == 7


def test_a_query_with_no_match_returns_nothing_and_empty_lists_recent_important():
    entries = [
        entry(1, "old and dull", hours_ago=10, importance=2),
        entry(2, "fresh and vital", hours_ago=0.1, importance=9),
    ]
    assert search_entries(entries, "zeppelin", now=NOW) == []
    listing = search_entries(entries, "", now=NOW)
    assert [r[1]["id"] for r in listing] == [2, 1]


def test_recency_and_importance_break_relevance_ties_by_weight():
    entries = [
        entry(1, "the dragon attacked", hours_ago=0.0, importance=2),
        entry(2, "the dragon attacked", hours_ago=100, importance=10),
    ]
    recent = search_entries(entries, "dragon", now=NOW,
                            params=SearchParams(alpha_importance=0, context_weight=0))
    important = search_entries(entries, "dragon", now=NOW,
                               params=SearchParams(alpha_recency=0, context_weight=0))
    assert recent[0][1]["id"] == 1
    assert important[0][1]["id"] == 2


def test_filters_tags_days_project_and_trust():
    entries = [
        entry(1, "quest news", tags=["quest", "alice"], related_projects=["p1"]),
        entry(2, "quest news", tags=["quest"], hours_ago=24 * 10),
        entry(3, "quest news", tags=["Quest", "Alice"], source_trust=0.3),
    ]
    found = lambda **kw: sorted(r[1]["id"] for r in search_entries(  # noqa: E731
        entries, "quest", now=NOW, filters=SearchFilters(**kw)))
    assert found(tags=["quest", "alice"]) == [1, 3]
    assert found(days_back=7) == [1, 3]
    assert found(related_to_project="P1") == [1]
    assert found(min_trust=0.5) == [1, 2]


def test_speaker_named_in_the_query_is_favoured():
    entries = [
        entry(1, "I love fishing off the pier", source_entity="Bob"),
        entry(2, "I love fishing off the pier", source_entity="Orla"),
    ]
    results = search_entries(entries, "What does Orla love?", now=NOW,
                             params=SearchParams(context_weight=0, **RELEVANCE_ONLY))
    assert results[0][1]["id"] == 2
    assert results[0][0] > results[1][0]


def test_the_speaker_boost_does_not_spill_onto_the_other_persons_lines():
    # Wren is asked about; Hale only replied next to Wren's best line. Wren's weaker line must
    # still rank above Hale's reply: the boost of Wren's lines is applied after the neighbours'
    # share, so the reply borrows Wren's line unboosted.
    filler = ["The tide came in early.", "Gulls on the harbour wall.", "Rain over the hills."]
    entries = [
        entry(1, "I rebuilt the forge bellows with new leather.", source_entity="Wren"),
        entry(2, "Nice, that sounds like a lot of patience.", source_entity="Hale"),
        *[entry(3 + i, text, source_entity="Hale") for i, text in enumerate(filler)],
        entry(6, "The forge stays cold until spring.", source_entity="Wren"),
        *[entry(7 + i, text, source_entity="Hale") for i, text in enumerate(filler)],
    ]
    results = search_entries(entries, "What about Wren's forge bellows?", now=NOW,
                             params=SearchParams(**RELEVANCE_ONLY))
    ranked = [r[1]["id"] for r in results]
    assert ranked[:2] == [1, 6]
    assert ranked.index(6) < ranked.index(2)
    # without a speaker boost the neighbour's share is all there is to it, as before
    plain = search_entries(entries, "What about Wren's forge bellows?", now=NOW,
                           params=SearchParams(speaker_boost=0, **RELEVANCE_ONLY))
    assert [r[1]["id"] for r in plain][0] == 1


def test_neighbouring_entries_inherit_context():
    entries = [
        entry(1, "How was the opening night of your forge?", source_entity="Wren"),
        entry(2, "Thanks! I'm excited, it went great.", source_entity="Hale"),
        entry(3, "Unrelated chatter about lunch"),
    ]
    without = search_entries(entries, "forge opening night", now=NOW,
                             params=SearchParams(context_weight=0))
    assert [r[1]["id"] for r in without] == [1]
    with_context = search_entries(entries, "forge opening night", now=NOW,
                                  params=SearchParams(**RELEVANCE_ONLY))
    assert [r[1]["id"] for r in with_context][:2] == [1, 2]


def test_embedding_fusion_finds_paraphrases_bm25_misses():
    vectors = {"canine": [1.0, 0.0], "a dog barked": [0.9, 0.1], "a cat slept": [0.0, 1.0]}
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return [vectors[t] for t in texts]

    entries = [entry(1, "a dog barked"), entry(2, "a cat slept")]
    assert search_entries(entries, "canine", now=NOW) == []
    for fusion in ("rrf", "score"):
        params = SearchParams(fusion=fusion, embedding_weight=0.5, context_weight=0,
                              **RELEVANCE_ONLY)  # fmt: skip
        results = search_entries(entries, "canine", now=NOW, embed=embed, params=params)
        assert results[0][1]["id"] == 1
    # entry vectors are cached: later calls embed only the query
    assert calls[-1] == ["canine"]


def test_semantic_scores_fuse_into_one_relevance_instead_of_the_better_of_two():
    entries = [entry(1, "wolves at the gate"), entry(2, "wolves in the woods"),
               entry(3, "sheep were lost")]  # fmt: skip
    options = {"context_weight": 0, "embedding_weight": 0.3, **RELEVANCE_ONLY}
    plain = search_entries(entries, "wolves", now=NOW, params=SearchParams(**options))
    assert [r[1]["id"] for r in plain] == [2, 1]  # a BM25 tie: the newer position first
    fused = search_entries(entries, "wolves", now=NOW, semantic_scores={1: 0.9, 3: 0.8},
                           params=SearchParams(**options))  # fmt: skip
    ranked = [r[1]["id"] for r in fused]
    # entry 1 is found both ways and now leads; entry 3 only has a dense similarity
    assert ranked[0] == 1 and set(ranked) == {1, 2, 3}
    assert fused[0][0] == pytest.approx(1.0)
    # with no weight the semantic scores change nothing
    none = search_entries(entries, "wolves", now=NOW, semantic_scores={1: 0.9},
                          params=SearchParams(**{**options, "embedding_weight": 0}))
    assert [r[1]["id"] for r in none] == [2, 1]


def test_relevance_gate_keeps_barely_relevant_recent_entries_from_winning():
    entries = [
        # the answer: an old, ordinary entry that matches every query word
        entry(1, "the blacksmith forged a silver sword", hours_ago=500, importance=3),
        # a fresh, important entry that shares one common word only
        entry(2, "the silver moon rose over the harbour", hours_ago=0.0, importance=10),
    ]
    query = "blacksmith forged silver sword"
    seed = search_entries(entries, query, now=NOW, params=SearchParams(context_weight=0))
    assert seed[0][1]["id"] == 2  # the seed's formula over every match: recency wins
    gated = search_entries(entries, query, now=NOW,
                           params=SearchParams(context_weight=0, relevance_gate=0.5))
    # the answer wins; the barely relevant entry only follows it
    assert [r[1]["id"] for r in gated] == [1, 2]
    # within the gate, recency and importance still reorder relevant entries
    close = [entry(1, "the blacksmith forged a sword", hours_ago=500, importance=2),
             entry(2, "the blacksmith forged a sword", hours_ago=0.0, importance=9)]  # fmt: skip
    gated = search_entries(close, query, now=NOW, params=SearchParams(relevance_gate=0.5))
    assert gated[0][1]["id"] == 2


def test_rerank_pool_limits_the_hybrid_to_the_most_relevant():
    entries = [entry(i, "wolves " * (1 + i % 3) + f"note {i}", hours_ago=i, importance=1 + i % 9)
               for i in range(1, 21)]  # fmt: skip
    relevance_only = search_entries(entries, "wolves", now=NOW, limit=5,
                                    params=SearchParams(context_weight=0, **RELEVANCE_ONLY))
    pooled = search_entries(entries, "wolves", now=NOW, limit=5,
                            params=SearchParams(context_weight=0, rerank_pool=5))
    assert {r[1]["id"] for r in pooled} == {r[1]["id"] for r in relevance_only}
    unpooled = search_entries(entries, "wolves", now=NOW, limit=5,
                              params=SearchParams(context_weight=0))
    assert {r[1]["id"] for r in unpooled} != {r[1]["id"] for r in relevance_only}


def test_the_synchronous_search_never_embeds(monkeypatch, make_ports):
    from dataclasses import fields

    from ai_assistant.plumbing.settings import Settings

    def forbidden(*args, **kwargs):
        raise AssertionError("embedding computed in the synchronous search")

    monkeypatch.setattr(dense, "cosine_scores", forbidden)
    monkeypatch.setattr(dense, "embeddings", forbidden)
    overrides = {"journal.embedding_weight": 0.5, "journal.context_weight": 0,
                 "journal.context_terms": 0}
    options = SearchParams.from_settings(Settings(overrides=overrides))
    assert "embed" not in {knob.name for knob in fields(options)}
    assert options.relevance_gate > 0 and options.rerank_pool
    ports = make_ports(overrides=overrides)
    Journal(ports).add("Wolves attacked the sheep")
    Journal(ports).add("The baker sells bread")
    assert [e["content"] for _, e in search_journal(ports, "wolves")] == [
        "Wolves attacked the sheep"
    ]
    assert search_journal(ports, "livestock losses") == []


def test_index_is_cached_per_journal_version():
    cache = JournalIndexCache()
    entries = [entry(1, "alpha"), entry(2, "beta")]
    first = get_index(entries, cache)
    assert get_index(list(entries), cache) is first  # the same entries
    grown = get_index(entries + [entry(3, "gamma alpha")], cache)
    assert grown is not first and grown.size == 3
    assert grown.bm25(["gamma"]).tolist()[:2] == [0.0, 0.0]
    # entries read back from storage are new objects: a new index, with the same content
    reloaded = get_index([dict(e) for e in entries], cache)
    assert reloaded is not first
    assert reloaded.bm25(["alpha"]).tolist() == first.bm25(["alpha"]).tolist()


def test_a_changed_journal_is_reindexed_from_its_own_cache_not_the_process_table(monkeypatch):
    """A world's corpora outgrow the process-wide table of terms; an assistant's own stay."""
    built = []

    class Counted(index_module._Document):
        def __init__(self, content):
            built.append(content)
            super().__init__(content)

    monkeypatch.setattr(index_module, "_Document", Counted)
    index_module._document.cache_clear()
    cache = JournalIndexCache()
    entries = [entry(i, f"the dragon ate bread number {i}") for i in range(5)]
    get_index(entries, cache)
    assert len(built) == 5
    index_module._document.cache_clear()  # as when other assistants filled the table
    changed = entries[1:] + [entry(9, "a storm over the harbour")]  # one out, one in
    rebuilt = get_index(changed, cache)
    assert built[5:] == ["a storm over the harbour"]
    fresh = index_module.JournalIndex(changed)
    for term in ("dragon", "storm", "bread"):
        assert rebuilt.bm25([term]).tolist() == fresh.bm25([term]).tolist()
    assert rebuilt.epochs == fresh.epochs and rebuilt.epochs[0] is not None
    assert set(cache.documents) == {e["content"] for e in changed}  # the old version's dropped


def test_a_name_two_speakers_share_lists_both_their_entries_in_order():
    entries = [entry(1, "hello", source_entity="Ann Lee"), entry(2, "hi", source_entity="Bob"),
               entry(3, "hey", source_entity="Cid Lee"), entry(4, "yo", source_entity="Ann Lee")]
    built = get_index(entries)
    assert built.speaker_positions["lee"].tolist() == [0, 2, 3]
    assert built.speaker_positions["ann"].tolist() == [0, 3]
    assert built.speaker_names == {"ann", "bob", "cid", "lee"}


def counting_embed(calls):
    def embed(texts):
        calls.append(list(texts))
        return [[float(len(text)), float(text.count("a")) + 1.0, 1.0] for text in texts]

    return embed


def test_embedding_matrices_reuse_rows_when_the_texts_change_not_only_grow(monkeypatch):
    calls = []
    embed = counting_embed(calls)
    matrices = dense.EmbeddingMatrices()
    first = matrices.matrix(embed, ("alpha", "beta", "gamma"))
    dense._EMBED_CACHE.clear()  # the process-wide vectors gone: the assistant's own stay
    calls.clear()
    changed = matrices.matrix(embed, ("beta", "gamma", "delta", "alpha"))
    assert calls == [["delta"]]
    expected = dense.unit_rows(embed(["beta", "gamma", "delta", "alpha"]))
    assert numpy.allclose(changed, expected)
    assert numpy.allclose(first, dense.unit_rows(embed(["alpha", "beta", "gamma"])))  # kept


def test_the_process_wide_vectors_drop_their_oldest_when_full(monkeypatch):
    calls = []
    embed = counting_embed(calls)
    monkeypatch.setattr(dense, "_EMBED_CACHE_MAX", 3)
    monkeypatch.setattr(dense, "_EMBED_CACHE", {})
    dense.embeddings(embed, ["a", "b", "c"])
    dense.embeddings(embed, ["d"])
    assert list(dense._EMBED_CACHE[dense._embed_key(embed)]) == ["b", "c", "d"]
    calls.clear()
    dense.embeddings(embed, ["b", "c", "d"])
    assert calls == []  # the newest three are still known


def test_ten_thousand_entries_search_speed_is_reported(capsys):
    words = ["dragon", "tavern", "quest", "alice", "bob", "market", "bread", "storm", "river",
             "sword", "garden", "castle", "letter", "secret", "festival", "harbor"]  # fmt: skip
    entries = [
        entry(
            i,
            " ".join(words[(i * k) % len(words)] for k in (1, 3, 5, 7)) + f" note {i}",
            hours_ago=i / 10,
            source_entity=["Alice", "Bob"][i % 2],
        )  # fmt: skip
        for i in range(10_000)
    ]
    cache = JournalIndexCache()
    search_entries(entries, "warm-up", now=NOW, index_cache=cache)  # builds the index once
    start = time.perf_counter()
    for query in ("dragon in the tavern", "What did Alice say about the secret letter?",
                  "storm over the harbor", ""):  # fmt: skip
        results = search_entries(entries, query, now=NOW, limit=10, index_cache=cache)
        assert len(results) == 10
    per_query = (time.perf_counter() - start) / 4 * 1000
    with capsys.disabled():
        print(f"\n10,000-entry journal search: {per_query:.1f} ms per query")


def dated(id, content, moment, **extra):
    item = entry(id, content, **extra)
    item["timestamp"] = iso(moment)
    return item


def test_entries_from_the_time_the_query_names_are_favoured():
    entries = [
        dated(1, "I made coconut ice cream, so tasty", datetime(2022, 11, 9, 15, tzinfo=UTC)),
        dated(2, "I made a pie, so tasty", datetime(2022, 11, 20, 15, tzinfo=UTC)),
        dated(3, "I made a cake, so tasty", datetime(2022, 10, 1, 15, tzinfo=UTC)),
    ]
    question = "What did you make on 9 November, 2022?"
    boosted = SearchParams(context_weight=0, time_boost=1.0, **RELEVANCE_ONLY)
    ranked = search_entries(entries, question, now=NOW, params=boosted)
    assert ranked[0][1]["id"] == 1
    assert ranked[0][0] == pytest.approx(1.0)
    assert ranked[1][0] < 0.75  # the others: no bonus, still candidates
    # a month, and a month in any year
    assert search_entries(entries, "What did you make in October?", now=NOW,
                          params=boosted)[0][1]["id"] == 3  # fmt: skip
    # off: the date words are only words, and no entry contains them
    off = search_entries(entries, question, now=NOW,
                         params=SearchParams(context_weight=0, time_boost=0.0, **RELEVANCE_ONLY))
    assert off[0][0] == pytest.approx(off[1][0])


def test_the_date_words_leave_the_text_match():
    entries = [
        dated(1, "The November storm flooded the cellar", datetime(2022, 3, 1, tzinfo=UTC)),
        dated(2, "The cellar was dry and quiet", datetime(2022, 11, 9, tzinfo=UTC)),
    ]
    boosted = SearchParams(context_weight=0, time_boost=1.0, **RELEVANCE_ONLY)
    ranked = search_entries(entries, "What was the cellar like on 9 November 2022?", now=NOW,
                            params=boosted)  # fmt: skip
    assert ranked[0][1]["id"] == 2
    # a time that matches no entry leaves the query as it was
    ranked = search_entries(entries, "What was the cellar like in November 1999?", now=NOW,
                            params=boosted)  # fmt: skip
    assert ranked[0][1]["id"] == 1


def test_a_question_about_a_time_alone_lists_that_time():
    entries = [
        dated(1, "Bob sold me a lantern", NOW - timedelta(days=1, hours=2)),
        dated(2, "A dragon flew over the market", NOW - timedelta(days=1, hours=1)),
        dated(3, "It rained all day", NOW - timedelta(days=3)),
        dated(4, "Something happened at the mill", NOW - timedelta(days=5)),
    ]
    ranked = search_entries(entries, "What happened yesterday?", now=NOW,
                            params=SearchParams(time_boost=1.0, context_weight=0))
    assert {r[1]["id"] for r in ranked[:2]} == {1, 2}
    assert [r[1]["id"] for r in ranked][2:] == [4]  # the word match from another day follows
    # with neighbouring context (the default) yesterday still comes first
    boosted = SearchParams(time_boost=1.0)
    ranked = search_entries(entries, "What happened yesterday?", now=NOW, params=boosted)
    assert {r[1]["id"] for r in ranked[:2]} == {1, 2}
    assert search_entries(entries, "yesterday?", now=NOW, params=boosted)
    assert {r[1]["id"] for r in search_entries(entries, "yesterday?", now=NOW,
                                               params=boosted)} == {1, 2}  # fmt: skip


def test_time_boost_is_a_setting():
    from ai_assistant.plumbing.settings import Settings

    assert SearchParams.from_settings(Settings()).time_boost == 1.0
    options = SearchParams.from_settings(Settings(overrides={"journal.time_boost": 0}))
    assert options.time_boost == 0


def test_a_new_embedder_given_a_gone_ones_id_never_reads_its_vectors():
    first = counting_embed([])
    dense.embeddings(first, ["the mill wheel"])
    key = dense._embed_key(first)
    # a new embedder that the interpreter gave the same id (the first one gone)
    calls = []
    second = counting_embed(calls)
    dense._EMBED_OWNERS[dense._embed_key(second)] = dense._EMBED_OWNERS.pop(key)
    dense._EMBED_CACHE[dense._embed_key(second)] = dense._EMBED_CACHE.pop(key)
    dense.embeddings(second, ["the mill wheel"])
    assert calls == [["the mill wheel"]]  # computed by the new one, not read from the old
