"""
Episodic retrieval: find the journal entries that answer a query (seed 000, "Episodic Search
Scoring").

The score of an entry is the seed's (Generative Agents') weighted mean of three parts::

    score = (a_rec * recency + a_imp * importance + a_rel * relevance) / (a_rec + a_imp + a_rel)

- recency = exp(-decay * age_hours), decay `journal.recency_decay` (the seed's 0.99).
  Generative Agents itself used 0.995 ** game_hours and min-max normalised all three parts;
  the seed's form decays far faster (an entry a few hours old has recency ~0), so with the
  defaults recency only separates the last hour or so.
- importance = importance / 10.
- relevance in [0, 1]: by default BM25 over the journal (tokenised, lower-cased, stop words
  dropped, lemmatised then lightly stemmed), scaled so the best match of the query is 1.0, with
  three boosts that help conversational memories: entries whose `source_entity` is named in the
  query (the speaker), entries written at the time the query names ("on 9 May", "last week";
  see `time_references`), and entries next to a strong match (context: the answer is often the
  next turn).
  Dense similarities can be fused in (normalised-score fusion by default, or reciprocal-rank
  fusion): `semantic_scores` (`{entry id: similarity}`, e.g. the semantic tier's hits, which the
  `search_journal` tool fetches off the reactor) or an `embed(texts) -> list[vector]` function
  (for offline callers such as the benchmarks only: it computes embeddings in the caller's
  thread). The synchronous search an assistant runs on the reactor (`search_journal`,
  `search_settings`: prompt building, admin commands, reflection) never embeds anything.
  `relevance_keyword_overlap` keeps the seed's plain word-overlap measure for comparison.

**Relevance gate.** With a non-empty query the weighted mean is computed only over candidates
with real relevance: entries whose relevance is at least `relevance_gate` times the best match's,
and of those the `rerank_pool` most relevant. Recency and importance then reorder relevant
entries instead of lifting barely relevant ones (any fused similarity gives most entries a
little relevance, and the seed's recency/importance would otherwise decide among those). With
`relevance_gate=0` and no pool the seed's formula applies to every entry with relevance > 0.
An empty query ranks every entry by recency and importance (a "recent and important" listing).

The BM25 index of a journal is cached per journal version (its list of entry objects), and
the terms of each content are kept across versions, so repeated searches of a large journal
cost milliseconds and a journal that changed is re-indexed in tens of milliseconds at 10,000
entries.
"""

import math
import re
import threading
from collections import Counter, OrderedDict
from operator import methodcaller

import numpy
from lemminflect import getAllLemmas

from ai_assistant.memory.journal import get_journal
from ai_assistant.memory.time_references import find_time_references, strip_spans, window_mask
from ai_assistant.plumbing.ports import parse_iso

