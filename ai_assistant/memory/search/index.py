"""
The BM25 index of a journal: postings of every term, the position of every entry id, the time
and speakers of every entry.

The index of one journal version (its list of entry objects) is built once and kept in the
assistant's `JournalIndexCache`, so repeated searches of a large journal cost milliseconds. The
terms of each content string are kept across versions, so a journal that changed is re-indexed
in tens of milliseconds at 10,000 entries: the cache keeps those of its own last version, and a
process-wide table (least recently used out first) shares them between assistants.
"""

import functools
import math
import threading
from collections import Counter, OrderedDict
from operator import methodcaller

import numpy

from ai_assistant.memory.search.terms import tokenize, words
from ai_assistant.plumbing.ports import parse_iso

# Tuned on the LoCoMo dev split (relevance only): short entries favour a low b.
BM25_K1 = 0.9
BM25_B = 0.4
# Journal versions one assistant keeps indexed: its journal has one current version, and a
# search that reads the journal again after a write must not evict the index another caller
# (the prompt, reflection) is about to reuse.
INDEX_VERSIONS_KEPT = 4

_NO_IDS = numpy.zeros(0, dtype=numpy.int64)
_NO_TF = numpy.zeros(0)
# Every term seen gets a number for the vectorised build; the table only grows (a few MB for
# a six-figure vocabulary), so ids stay valid in every cached document. Process-wide: the
# documents below are shared by every assistant, so their term numbers must be too.
_TERM_IDS = {}
_TERMS_LOCK = threading.Lock()
# The terms of a content string and the moment of a timestamp, for this many recent strings.
# Process-wide: both are pure functions of the text, and assistants that heard the same line
# share its terms. A world's corpora outgrow any such table; each assistant's cache keeps its
# own (`JournalIndexCache.documents`), so a full table never means tokenising them all again.
_DOCUMENTS_MAX = 100_000


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
        known (JournalIndexCache, optional): The cache this index goes into: the terms and
            moments of its last version are reused, and this version's are left in their place.
    """

    def __init__(self, entries, k1=None, b=None, known=None):
        k1 = BM25_K1 if k1 is None else k1
        b = BM25_B if b is None else b
        self.size = len(entries)
        self.entries = tuple(entries)  # held, so their ids (the cache key) stay theirs
        contents = list(map(methodcaller("get", "content", ""), entries))
        timestamps = list(map(methodcaller("get", "timestamp"), entries))
        documents = _reused(contents, known.documents if known else {}, _document)
        self.doc_terms = [document.terms for document in documents]
        self.epochs = _reused(timestamps, known.epochs if known else {}, _epoch)
        if known is not None:
            known.documents = dict(zip(contents, documents, strict=True))
            known.epochs = dict(zip(timestamps, self.epochs, strict=True))
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
        # kept for `bm25_in_context`, which saturates each entry's frequencies with its
        # neighbours' added, so it needs them raw
        self._frequencies = frequencies[order]
        self._norms = norms
        self._k1 = k1
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
                by_speaker.setdefault(name, []).append(where)
        # one entity's positions are already in order; only a name several share is merged
        self.speaker_positions = {
            name: numpy.asarray(lists[0] if len(lists) == 1 else sorted(set().union(*lists)),
                                dtype=numpy.int64)
            for name, lists in by_speaker.items()
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

    def bm25_in_context(self, weights, share):
        """
        BM25 where each entry is read with the words of the entries just before and after it
        (document expansion with the turn's context: "they were stoked for the dinosaur
        exhibit" after "we went to the museum" also matches "museum").

        The larger of the two neighbours' frequencies of a term joins the entry's own at
        `share` before BM25 saturates them: a line between two that say a word is beside one
        topic, not twice as much about it, and with `share` below 1 a line that says the word
        itself still outranks one that only stands next to it. The idf stays the term's own
        (how many entries say it) and the length normalisation the entry's own.

        Args:
            weights (dict): `{term: weight}`.
            share (float): Weight of a neighbour's words (0 is plain `bm25_weighted`).

        Returns:
            numpy.ndarray: The score of every entry.
        """
        if share <= 0 or self.size < 2:
            return self.bm25_weighted(weights)
        scores = numpy.zeros(self.size)
        padded = numpy.zeros(self.size + 2)  # padded[p + 1] is position p's frequency
        for term, weight in weights.items():
            span = self._spans.get(_TERM_IDS.get(term))
            if span is None:
                continue
            start, end = span
            where = self._positions[start:end] + 1
            padded[where] = self._frequencies[start:end]  # an entry appears once per term
            frequency = padded[1:-1] + share * numpy.maximum(padded[:-2], padded[2:])
            padded[where] = 0.0
            hit = numpy.flatnonzero(frequency)
            tf = frequency[hit]
            n = end - start
            idf = math.log(1 + (self.size - n + 0.5) / (n + 0.5))
            scores[hit] += weight * idf * tf * (self._k1 + 1) / (tf + self._norms[hit])
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


@functools.lru_cache(maxsize=_DOCUMENTS_MAX)
def _document(content):
    with _TERMS_LOCK:  # term numbers must stay unique even if two threads ever index at once
        return _Document(content)


@functools.lru_cache(maxsize=_DOCUMENTS_MAX)
def _epoch(timestamp):
    moment = parse_iso(timestamp)
    return moment.timestamp() if moment else None


def _reused(keys, known, compute):
    """`compute(key)` for each key, taking what `known` already holds first."""
    return [known[key] if key in known else compute(key) for key in keys]


class JournalIndexCache:
    """
    The indexes of one assistant's latest journal versions, most recently used last.

    It belongs to one assistant (`ports.runtime.derived`, see
    `journal_search.journal_index_cache`): a game with many assistants must not evict one
    assistant's index to make room for another's.

    Args:
        versions (int): How many journal versions to keep indexed.
    """

    def __init__(self, versions=INDEX_VERSIONS_KEPT):
        self.versions = versions
        self._indexes = OrderedDict()
        # the terms (by content) and moments (by timestamp) of the last version indexed
        self.documents = {}
        self.epochs = {}

    def __len__(self):
        return len(self._indexes)

    def get(self, key):
        """The index cached under `key` (now the most recently used), or None."""
        index = self._indexes.get(key)
        if index is not None:
            self._indexes.move_to_end(key)
        return index

    def put(self, key, index):
        """Keep `index` under `key`, forgetting the least recently used beyond `versions`."""
        self._indexes[key] = index
        while len(self._indexes) > self.versions:
            self._indexes.popitem(last=False)


def get_index(entries, cache=None):
    """
    The BM25 index of these entries, built once per journal version when a cache is given.

    Args:
        entries (list): Journal entries.
        cache (JournalIndexCache, optional): The assistant's index cache; without one the
            index is built afresh (the terms of each content are still reused).

    Returns:
        JournalIndex: Positions in it are positions in `entries`.
    """
    if cache is None:
        return JournalIndex(entries)
    # A journal version is its list of entry objects: entries are never changed in place
    # (what the index reads - content, time, speaker - is fixed when an entry is written),
    # and the index holds them, so no id can be reused while it is cached. Reading the ids is
    # ~0.3 ms at 10,000 entries, where keying on the contents took ~5 ms.
    key = tuple(map(id, entries))
    index = cache.get(key)
    if index is None:
        index = JournalIndex(entries, known=cache)
        cache.put(key, index)
    return index
