"""
Episodic search: find the journal entries that answer a query ("Episodic Search Scoring" of the
specification).

The score of an entry is the specification's (Generative Agents') weighted mean of three parts
(`scoring`)::

    score = (a_rec * recency + a_imp * importance + a_rel * relevance) / (a_rec + a_imp + a_rel)

- recency = exp(-decay * age_hours), decay `journal.recency_decay` (the specification's 0.99).
  Generative Agents itself used 0.995 ** game_hours and min-max normalised all three parts;
  the specification's form decays far faster (an entry a few hours old has recency ~0), so with
  the defaults recency only separates the last hour or so.
- importance = importance / 10.
- relevance in [0, 1]: by default BM25 over the journal (`index`; tokenised, lower-cased, stop
  words dropped, lemmatised then Snowball-stemmed: `terms`), scaled so the best match of the
  query is 1.0, with three boosts that help conversational memories: entries whose
  `source_entity` is named in the query (the speaker), entries written at the time the query
  names ("on 9 May", "last week"; see `time_references`), and entries next to a strong match
  (context: the answer is often the next turn). The speaker boost is applied last, after the
  neighbours' share, so it favours what the named person said without lifting the other
  person's lines around it.
  Dense similarities can be fused in (normalised-score fusion by default, or reciprocal-rank
  fusion): `semantic_scores` (`{entry id: similarity}`, e.g. the local embedder's or the
  semantic tier's, which the `search_journal` tool computes off the reactor) or an
  `embed(texts) -> list[vector]` function (for offline callers such as the benchmarks only: it
  computes embeddings in the caller's thread; see `dense`). The synchronous search an assistant
  runs on the reactor (`search_journal` here: prompt building, admin commands, reflection)
  never embeds anything.

**Relevance gate.** With a non-empty query the weighted mean is computed only over candidates
with real relevance: entries whose relevance is at least `relevance_gate` times the best match's,
and of those the `rerank_pool` most relevant. Recency and importance then reorder relevant
entries instead of lifting barely relevant ones (any fused similarity gives most entries a
little relevance, and the specification's recency/importance would otherwise decide among
those). With `relevance_gate=0` and no pool the specification's formula applies to every entry
with relevance > 0. An empty query ranks every entry by recency and importance (a "recent and
important" listing).

**Expansion.** A caller that embeds off the reactor (the `search_journal` tool) may pass the
journal's words nearest in meaning to the query's (`expansion.expansion_terms`): they join the
BM25 query at `journal.expansion_weight` times their similarity, so "what music does she like?"
also matches "guitar" and "concert" where the journal says them.

The knobs are one `SearchParams`, the filters one `SearchFilters`. An assistant's index,
embedding matrices and vocabulary live in its `ports.runtime.derived` (`journal_index_cache`,
`journal_embedding_matrices`, `journal_vocabulary`), dropped while the assistant is not
resident (`plumbing.residency`) and built again, to the same results, on the next search.
"""

from dataclasses import dataclass

import numpy

from ai_assistant.memory.corrections import not_recalled
from ai_assistant.memory.journal import get_journal
from ai_assistant.memory.search.dense import EmbeddingMatrices, dense_scores
from ai_assistant.memory.search.expansion import JournalVocabulary
from ai_assistant.memory.search.filters import SearchFilters
from ai_assistant.memory.search.index import JournalIndexCache, get_index
from ai_assistant.memory.search.params import SearchParams
from ai_assistant.memory.search.scoring import formula_scores, relevance_scores
from ai_assistant.memory.search.terms import STOPWORDS, stem, tokenize, words
from ai_assistant.memory.search.time_references import (
    find_time_references,
    strip_spans,
    window_mask,
)

# Names of this package's caches in `ports.runtime.derived`.
INDEX_CACHE = "journal_index"
MATRIX_CACHE = "journal_embedding_matrices"
VOCABULARY_CACHE = "journal_vocabulary"
_NO_FILTERS = SearchFilters()
_DEFAULT_PARAMS = SearchParams()


def journal_index_cache(ports):
    """The assistant's `JournalIndexCache` (its journal's BM25 indexes, one per version)."""
    return ports.runtime.derived_cache(INDEX_CACHE, JournalIndexCache)


def journal_embedding_matrices(ports):
    """The assistant's `EmbeddingMatrices` (its journal's vectors, for `dense_similarities`)."""
    return ports.runtime.derived_cache(MATRIX_CACHE, EmbeddingMatrices)