# ----------------------------------------------------------------------------------------------
# Text normalisation

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just let me more most my
    myself no nor not of off on once only or other ought our ours ourselves out over own same
    shan she should shouldn so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was wasn we were weren what when
    where which while who whom why will with won would wouldn you your yours yourself
    yourselves s t ll re ve d m o y also get got ever really much many lot
    """.split()
)

_APOSTROPHE_S = re.compile(r"['’]s\b")
_APOSTROPHE = re.compile(r"['’]")
_WORD = re.compile(r"[a-z0-9]+")
_STEM_CACHE = {}
_STEM_CACHE_MAX = 200_000
_LEMMA_ORDER = ("VERB", "NOUN", "ADJ", "ADV")
# LemmInflect reads its tables on first use (~0.2 s): do it at import (server start), not in
# the first search on the reactor.
getAllLemmas("went")


def lemma(word):
    """
    The dictionary form of an English word ("went" -> "go", "bought" -> "buy", "children" ->
    "child"), from LemmInflect's lookup tables; the word itself when they do not know it.

    A word that can be several parts of speech takes its verb lemma first, then its noun
    lemma ("saw" -> "see", "painting" -> "paint"): in what people tell an assistant, the verb
    reading is the common one, and it is what a question about the deed needs.
    """
    found = getAllLemmas(word)
    for part_of_speech in _LEMMA_ORDER:
        if part_of_speech in found:
            return found[part_of_speech][0]
    return word


def stem(word):
    """
    The word's lemma (irregular forms included), then a light suffix stripper (plurals, -ing,
    -ed, -ly, final e) for the words the lemma tables do not know.

    It is deliberately consistent rather than linguistically exact: "painting", "painted" and
    "paints" all become "paint"; "making", "made" and "make" all become "mak".

    Args:
        word (str): A lower-case word.

    Returns:
        str: Its stem.
    """
    cached = _STEM_CACHE.get(word)
    if cached is not None:
        return cached
    original = word
    word = lemma(word).lower()
    if len(word) > 3 and not word.isdigit():
        if word.endswith("ies") and len(word) > 4:
            word = word[:-3] + "y"
        elif word.endswith("sses"):
            word = word[:-2]
        elif word.endswith(("xes", "ches", "shes", "zes")):
            word = word[:-2]
        elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        if word.endswith("ing") and len(word) > 5:
            word = _undouble(word[:-3])
        elif word.endswith("ied") and len(word) > 4:
            word = word[:-3] + "y"
        elif word.endswith("ed") and len(word) > 4:
            word = _undouble(word[:-2])
        elif word.endswith("ly") and len(word) > 5:
            word = word[:-2]
        if word.endswith("e") and len(word) > 3:
            word = word[:-1]
    if len(_STEM_CACHE) > _STEM_CACHE_MAX:
        _STEM_CACHE.clear()
    _STEM_CACHE[original] = word
    return word


def _undouble(word):
    # "running" -> "runn" -> "run"; keep ll/ss/zz ("falling" -> "fall").
    if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "aeioulsz":
        return word[:-1]
    return word


def words(text):
    """Lower-case words of `text`, possessive 's and apostrophes removed (no stemming)."""
    text = _APOSTROPHE.sub("", _APOSTROPHE_S.sub("", str(text).lower()))
    return _WORD.findall(text)


def tokenize(text):
    """
    Args:
        text (str): Any text.

    Returns:
        list[str]: Stemmed content words (stop words dropped), in order.
    """
    return [stem(word) for word in words(text) if word not in STOPWORDS]


# ----------------------------------------------------------------------------------------------
# The seed's scoring, kept for comparison and for single-entry use


def relevance_keyword_overlap(query, content):
    """
    The seed's relevance: the share of the query's words found in the content (split on
    whitespace, lower-cased, no other normalisation).

    Returns:
        float: 0.0-1.0.
    """
    query_words = set(str(query).lower().split())
    content_words = set(str(content).lower().split())
    return len(query_words & content_words) / max(len(query_words), 1)


