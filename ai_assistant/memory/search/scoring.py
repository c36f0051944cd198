"""
How much an entry answers a query: its relevance (BM25, feedback, dense fusion, boosts) and the
specification's weighted mean of recency, importance and relevance (Generative Agents' formula)::

    score = (a_rec * recency + a_imp * importance + a_rel * relevance) / (a_rec + a_imp + a_rel)
"""

import math
from collections import Counter

import numpy

from ai_assistant.memory.search.expansion import expanded_query
from ai_assistant.memory.search.terms import relevance_keyword_overlap
from ai_assistant.plumbing.ports import parse_iso

CONTEXT_RADIUS = 2  # neighbours on each side that inherit relevance (halving per step)
TIME_FLOOR = 0.05  # share of the best match an entry from the named time gets at least
RRF_K = 60  # reciprocal-rank fusion: 1 / (RRF_K + rank)
DENSE_POOL = 100  # dense similarities fused: at least the best this many (and every BM25 match)


# ----------------------------------------------------------------------------------------------
# The specification's formula


def recency_score(age_hours, decay=0.99):
    """
    Args:
        age_hours (float): How old the entry is.
        decay (float): Rate per hour (the specification's 0.99).

    Returns:
        float: exp(-decay * age_hours), 1.0 for entries from the future or now.
    """
    return math.exp(-decay * max(0.0, age_hours))


def score_episodic_memory(
    entry,
    query,
    now,
    alpha_recency=1.0,
    alpha_importance=1.0,
    alpha_relevance=1.0,
    recency_decay=0.99,
    relevance=None,
):
    """
    The specification's hybrid score of one entry (Generative Agents' formula).

    Args:
        entry (dict): A journal entry.
        query (str): The query.
        now (datetime): The current time.
        alpha_recency, alpha_importance, alpha_relevance (float): Weights.
        recency_decay (float): Rate per hour.
        relevance (float, optional): A relevance already computed (e.g. BM25); the
            specification's keyword overlap is used when omitted.

    Returns:
        float: The weighted mean, 0.0-1.0.
    """
    moment = parse_iso(entry.get("timestamp"))
    age_hours = (now - moment).total_seconds() / 3600 if moment else float("inf")
    recency = recency_score(age_hours, recency_decay) if moment else 0.0
    importance = entry.get("importance", 5) / 10.0
    if relevance is None:
        relevance = relevance_keyword_overlap(query, entry.get("content", ""))
    return _combine(recency, importance, relevance, alpha_recency, alpha_importance,
                    alpha_relevance)  # fmt: skip


def _combine(recency, importance, relevance, a_rec, a_imp, a_rel):
    total = a_rec + a_imp + a_rel
    if total <= 0:
        return relevance
    return (a_rec * recency + a_imp * importance + a_rel * relevance) / total


def formula_scores(index, entries, positions, relevance, now_epoch, params):
    """
    The specification's weighted mean at `positions` (array), vectorised.

    Args:
        index (JournalIndex): The entries' index (their times).
        entries (list): The journal entries.
        positions (numpy.ndarray): Positions to score.
        relevance (numpy.ndarray or None): Relevance of every entry (None: 0 everywhere).
        now_epoch (float): The current time (epoch seconds).
        params (SearchParams): The weights and the recency decay.
    """
    a_rec, a_imp, a_rel = params.alpha_recency, params.alpha_importance, params.alpha_relevance
    ages = numpy.maximum(0.0, (now_epoch - index.epoch_array[positions]) / 3600)
    recency = numpy.nan_to_num(numpy.exp(-params.recency_decay * ages), nan=0.0)
    importance = (
        numpy.asarray([entries[p].get("importance") or 0 for p in positions.tolist()], float) / 10.0
    )
    rel = relevance[positions] if relevance is not None else numpy.zeros(len(positions))
    total = a_rec + a_imp + a_rel
    if total <= 0:
        return rel
    return (a_rec * recency + a_imp * importance + a_rel * rel) / total


# ----------------------------------------------------------------------------------------------
# Relevance