def journal_vocabulary(ports):
    """The assistant's `JournalVocabulary` (its journal's words, for `expansion_terms`)."""
    return ports.runtime.derived_cache(VOCABULARY_CACHE, JournalVocabulary)


@dataclass(frozen=True)
class _Query:
    """A query as the search reads it."""

    text: str  # stripped of the time references that matched entries
    terms: list  # its stemmed content words (not the speakers' names, unless nothing else)
    named: frozenset  # the speakers it names
    in_window: numpy.ndarray | None  # mask of the entries from the time it names


def _read_query(index, query, now, params):
    query = str(query or "").strip()
    in_window = None
    if query and params.time_boost > 0:
        windows, spans = find_time_references(query, now)
        if windows:
            offset = now.utcoffset()
            mask = window_mask(windows, index.epoch_array, offset.total_seconds() if offset else 0)
            if mask.any():
                in_window = mask
                query = strip_spans(query, spans)
    query_words = words(query)
    named = index.speaker_names.intersection(query_words) if query_words else frozenset()
    # A speaker's name says whose entries to favour; it is not a content word to match
    # (in a conversation the name mostly appears in greetings addressed to that person).
    terms = [stem(w) for w in query_words if w not in STOPWORDS and w not in named]
    if not terms and named:
        terms = [stem(w) for w in query_words if w not in STOPWORDS]
    return _Query(query, terms, named, in_window)


def _candidates(index, entries, query, params, embed, semantic_scores, expansion):
    """`(positions, relevance)` of the entries the query may return, or None for none."""
    if query.text and params.alpha_relevance > 0 and (query.terms or query.in_window is None):
        dense = dense_scores(index, entries, query.text, embed, semantic_scores,
                             params.embedding_weight)  # fmt: skip
        relevance = relevance_scores(index, query.terms, query.named, dense, params,
                                     query.in_window, expansion)  # fmt: skip
        if relevance is None:
            return None
        return numpy.flatnonzero(relevance > 0), relevance
    if query.text and not query.terms and query.in_window is None:
        return None
    # a query that names only a time ("yesterday?") lists that time by recency and importance
    if query.in_window is not None:
        return numpy.flatnonzero(query.in_window), None
    return numpy.arange(len(entries)), None


def _gate(positions, relevance, params):
    """`(head, tail)`: the positions the formula reorders, and those that follow them."""
    if relevance is None or not (params.relevance_gate > 0 or params.rerank_pool):
        return positions, positions[:0]
    # The specification's formula reorders only the clearly relevant entries (relevance is
    # scaled so the best match is 1.0, which always passes); the rest follow, most relevant
    # first, so recency and importance never push an irrelevant entry above a relevant one.
    by_relevance = positions[numpy.lexsort((-positions, -relevance[positions]))]
    gated = by_relevance[relevance[by_relevance] >= params.relevance_gate]
    head = gated[: params.rerank_pool] if params.rerank_pool else gated
    return numpy.sort(head), by_relevance[len(head):]


def _rank(index, entries, head, tail, relevance, now_epoch, params, limit):
    """`(score, entry)` pairs: the head by the formula, then the tail as it comes."""
    scores = formula_scores(index, entries, head, relevance, now_epoch, params)
    # best first; among equal scores the newer entry first
    order = numpy.lexsort((-head, -scores))[:limit]
    ranked = [(float(scores[i]), entries[int(head[i])]) for i in order]
    if len(ranked) < limit and len(tail):
        tail = tail[: limit - len(ranked)]
        tail_scores = formula_scores(index, entries, tail, relevance, now_epoch, params)
        ranked += [(float(score), entries[int(p)]) for score, p in zip(tail_scores, tail,
                                                                        strict=True)]
    return ranked


def _wrong_positions(index, entries):
    """
    Positions of the entries never ranked (marked wrong, correction notes), found once per
    journal version (its index).
    """
    wrong = getattr(index, "wrong_positions", None)
    if wrong is None:
        # entries are replaced, never changed in place, so a version's marks never change
        wrong = index.wrong_positions = numpy.flatnonzero(
            numpy.fromiter((not_recalled(entry) for entry in entries), bool, len(entries)))
    return wrong