def recency_score(age_hours, decay=0.99):
    """
    Args:
        age_hours (float): How old the entry is.
        decay (float): Rate per hour (the seed's 0.99).

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
    The seed's hybrid score of one entry (Generative Agents' formula).

    Args:
        entry (dict): A journal entry.
        query (str): The query.
        now (datetime): The current time.
        alpha_recency, alpha_importance, alpha_relevance (float): Weights.
        recency_decay (float): Rate per hour.
        relevance (float, optional): A relevance already computed (e.g. BM25); the seed's
            keyword overlap is used when omitted.

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


# ----------------------------------------------------------------------------------------------
# BM25 index


# Tuned on the LoCoMo dev split (relevance only): short entries favour a low b.
BM25_K1 = 0.9
BM25_B = 0.4
CONTEXT_RADIUS = 2  # neighbours on each side that inherit relevance (halving per step)
TIME_FLOOR = 0.05  # share of the best match an entry from the named time gets at least


class JournalIndex:
    """
    BM25 postings and per-entry facts of one journal version.

    Each posting holds the entry's full BM25 weight for the term (idf times the saturated,
    length-normalised term frequency), so a query only sums the postings of its terms. The
    build is vectorised over per-content term arrays cached across versions, so a journal that
    changed by one entry is re-indexed in milliseconds even at 10,000 entries.

    Args:
        entries (list): Journal entries, oldest first.
        k1 (float), b (float): BM25 parameters.
    """

    def __init__(self, entries, k1=None, b=None):
        k1 = BM25_K1 if k1 is None else k1
        b = BM25_B if b is None else b
        self.size = len(entries)
        self.entries = tuple(entries)  # held, so their ids (the cache key) stay theirs
        documents = [_document(content) for content in map(methodcaller("get", "content", ""),
                                                             entries)]  # fmt: skip
        self.doc_terms = [document.terms for document in documents]
        self.epochs = [_epoch(t) for t in map(methodcaller("get", "timestamp"), entries)]
        self.epoch_array = numpy.array(self.epochs, dtype=float)  # None -> nan
        self.positions = {entry_id: position for position, entry_id in
                          enumerate(map(methodcaller("get", "id"), entries))}  # fmt: skip
        self._build_postings(documents, k1, b)
        self._build_speakers(entries)

    def _build_postings(self, documents, k1, b):
        sizes = numpy.fromiter((len(d.ids) for d in documents), numpy.int64, self.size)
        lengths = numpy.fromiter((d.length for d in documents), float, self.size)
        average = (lengths.mean() if self.size else 1.0) or 1.0
        term_ids = numpy.concatenate([d.ids for d in documents]) if documents else _NO_IDS
        frequencies = numpy.concatenate([d.counts for d in documents]) if documents else _NO_TF
        owners = numpy.repeat(numpy.arange(self.size), sizes)
        norms = k1 * (1 - b + b * lengths / average)
        saturated = frequencies * (k1 + 1) / (frequencies + norms[owners])
        # postings of one term together, each in journal order
        order = numpy.argsort(term_ids, kind="stable")
        ordered = term_ids[order]
        starts = numpy.flatnonzero(numpy.diff(ordered, prepend=-1)) if len(ordered) else _NO_IDS
        terms = ordered[starts]
        counts = numpy.diff(starts, append=len(ordered))
        idf = numpy.log(1 + (self.size - counts + 0.5) / (counts + 0.5))
        self._positions = owners[order]
        self._weights = saturated[order] * numpy.repeat(idf, counts)
        self._spans = dict(zip(terms.tolist(), zip(starts.tolist(), (starts + counts).tolist(),
                                                   strict=True), strict=True))  # fmt: skip

    def _build_speakers(self, entries):
        by_entity = {}
        for position, entity in enumerate(map(methodcaller("get", "source_entity"), entries)):
            if entity:
                by_entity.setdefault(entity, []).append(position)
        by_speaker = {}
        for entity, where in by_entity.items():
            for name in words(entity):
                by_speaker.setdefault(name, []).extend(where)
        self.speaker_positions = {
            name: numpy.unique(numpy.asarray(where, dtype=numpy.int64))
            for name, where in by_speaker.items()
        }
        self.speaker_names = frozenset(by_speaker)

    def postings(self, term):
        """`(positions, weights)` of the entries containing `term`, or None."""
        span = self._spans.get(_TERM_IDS.get(term))
        if span is None:
            return None
        start, end = span
        return self._positions[start:end], self._weights[start:end]

    def bm25(self, terms):
        """
        Args:
            terms (iterable): Query terms (already tokenised).

        Returns:
            numpy.ndarray: The BM25 score of every entry (0.0 where no term matches).
        """
        return self.bm25_weighted(dict.fromkeys(terms, 1.0))

    def bm25_weighted(self, weights):
        """
        Args:
            weights (dict): `{term: weight}` (an expanded query).

        Returns:
            numpy.ndarray: The weighted BM25 score of every entry.
        """
        scores = numpy.zeros(self.size)
        for term, weight in weights.items():
            found = self.postings(term)
            if found is not None:
                where, term_weights = found
                scores[where] += weight * term_weights  # an entry appears once per term
        return scores

    def idf(self, term):
        """The term's idf (0.0 for an unknown term)."""
        found = self.postings(term)
        if found is None:
            return 0.0
        n = len(found[0])
        return math.log(1 + (self.size - n + 0.5) / (n + 0.5))


