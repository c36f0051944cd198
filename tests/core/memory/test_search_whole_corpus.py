"""
Ranking a part of a corpus as the whole corpus ranks it (`index.WholeCorpus`): the postgres
store hands recall a few of its memories, with the scope's word statistics and every
candidate's place in time, and the ranking must be what it is over every memory.

Invented lines; no store: the statistics a database would send are counted here from the
lines left out.
"""

from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy

from ai_assistant.memory.search.index import JournalIndex, WholeCorpus
from ai_assistant.memory.search.journal_search import search_entries
from ai_assistant.memory.search.params import SearchParams
from ai_assistant.memory.search.terms import tokenize
from ai_assistant.plumbing.ports import iso

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LINES = [
    "The lantern festival is planned for the first full moon of autumn.",
    "Brannoc mended the harbour wall after the spring storm.",
    "Wenna paints paper lanterns in her kitchen every evening.",
    "The harbour master fined a trawler for mooring at the ferry steps.",
    "Wenna went to the market for red paper and candle stubs.",
    "Gulls stole a tray of pasties from the bakery window.",
    "Brannoc's boat needs new sails before the festival.",
    "Wenna sold forty lanterns to the innkeeper for the festival.",
    "A seal slept on the slipway all afternoon.",
    "The innkeeper hangs lanterns along the harbour every festival night.",
    "Old Kitto says the festival began when a ship was saved by lantern light.",
    "The bakery is trying a saffron bun recipe for the festival.",
    "Fog closed the harbour for two days.",
    "Elowen helps Wenna glue lantern frames.",
]
# the lines a database would pick (the best matches, and their neighbours), by position: the
# market, the gulls and the boat are left out
PICKED = (0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 13)
PARAMS = SearchParams(alpha_recency=0.0, alpha_importance=0.0, feedback_docs=3,
                      feedback_terms=5, feedback_weight=0.2)


def lines():
    return [{"id": f"m{number}", "content": text, "importance": 5, "source_entity": "Kitto",
             "timestamp": iso(NOW - timedelta(hours=len(LINES) - number))}
            for number, text in enumerate(LINES)]


def whole_for(picked):
    """What a database would send for the lines left out, and the picked lines' places."""
    left_out = [tokenize(LINES[n]) for n in range(len(LINES)) if n not in picked]
    return WholeCorpus(
        outside_documents=len(left_out),
        outside_length=float(sum(len(terms) for terms in left_out)),
        outside_frequencies=dict(Counter(term for terms in left_out for term in set(terms))),
        places=tuple(n + 1 for n in picked))


def test_a_part_given_the_whole_corpus_statistics_weighs_words_as_the_whole_does():
    everything = lines()
    whole = JournalIndex(everything)
    part = JournalIndex([everything[n] for n in PICKED], whole=whole_for(PICKED))
    alone = JournalIndex([everything[n] for n in PICKED])
    for term in ("lantern", "festiv", "harbour", "wenna"):
        assert part.idf(term) == whole.idf(term)
        assert alone.idf(term) != whole.idf(term)  # what the part alone would say
    query = tokenize("lanterns for the festival")
    assert numpy.allclose(part.bm25(query), whole.bm25(query)[list(PICKED)])
    assert not numpy.allclose(alone.bm25(query), whole.bm25(query)[list(PICKED)])


def test_a_part_ranks_its_lines_as_the_whole_corpus_ranks_them():
    everything = lines()
    picked = [everything[n] for n in PICKED]
    # the ones whose neighbours are all in the part are ranked; the outer ones lend relevance
    outside = {-2, -1, len(LINES), len(LINES) + 1}  # before the first line, after the last
    context_only = tuple(place for place, n in enumerate(PICKED)
                         if not {n - 2, n - 1, n + 1, n + 2} <= set(PICKED) | outside)
    whole = WholeCorpus(**{**whole_for(PICKED).__dict__, "context_only": context_only})
    for query in ("Who makes lanterns for the festival?", "harbour fog", "the innkeeper"):
        over_all = search_entries(everything, query, now=NOW, params=PARAMS, limit=20)
        ranked = {entry["id"] for n, entry in enumerate(picked) if n not in context_only}
        expected = [(round(score, 9), entry["id"]) for score, entry in over_all
                    if entry["id"] in ranked]
        found = search_entries(picked, query, now=NOW, params=PARAMS, limit=20, whole=whole)
        assert [(round(score, 9), entry["id"]) for score, entry in found] == expected, query
        assert expected


def test_lines_apart_in_time_do_not_share_relevance_in_a_part():
    everything = lines()
    picked = [everything[n] for n in (2, 10)]  # eight lines apart: not neighbours
    together = search_entries(picked, "paints paper lanterns", now=NOW, params=PARAMS, limit=5)
    apart = search_entries(picked, "paints paper lanterns", now=NOW, params=PARAMS, limit=5,
                           whole=whole_for((2, 10)))
    shared = dict((entry["id"], score) for score, entry in together)
    alone = dict((entry["id"], score) for score, entry in apart)
    assert alone["m10"] < shared["m10"]  # the next candidate lent it relevance
    over_all = dict((entry["id"], score) for score, entry in
                    search_entries(everything, "paints paper lanterns", now=NOW,
                                   params=PARAMS, limit=20))
    # m10's own neighbours (m8, m9, m11, m12) are not in the part: only its own words count
    assert alone["m2"] == 1.0 and over_all["m2"] == 1.0