def search_entries(entries, query, *, now, params=None, filters=None, limit=10, embed=None,
                   semantic_scores=None, index_cache=None, expansion=None,
                   whole=None):  # fmt: skip
    """
    Rank journal entries for a query (see the module doc for the score).

    Args:
        entries (list): Journal entries, oldest first (the journal's order).
        query (str): What to look for; empty ranks by recency and importance only.
        now (datetime): The current time (aware).
        params (SearchParams, optional): The knobs (default `SearchParams()`, the
            specification's formula with the default boosts).
        filters (SearchFilters, optional): What may be returned at all.
        limit (int): At most this many results.
        embed (callable, optional): `embed(texts) -> list[vector]`, fused with BM25 when given.
            It runs in the caller's thread: never pass it on the reactor.
        semantic_scores (dict or numpy.ndarray, optional): `{entry id: similarity}` computed
            elsewhere (the semantic tier's hits), or one similarity per entry in their order
            (the recall pipeline's dense product); fused with BM25 when given (instead of
            `embed`).
        index_cache (JournalIndexCache, optional): The assistant's index cache; without one
            the index is built for this search alone.
        expansion (dict, optional): The journal's words nearest in meaning to the query's
            (`expansion.expansion_terms`, computed off the reactor), added to the BM25 query at
            `params.expansion_weight`.
        whole (index.WholeCorpus, optional): The corpus the entries are a part of (a store's
            candidates): the BM25 statistics and the neighbours are then the whole corpus's.

    Returns:
        list: `(score, entry)` pairs, best first.
    """
    if not entries or limit <= 0:
        return []
    params = params or _DEFAULT_PARAMS
    filters = filters or _NO_FILTERS
    index = get_index(entries, index_cache, whole)
    query = _read_query(index, query, now, params)
    found = _candidates(index, entries, query, params, embed, semantic_scores, expansion)
    if found is None:
        return []
    positions, relevance = found
    # an entry staff marked as wrong (memory.corrections) is never recalled again
    wrong = _wrong_positions(index, entries)
    if len(wrong):
        positions = positions[~numpy.isin(positions, wrong)]
    if index.rankable is not None:  # a part of a larger corpus: some only lend relevance
        positions = positions[index.rankable[positions]]
    if filters.active:
        positions = filters.keep(entries, positions, index.epochs, now)
    if not len(positions):
        return []
    head, tail = _gate(positions, relevance, params)
    return _rank(index, entries, head, tail, relevance, now.timestamp(), params, limit)


def search_journal(ports, query, *, limit=None, filters=None):
    """
    Search this assistant's journal with its configured knobs (synchronous: never embeds).

    Args:
        ports (AssistantPorts): The assistant.
        query (str): What to look for.
        limit (int, optional): Default `journal.search_limit`.
        filters (SearchFilters, optional): What may be returned at all.

    Returns:
        list: `(score, entry)` pairs, best first.
    """
    if limit is None:
        limit = ports.settings.get("journal.search_limit")
    entries = get_journal(ports)["entries"]
    return search_entries(entries, query, now=ports.clock.now(),
                          params=SearchParams.from_settings(ports.settings), filters=filters,
                          limit=limit, index_cache=journal_index_cache(ports))  # fmt: skip


def split_matches(ports, query, hits):
    """
    Tell the hits that match the query itself from those only related to it.

    The ranking also returns entries that share no word with the query (a neighbour of a match,
    a feedback term, an embedding's similarity): shown as matches they read as false ("the
    weather line" for "lighthouse"). An entry matches when it shares a content word with the
    query (as the search reads words: lemmatised, stemmed), is by a speaker the query names, or
    was written at a time the query names.

    Args:
        ports (AssistantPorts): The assistant.
        query (str): The query.
        hits (list): `(score, entry)` pairs, as `search_journal` returns them.

    Returns:
        tuple: `(matches, related)`, each a list of `(score, entry)` in the hits' order.
    """
    entries = get_journal(ports)["entries"]
    index = get_index(entries, journal_index_cache(ports))
    read = _read_query(index, query, ports.clock.now(), SearchParams.from_settings(ports.settings))
    terms = set(read.terms)
    in_window = set()
    if read.in_window is not None:
        in_window = {entries[position].get("id") for position in numpy.flatnonzero(read.in_window)}
    matches, related = [], []
    for score, entry in hits:
        speaker = str(entry.get("source_entity") or "").lower()
        hit = (terms & set(tokenize(entry.get("content") or "")) or speaker in read.named
               or entry.get("id") in in_window)
        (matches if hit else related).append((score, entry))
    return matches, related