class _Document:
    """The index's view of one content string: its terms, their ids and counts, its length."""

    __slots__ = ("terms", "ids", "counts", "length")

    def __init__(self, content):
        counts = Counter(tokenize(content))
        self.terms = tuple(counts)
        self.ids = numpy.fromiter((_TERM_IDS.setdefault(t, len(_TERM_IDS)) for t in counts),
                                  numpy.int64, len(counts))  # fmt: skip
        self.counts = numpy.fromiter(counts.values(), float, len(counts))
        self.length = float(sum(counts.values()))


_NO_IDS = numpy.zeros(0, dtype=numpy.int64)
_NO_TF = numpy.zeros(0)
# Every term seen gets a number for the vectorised build; the table only grows (a few MB for
# a six-figure vocabulary), so ids stay valid in every cached document.
_TERM_IDS = {}
_TERMS_LOCK = threading.Lock()
_DOCUMENTS = {}
_DOCUMENTS_MAX = 100_000
_EPOCHS = {}
_INDEX_CACHE = OrderedDict()
# one journal per assistant: a game with many assistants must not evict them in turn
_INDEX_CACHE_MAX = 128


def _document(content):
    document = _DOCUMENTS.get(content)
    if document is None:
        # term numbers must stay unique even if two threads ever index at once
        with _TERMS_LOCK:
            if len(_DOCUMENTS) > _DOCUMENTS_MAX:
                _DOCUMENTS.clear()
            document = _DOCUMENTS[content] = _Document(content)
    return document


def _epoch(timestamp):
    if timestamp not in _EPOCHS:
        if len(_EPOCHS) > _DOCUMENTS_MAX:
            _EPOCHS.clear()
        moment = parse_iso(timestamp)
        _EPOCHS[timestamp] = moment.timestamp() if moment else None
    return _EPOCHS[timestamp]


def get_index(entries):
    """
    The BM25 index of these entries, built once per journal version and cached.

    Args:
        entries (list): Journal entries.

    Returns:
        JournalIndex: Positions in it are positions in `entries`.
    """
    # A journal version is its list of entry objects: entries are never changed in place
    # (what the index reads - content, time, speaker - is fixed when an entry is written),
    # and the index holds them, so no id can be reused while it is cached. Reading the ids is
    # ~0.3 ms at 10,000 entries, where keying on the contents took ~5 ms.
    key = tuple(map(id, entries))
    index = _INDEX_CACHE.get(key)
    if index is None:
        index = JournalIndex(entries)
        _INDEX_CACHE[key] = index
        while len(_INDEX_CACHE) > _INDEX_CACHE_MAX:
            _INDEX_CACHE.popitem(last=False)
    else:
        _INDEX_CACHE.move_to_end(key)
    return index


# ----------------------------------------------------------------------------------------------
# Embeddings (optional)

_EMBED_CACHE = {}
_EMBED_CACHE_MAX = 100_000


def _embed_key(embed):
    # Bound methods are new objects on every access; key them by function and instance.
    return (id(getattr(embed, "__func__", embed)), id(getattr(embed, "__self__", None)))


_EMBED_LOCK = threading.Lock()