def relevance_scores(index, terms, named, dense, params, in_window=None, expansion=None):
    """
    Relevance 0-1 of every entry (array, the best match 1.0), or None when nothing is relevant.

    BM25 of the query terms, each entry read with its neighbours' words at `context_terms`
    (document expansion: the answer to a question is often a turn that names nothing the
    question says, after one that does), and of their expansion (the journal's words nearest
    in meaning, at `expansion_weight`), widened by pseudo-relevance feedback, fused with the dense
    similarities, then the boosts: the time the query names, the context of neighbouring
    entries, and last the speakers it names. The speaker boost comes after the neighbours'
    share: in a conversation a named speaker's line sits between the other person's, and
    boosted first, its weight would spill onto their lines (on LoCoMo's dev split, recall@10
    0.758 -> 0.774 at the same settings).

    Args:
        index (JournalIndex): The journal's index.
        terms (list[str]): The query's terms.
        named (frozenset): Speakers named in the query.
        dense (numpy.ndarray or None): Dense similarity of every entry.
        params (SearchParams): The knobs.
        in_window (numpy.ndarray, optional): Mask of the entries from the time the query names.
        expansion (dict, optional): `expansion.expansion_terms` of the query.
    """
    raw = index.bm25_in_context(dict.fromkeys(terms, 1.0), params.context_terms)
    if expansion and params.expansion_weight > 0:
        raw = raw + index.bm25_weighted(expanded_query(expansion, terms,
                                                       params.expansion_weight))  # fmt: skip
    docs, count, weight = params.feedback
    if docs and count and weight and raw.any():
        raw = raw + index.bm25_weighted(_feedback_terms(index, raw, set(terms), docs, count,
                                                        weight))  # fmt: skip
    if dense is not None and params.embedding_weight > 0:
        raw = _fuse(raw, dense, params.fusion, params.embedding_weight)
    if in_window is not None:
        _favour_the_time(raw, in_window, params.time_boost)
    if not raw.any():
        return None
    if params.context_weight:
        _share_with_neighbours(raw, params.context_weight, index.places)
    if named and params.speaker_boost:
        _favour_the_speakers(raw, index, named, params.speaker_boost)
    # the best match among those that may be ranked (`index.WholeCorpus.context_only`)
    best = raw.max() if index.rankable is None else raw[index.rankable].max(initial=0.0)
    if best <= 0:
        return None
    return raw / best


def _favour_the_time(raw, in_window, time_boost):
    # Entries from the time the query names are favoured, and all of them are candidates:
    # with a small floor where other entries of that time match the words, and as good
    # as the best match where none does ("what happened yesterday?" is about yesterday,
    # not about every entry that says "happened").
    best = raw.max() or 1.0
    floor = TIME_FLOOR * best if raw[in_window].any() else best
    raw[:] = numpy.where(in_window, numpy.maximum(raw, floor), raw)
    raw[in_window] *= 1.0 + time_boost


def _favour_the_speakers(raw, index, named, speaker_boost):
    # What the named people said, including what their lines borrowed from the neighbours
    # (the answer after a question); the lines around theirs keep only their own share.
    for name in named:
        where = index.speaker_positions.get(name)
        if where is not None:
            raw[where] *= 1.0 + speaker_boost


def _share_with_neighbours(raw, context_weight, places=None):
    # An entry inherits part of its neighbours' relevance (in a conversation the turn
    # before or after a strong match often holds the answer), halving with each step.
    # With `places` (a part of a larger corpus, `index.WholeCorpus`) the neighbours are those
    # next to each other in the whole corpus, not in the part: two candidates with others
    # between them in time are not neighbours.
    base = raw.copy()
    share = context_weight
    for step in range(1, CONTEXT_RADIUS + 1):
        if places is not None:
            for offset in (step, -step):
                found = numpy.searchsorted(places, places + offset)
                inside = found < len(places)
                beside = numpy.flatnonzero(inside)
                beside = beside[places[found[beside]] == places[beside] + offset]
                raw[beside] += share * base[found[beside]]
        elif step < len(base):
            raw[step:] += share * base[:-step]
            raw[:-step] += share * base[step:]
        share *= 0.5


def _feedback_terms(index, scores, query_terms, docs, count, weight):
    """
    Pseudo-relevance feedback: the terms that best characterise the top `docs` entries
    (weighted by each entry's share of the best score and by idf), as a weighted query.
    """
    top = numpy.argsort(-scores, kind="stable")[:docs]
    top = top[scores[top] > 0]
    best = scores[top[0]]
    gains = Counter()
    for position in top.tolist():
        share = scores[position] / best
        for term in index.doc_terms[position]:
            if term not in query_terms:
                gains[term] += share * index.idf(term)
    chosen = gains.most_common(count)
    if not chosen:
        return {}
    top_gain = chosen[0][1] or 1.0
    return {term: weight * gain / top_gain for term, gain in chosen}


def _fuse(bm25, cosines, fusion, embedding_weight, rrf_k=RRF_K, pool=DENSE_POOL):
    """Combine BM25 scores with embedding cosines (arrays over all entries)."""
    matched = numpy.flatnonzero(bm25 > 0)
    pool = min(len(cosines), max(pool, len(matched)))
    top = numpy.argpartition(-cosines, pool - 1)[:pool] if pool else numpy.array([], int)
    top = top[cosines[top] > 0]
    dense = numpy.zeros(len(cosines))
    dense[top] = cosines[top]
    if fusion == "score":
        best_sparse = bm25.max() or 1.0
        best_dense = dense.max() or 1.0
        return (1 - embedding_weight) * bm25 / best_sparse + embedding_weight * dense / best_dense
    fused = numpy.zeros(len(cosines))
    for ranking, where, weight in ((bm25, matched, 1 - embedding_weight),
                                   (dense, top, embedding_weight)):  # fmt: skip
        ordered = where[numpy.argsort(-ranking[where], kind="stable")]
        fused[ordered] += weight / (rrf_k + numpy.arange(1, len(ordered) + 1))
    return fused
