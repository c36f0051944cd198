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
from dataclasses import dataclass, field
from itertools import chain
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
# Every term seen gets a number for the vectorised build; the table only grows (a few MB for
# a six-figure vocabulary), so ids stay valid in every cached document. Process-wide: the
# documents below are shared by every assistant, so their term numbers must be too.
_TERM_IDS = {}
_TERM_NAMES = []  # the term of each number
_TERMS_LOCK = threading.Lock()
# The terms of a content string and the moment of a timestamp, for this many recent strings.
# Process-wide: both are pure functions of the text, and assistants that heard the same line
# share its terms. A world's corpora outgrow any such table; each assistant's cache keeps its
# own (`JournalIndexCache.documents`), so a full table never means tokenising them all again.
_DOCUMENTS_MAX = 100_000


@dataclass(frozen=True)
class WholeCorpus:
    """
    What the entries given to an index are a part of, when they are not the whole corpus: a
    store that ranks in its database hands recall a few hundred candidates of its memories
    (`recall.store_candidates`), and their BM25 must be what it is over every memory.

    Attributes:
        outside_documents (int): Documents of the corpus that are not among the entries.
        outside_length (float): Their length in terms, all together.
        outside_frequencies (dict): `{term: how many of those documents contain it}`; a term
            not named occurs in none of them.
        places (tuple): Each entry's place in the whole corpus's order (increasing): entries
            share relevance only with those next to them there (`scoring`).
        context_only (tuple): Positions of the entries that only lend relevance to their
            neighbours (theirs are not all given, so their own is not the whole corpus's):
            never ranked, nor the measure of the best match.
    """

    outside_documents: int = 0
    outside_length: float = 0.0
    outside_frequencies: dict = field(default_factory=dict)
    places: tuple = ()
    context_only: tuple = ()


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
        whole (WholeCorpus, optional): The corpus the entries are part of (idf, average
            length and neighbours are then the whole corpus's); None: the entries are all.

    Attributes:
        places (numpy.ndarray | None): Each entry's place in the whole corpus (None: its
            position here).
        rankable (numpy.ndarray | None): Which entries may be ranked (None: every one; see
            `WholeCorpus.context_only`).
    """

    def __init__(self, entries, k1=None, b=None, known=None, whole=None):
        k1 = BM25_K1 if k1 is None else k1
        b = BM25_B if b is None else b
        self.size = len(entries)
        self.entries = tuple(entries)  # held, so their ids (the cache key) stay theirs
        contents = list(map(methodcaller("get", "content", ""), entries))
        timestamps = list(map(methodcaller("get", "timestamp"), entries))
        documents = _reused(contents, known.documents if known is not None else {}, _document)
        self.doc_terms = [document.terms for document in documents]
        self.epochs = _reused(timestamps, known.epochs if known is not None else {}, _epoch)
        if known is not None:
            known.documents = dict(zip(contents, documents, strict=True))
            known.epochs = dict(zip(timestamps, self.epochs, strict=True))
        self.epoch_array = numpy.array(self.epochs, dtype=float)  # None -> nan
        self.positions = {entry_id: position for position, entry_id in
                          enumerate(map(methodcaller("get", "id"), entries))}  # fmt: skip
        self.whole = whole or WholeCorpus()
        self.places = numpy.asarray(whole.places, dtype=numpy.int64) if whole else None
        self.rankable = None
        if whole and whole.context_only:
            self.rankable = numpy.ones(self.size, dtype=bool)
            self.rankable[list(whole.context_only)] = False
        self._build_postings(documents, k1, b)
        self._build_speakers(entries)

    def _build_postings(self, documents, k1, b):
        sizes = numpy.fromiter((len(d.ids) for d in documents), numpy.int64, self.size)
        lengths = numpy.fromiter((d.length for d in documents), float, self.size)
        whole = self.whole
        documents_in_all = self.size + whole.outside_documents
        average = ((lengths.sum() + whole.outside_length) / documents_in_all
                   if documents_in_all else 1.0) or 1.0
        total = int(sizes.sum())
        term_ids = numpy.fromiter(chain.from_iterable(d.ids for d in documents), numpy.int64,
                                  total)
        frequencies = numpy.fromiter(chain.from_iterable(d.counts for d in documents), float,
                                     total)
        owners = numpy.repeat(numpy.arange(self.size), sizes)
        norms = k1 * (1 - b + b * lengths / average)
        saturated = frequencies * (k1 + 1) / (frequencies + norms[owners])
        # postings of one term together, each in journal order
        order = numpy.argsort(term_ids, kind="stable")
        ordered = term_ids[order]
        starts = numpy.flatnonzero(numpy.diff(ordered, prepend=-1)) if len(ordered) else _NO_IDS
        terms = ordered[starts]
        counts = numpy.diff(starts, append=len(ordered))
        if whole.outside_frequencies:
            counts_in_all = counts + numpy.fromiter(
                (whole.outside_frequencies.get(_TERM_NAMES[term], 0) for term in terms.tolist()),
                numpy.int64, len(terms))
        else:
            counts_in_all = counts
        idf = numpy.log(1 + (documents_in_all - counts_in_all + 0.5) / (counts_in_all + 0.5))
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
            idf = self.idf(term)  # the whole corpus's, when this is a part of one
            scores[hit] += weight * idf * tf * (self._k1 + 1) / (tf + self._norms[hit])
        return scores

    def idf(self, term):
        """The term's idf (0.0 for an unknown term)."""
        found = self.postings(term)
        if found is None:
            return 0.0
        n = len(found[0]) + self.whole.outside_frequencies.get(term, 0)
        documents_in_all = self.size + self.whole.outside_documents
        return math.log(1 + (documents_in_all - n + 0.5) / (n + 0.5))


class _Document:
    """The index's view of one content string: its terms, their ids and counts, its length
    (tuples: an index joins those of all its documents into arrays at once)."""

    __slots__ = ("terms", "ids", "counts", "length")

    def __init__(self, content):
        counts = Counter(tokenize(content))
        self.terms = tuple(counts)
        self.ids = tuple(map(_term_id, self.terms))
        self.counts = tuple(counts.values())
        self.length = float(sum(self.counts))


def _term_id(term):
    """The term's number (a new one for a term never seen; the caller holds the lock)."""
    number = _TERM_IDS.get(term)
    if number is None:
        number = _TERM_IDS[term] = len(_TERM_NAMES)
        _TERM_NAMES.append(term)
    return number


@functools.lru_cache(maxsize=_DOCUMENTS_MAX)
def _document(content):
    with _TERMS_LOCK:  # term numbers must stay unique even if two threads ever index at once
        return _Document(content)


def content_terms(content):
    """
    `(terms, length)`: the distinct terms of a content string and how many it holds in all,
    as the index reads them (kept in the process-wide table the index builds from).
    """
    document = _document(content)
    return document.terms, document.length


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


def get_index(entries, cache=None, whole=None):
    """
    The BM25 index of these entries, built once per journal version when a cache is given.

    Args:
        entries (list): Journal entries.
        cache (JournalIndexCache, optional): The assistant's index cache; without one the
            index is built afresh (the terms of each content are still reused).
        whole (WholeCorpus, optional): The corpus the entries are part of (a store's
            candidates: built afresh for the one query, never cached).

    Returns:
        JournalIndex: Positions in it are positions in `entries`.
    """
    if cache is None or whole is not None:
        return JournalIndex(entries, whole=whole)
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