def _embeddings(embed, texts):
    """Vectors for `texts`, computing only the ones this embed function has not seen."""
    with _EMBED_LOCK:
        cache = _EMBED_CACHE.setdefault(_embed_key(embed), {})
        found = {text: cache[text] for text in texts if text in cache}
    missing = list(dict.fromkeys(text for text in texts if text not in found))
    if missing:
        found.update(zip(missing, embed(missing), strict=True))
        with _EMBED_LOCK:
            if len(cache) + len(missing) > _EMBED_CACHE_MAX:
                cache.clear()
            cache.update((text, found[text]) for text in missing)
    return [found[text] for text in texts]


_MATRICES = {}  # (embed function, journal owner) -> (texts, unit-row matrix) last scored


def _unit_rows(vectors):
    matrix = numpy.asarray(vectors, dtype=numpy.float32)
    norms = numpy.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def _matrix(embed, texts, owner):
    """The unit vectors of `texts` as one matrix, extended (not rebuilt) as a journal grows."""
    key = (_embed_key(embed), owner)
    with _EMBED_LOCK:
        known_texts, matrix = _MATRICES.get(key, ((), None))
    if known_texts == texts:
        return matrix
    if matrix is not None and len(texts) > len(known_texts) and (
            texts[: len(known_texts)] == known_texts):
        matrix = numpy.vstack([matrix, _unit_rows(_embeddings(embed, texts[len(known_texts):]))])
    else:
        matrix = _unit_rows(_embeddings(embed, texts))
    with _EMBED_LOCK:
        _MATRICES[key] = (texts, matrix)
    return matrix


def dense_similarities(embed, query, texts, owner=None):
    """
    Cosine similarity of `query` to each of `texts` (blocking: run it in the worker pool).

    Vectors of texts already seen are reused, and the matrix of the last texts scored for
    `owner` (e.g. the assistant's key) is kept and extended, so a growing journal costs one
    embedding per new entry and one matrix product per query.

    Returns:
        list[float]: One similarity per text.
    """
    texts = tuple(texts)
    if not texts:
        return []
    vector = _unit_rows([embed([query])[0]])[0]
    return (_matrix(embed, texts, owner) @ vector).tolist()


def _cosine_scores(embed, query, entries):
    matrix = numpy.asarray(_embeddings(embed, [e.get("content", "") for e in entries]), float)
    vector = numpy.asarray(embed([query])[0], float)
    norms = numpy.linalg.norm(matrix, axis=1) * (numpy.linalg.norm(vector) or 1.0)
    norms[norms == 0] = 1.0
    return (matrix @ vector) / norms


# ----------------------------------------------------------------------------------------------
# Search


def _passes_filters(entry, tags, project, since_epoch, epoch, min_trust):
    if tags:
        own = {str(t).lower() for t in entry.get("tags") or ()}
        if not tags <= own:
            return False
    if project:
        if project not in {str(p).lower() for p in entry.get("related_projects") or ()}:
            return False
    if since_epoch is not None and (epoch is None or epoch < since_epoch):
        return False
    if min_trust is not None and entry.get("source_trust", 1.0) < min_trust:
        return False
    return True


def entry_matches_filters(
    entry, now, *, tags=None, days_back=None, related_to_project=None, min_trust=None
):
    """
    Whether one entry passes the search filters (the same rules `search_entries` applies).

    Args:
        entry (dict): A journal entry.
        now (datetime): The current time.
        tags (list[str], optional): All must be on the entry (case-insensitive).
        days_back (float, optional): Written within the last N days.
        related_to_project (str, optional): Listed in its related_projects.
        min_trust (float, optional): Its source_trust is at least this.

    Returns:
        bool
    """
    moment = parse_iso(entry.get("timestamp"))
    since = now.timestamp() - days_back * 86400 if days_back is not None else None
    return _passes_filters(
        entry,
        {str(t).lower() for t in tags} if tags else None,
        str(related_to_project).lower() if related_to_project else None,
        since,
        moment.timestamp() if moment else None,
        min_trust,
    )


