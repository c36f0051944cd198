"""Document expansion with a turn's context: an entry is read with its neighbours' words."""

from datetime import UTC, datetime, timedelta

import numpy
import pytest

from ai_assistant.memory.recall.pipeline import recall_params
from ai_assistant.memory.search.index import get_index
from ai_assistant.memory.search.journal_search import search_entries
from ai_assistant.memory.search.params import SearchParams
from ai_assistant.memory.search.terms import stem
from ai_assistant.plumbing.ports import iso
from ai_assistant.plumbing.settings import Settings

NOW = datetime(2025, 6, 2, 18, 0, tzinfo=UTC)
# Each line read alone, relevance only: what the context terms change and nothing else.
ALONE = {"alpha_recency": 0.0, "alpha_importance": 0.0, "context_weight": 0.0}


def entry(id, content, speaker, minutes_ago=60):
    return {"id": id, "timestamp": iso(NOW - timedelta(minutes=minutes_ago)),
            "content": content, "importance": 5, "source_entity": speaker}  # fmt: skip


# An invented exchange: the answer to "the lighthouse lamp" names neither word.
EXCHANGE = [
    entry(1, "The ferry was late again this morning.", "Orla", 90),
    entry(2, "Did you ever fix the lighthouse lamp?", "Bram", 80),
    entry(3, "Yes! New wick, polished mirrors, it shines past the reef now.", "Tamsin", 79),
    entry(4, "Gulls keep stealing chips on the quay.", "Orla", 70),
    entry(5, "My cousin sells smoked herring at the market.", "Bram", 60),
]


def ranked_ids(entries, query, **params):
    return [e["id"] for _, e in search_entries(entries, query, now=NOW,
                                               params=SearchParams(**params))]  # fmt: skip


def test_the_reply_after_a_question_is_found_through_the_questions_words():
    assert ranked_ids(EXCHANGE, "lighthouse lamp", **ALONE) == [2]
    found = ranked_ids(EXCHANGE, "lighthouse lamp", context_terms=0.9, **ALONE)
    assert found[0] == 2  # the line that says it first
    # then the lines beside it (the reply, and the one before), never the lines further off
    assert sorted(found[1:]) == [1, 3]


def test_a_line_that_says_the_word_outranks_one_that_only_stands_next_to_it():
    # the same length, so only where the word is said differs
    entries = [entry(1, "The kiln cracked overnight.", "Wren"),
               entry(2, "That is a truly awful shame.", "Hale")]  # fmt: skip
    index = get_index(entries)
    scores = index.bm25_in_context({stem("kiln"): 1.0}, 0.9)
    assert scores[0] > scores[1] > 0
    assert index.bm25_in_context({stem("kiln"): 1.0}, 0.0)[1] == 0.0


def test_a_line_between_two_that_say_a_word_is_not_counted_twice():
    entries = [entry(1, "The kiln cracked overnight.", "Wren"),
               entry(2, "That is a truly awful shame.", "Hale"),
               entry(3, "The kiln cracked overnight.", "Wren")]  # fmt: skip
    alone = [entry(1, "The kiln cracked overnight.", "Wren"),
             entry(2, "That is a truly awful shame.", "Hale"),
             entry(3, "The pond froze overnight.", "Wren")]  # fmt: skip
    between = get_index(entries).bm25_in_context({stem("kiln"): 1.0}, 0.9)
    beside_one = get_index(alone).bm25_in_context({stem("kiln"): 1.0}, 0.9)
    # the larger of the two neighbours counts, not their sum (the idf differs: two say it)
    idf_ratio = get_index(entries).idf(stem("kiln")) / get_index(alone).idf(stem("kiln"))
    assert between[1] == pytest.approx(beside_one[1] * idf_ratio)
    assert between[1] < between[0]


def test_without_context_terms_the_scores_are_plain_bm25():
    index = get_index(EXCHANGE)
    weights = {stem("lighthouse"): 1.0, stem("lamp"): 0.5, stem("herring"): 0.3}
    numpy.testing.assert_allclose(index.bm25_in_context(weights, 0.0),
                                  index.bm25_weighted(weights))  # fmt: skip
    # an entry's own words are scored as plain BM25 scores them, context or not
    with_context = index.bm25_in_context({stem("herring"): 1.0}, 0.9)
    assert with_context[4] == pytest.approx(index.bm25_weighted({stem("herring"): 1.0})[4])
    assert with_context[3] > 0 and with_context[:3].sum() == 0.0  # only its neighbour gains
    assert index.bm25_in_context({"unheardof": 1.0}, 0.9).sum() == 0.0


def test_a_query_matching_nothing_still_finds_nothing():
    assert ranked_ids(EXCHANGE, "volcano eruption", context_terms=0.9, **ALONE) == []


def test_the_setting_reaches_the_search_and_recall_reads_items_alone():
    settings = Settings(overrides={"journal.context_terms": 0.4})
    assert SearchParams.from_settings(settings).context_terms == 0.4
    assert SearchParams.from_settings(Settings()).context_terms == 0.9
    # recall's corpus puts memories before the journal: no item's neighbour is its context
    assert recall_params(settings).context_terms == 0.0