def search_entries(
    entries,
    query,
    *,
    now,
    limit=10,
    tags=None,
    days_back=None,
    related_to_project=None,
    min_trust=None,
    embed=None,
    semantic_scores=None,
    alpha_recency=1.0,
    alpha_importance=1.0,
    alpha_relevance=1.0,
    recency_decay=0.99,
    speaker_boost=0.6,
    context_weight=0.5,
    fusion="score",
    embedding_weight=0.0,
    feedback_docs=0,
    feedback_terms=10,
    feedback_weight=0.3,
    relevance_gate=0.0,
    rerank_pool=None,
    time_boost=0.0,
):
    """
    Rank journal entries for a query (see the module doc for the score).

    Args:
        entries (list): Journal entries, oldest first (the journal's order).
        query (str): What to look for; empty ranks by recency and importance only.
        now (datetime): The current time (aware).
        limit (int): At most this many results.
        tags (list[str], optional): Only entries carrying all of these tags.
        days_back (float, optional): Only entries from the last N days.
        related_to_project (str, optional): Only entries related to this project.
        min_trust (float, optional): Only entries whose source_trust is at least this.
        embed (callable, optional): `embed(texts) -> list[vector]`, fused with BM25 when given.
            It runs in the caller's thread: never pass it on the reactor.
        semantic_scores (dict, optional): `{entry id: similarity}` computed elsewhere (the
            semantic tier's hits); fused with BM25 when given (instead of `embed`).
        alpha_recency, alpha_importance, alpha_relevance (float): The seed's weights.
        recency_decay (float): Rate per hour of the recency decay.
        speaker_boost (float): Relevance bonus (x(1+boost)) for entries whose source_entity
            is named in the query.
        context_weight (float): Share of a neighbouring entry's relevance an entry inherits.
        fusion (str): "score" (normalised-score) or "rrf" (reciprocal-rank) fusion of BM25 and
            the dense similarity; used only with `embed` or `semantic_scores`.
        embedding_weight (float): The dense similarity's share of the fusion (0 leaves it out).
        feedback_docs, feedback_terms, feedback_weight: Pseudo-relevance feedback (the best
            `feedback_docs` entries' top terms re-query the journal at `feedback_weight`).
        relevance_gate (float): With a query, only entries whose relevance is at least this
            share of the best one's are scored (0 keeps every entry with relevance > 0).
        rerank_pool (int, optional): With a query, only the this many most relevant of them.
        time_boost (float): Relevance bonus (x(1+boost)) for entries written in the days,
            months or years the query names ("on 9 May", "last week", "yesterday"; see
            `time_references`); those words then leave the text match. 0 turns it off.

    Returns:
        list: `(score, entry)` pairs, best first.
    """
    if not entries or limit <= 0:
        return []
    index = get_index(entries)
    now_epoch = now.timestamp()
    since_epoch = now_epoch - days_back * 86400 if days_back is not None else None
    tag_set = {str(t).lower() for t in tags} if tags else None
    project = str(related_to_project).lower() if related_to_project else None

    query = str(query or "").strip()
    in_window = None
    if query and time_boost > 0:
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

    size = len(entries)
    relevance = None
    # a query that names only a time ("yesterday?") lists that time by recency and importance
    if query and alpha_relevance > 0 and (terms or in_window is None):
        feedback = (feedback_docs, feedback_terms, feedback_weight)
        dense = _dense_scores(index, entries, query, embed, semantic_scores, embedding_weight)
        relevance = _relevance(index, terms, named, dense, speaker_boost, context_weight, fusion,
                               embedding_weight, feedback, in_window, time_boost)  # fmt: skip
        if relevance is None:
            return []
        positions = numpy.flatnonzero(relevance > 0)
    elif query and not terms and in_window is None:
        return []
    else:
        positions = numpy.flatnonzero(in_window) if in_window is not None else numpy.arange(size)

    if tag_set or project or since_epoch is not None or min_trust is not None:
        epochs = index.epochs
        positions = numpy.asarray(
            [
                p
                for p in positions.tolist()
                if _passes_filters(entries[p], tag_set, project, since_epoch, epochs[p], min_trust)
            ],
            dtype=numpy.int64,
        )
    if not len(positions):
        return []

    tail = positions[:0]
    if relevance is not None and (relevance_gate > 0 or rerank_pool):
        # The seed's formula reorders only the clearly relevant entries (relevance is scaled so
        # the best match is 1.0, which always passes); the rest follow, most relevant first, so
        # recency and importance never push an irrelevant entry above a relevant one.
        by_relevance = positions[numpy.lexsort((-positions, -relevance[positions]))]
        gated = by_relevance[relevance[by_relevance] >= relevance_gate]
        head = gated[:rerank_pool] if rerank_pool else gated
        tail = by_relevance[len(head):]
        positions = numpy.sort(head)

    scores = _formula_scores(index, entries, positions, relevance, now_epoch, recency_decay,
                             alpha_recency, alpha_importance, alpha_relevance)  # fmt: skip
    # best first; among equal scores the newer entry first
    order = numpy.lexsort((-positions, -scores))[:limit]
    ranked = [(float(scores[i]), entries[int(positions[i])]) for i in order]
    if len(ranked) < limit and len(tail):
        tail = tail[: limit - len(ranked)]
        tail_scores = _formula_scores(index, entries, tail, relevance, now_epoch, recency_decay,
                                      alpha_recency, alpha_importance, alpha_relevance)  # fmt: skip
        ranked += [(float(score), entries[int(p)]) for score, p in zip(tail_scores, tail,
                                                                        strict=True)]
    return ranked


def _formula_scores(index, entries, positions, relevance, now_epoch, recency_decay,
                    alpha_recency, alpha_importance, alpha_relevance):  # fmt: skip
    """The seed's weighted mean of recency, importance and relevance at `positions`."""
    ages = numpy.maximum(0.0, (now_epoch - index.epoch_array[positions]) / 3600)
    recency = numpy.nan_to_num(numpy.exp(-recency_decay * ages), nan=0.0)
    importance = (
        numpy.asarray([entries[p].get("importance") or 0 for p in positions.tolist()], float) / 10.0
    )
    rel = relevance[positions] if relevance is not None else numpy.zeros(len(positions))
    total = alpha_recency + alpha_importance + alpha_relevance
    if total <= 0:
        return rel
    return (alpha_recency * recency + alpha_importance * importance + alpha_relevance * rel) / total


def _dense_scores(index, entries, query, embed, semantic_scores, embedding_weight):
    """The dense similarity of every entry (array), or None when none is to be fused."""
    if semantic_scores:
        dense = numpy.zeros(index.size)
        found = [(index.positions.get(entry_id), score)
                 for entry_id, score in semantic_scores.items()]  # fmt: skip
        found = [(position, score) for position, score in found if position is not None]
        if found:
            where, scores = zip(*found, strict=True)
            dense[list(where)] = numpy.maximum(0.0, numpy.asarray(scores, dtype=float))
        return dense if dense.any() else None
    if embed is not None and embedding_weight > 0:
        return _cosine_scores(embed, query, entries)
    return None


def _relevance(index, terms, named, dense, speaker_boost, context_weight, fusion,
               embedding_weight, feedback=(0, 0, 0.0), in_window=None, time_boost=0.0):  # fmt: skip
    """Relevance 0-1 of every entry (array), or None when nothing is relevant."""
    raw = index.bm25(terms)
    if feedback[0] and feedback[1] and feedback[2] and raw.any():
        raw = raw + index.bm25_weighted(_feedback_terms(index, raw, set(terms), *feedback))
    if dense is not None and embedding_weight > 0:
        raw = _fuse(raw, dense, fusion, embedding_weight)
    if in_window is not None:
        # Entries from the time the query names are favoured, and all of them are candidates:
        # with a small floor where other entries of that time match the words, and as good
        # as the best match where none does ("what happened yesterday?" is about yesterday,
        # not about every entry that says "happened").
        best = raw.max() or 1.0
        floor = TIME_FLOOR * best if raw[in_window].any() else best
        raw = numpy.where(in_window, numpy.maximum(raw, floor), raw)
        raw[in_window] *= 1.0 + time_boost
    if not raw.any():
        return None
    if named and speaker_boost:
        for name in named:
            where = index.speaker_positions.get(name)
            if where is not None:
                raw[where] *= 1.0 + speaker_boost
    if context_weight:
        # An entry inherits part of its neighbours' relevance (in a conversation the turn
        # before or after a strong match often holds the answer), halving with each step.
        base = raw.copy()
        share = context_weight
        for step in range(1, CONTEXT_RADIUS + 1):
            if step < len(base):
                raw[step:] += share * base[:-step]
                raw[:-step] += share * base[step:]
            share *= 0.5
    best = raw.max()
    if best <= 0:
        return None
    return raw / best


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


def _fuse(bm25, cosines, fusion, embedding_weight, rrf_k=60, pool=100):
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


def default_embed(settings):
    """
    The local embedder's `embed` function, or None (for offline callers such as benchmarks).

    It is the semantic tier's own local model (WordLlama), so it needs no network, but it still
    computes in the caller's thread: the assistant's own searches never use it on the reactor
    (the `search_journal` tool gets its dense similarities from the semantic tier, off the
    reactor). None when `journal.embedding_weight` is 0, when the game configured its own mem0
    embedder, or when the model is not installed.

    Args:
        settings (conf.Settings): The assistant's settings.
    """
    if not settings.get("journal.embedding_weight"):
        return None
    if "embedder" in (settings.get("memory.mem0") or {}):
        return None
    try:
        from ai_assistant.memory.embedder import EmbedderUnavailable, get_embedder
    except ImportError:
        return None
    try:
        return get_embedder().embed
    except EmbedderUnavailable:
        return None


def search_settings(settings):
    """
    The search weights configured for an assistant.

    Nothing here embeds: these options are safe for the synchronous search on the reactor.
    `embedding_weight` applies only when a caller also passes `semantic_scores` (the
    `search_journal` tool does, with the semantic tier's hits fetched off the reactor).

    Args:
        settings (conf.Settings): Its settings.

    Returns:
        dict: Keyword arguments for `search_entries`.
    """
    return {
        "alpha_recency": settings.get("journal.alpha_recency"),
        "alpha_importance": settings.get("journal.alpha_importance"),
        "alpha_relevance": settings.get("journal.alpha_relevance"),
        "recency_decay": settings.get("journal.recency_decay"),
        "speaker_boost": settings.get("journal.speaker_boost"),
        "context_weight": settings.get("journal.context_weight"),
        "fusion": settings.get("journal.fusion"),
        "embedding_weight": settings.get("journal.embedding_weight"),
        "relevance_gate": settings.get("journal.relevance_gate"),
        "rerank_pool": settings.get("journal.rerank_pool"),
        "feedback_docs": settings.get("journal.feedback_docs"),
        "feedback_terms": settings.get("journal.feedback_terms"),
        "feedback_weight": settings.get("journal.feedback_weight"),
        "time_boost": settings.get("journal.time_boost"),
    }


def search_journal(ports, query, *, limit=None, **filters):
    """
    Search this assistant's journal with its configured weights.

    Args:
        ports (AssistantPorts): The assistant.
        query (str): What to look for.
        limit (int, optional): Default `journal.search_limit`.
        **filters: tags, days_back, related_to_project, min_trust (see `search_entries`).

    Returns:
        list: `(score, entry)` pairs, best first.
    """
    if limit is None:
        limit = ports.settings.get("journal.search_limit")
    options = search_settings(ports.settings)
    options.update(filters)
    entries = get_journal(ports)["entries"]
    return search_entries(entries, query, now=ports.clock.now(), limit=limit, **options)
