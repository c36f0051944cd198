"""
Query expansion from the journal's own vocabulary: for each word of a query, the journal's words
nearest to it in meaning (the local embedder's vectors of single words) join the BM25 query at a
lower weight (`journal.expansion_weight`).

A question often names a kind of thing ("what music does Wren like?") where the line that
answers it names an instance ("I practise the guitar most nights"): BM25 cannot see that, and
the whole line's embedding is too diluted to. The word "music" alone sits close to "guitar",
"songs" and "concert", and only words the journal holds are candidates, so the expansion never
adds a term that matches nothing.

It embeds, so it runs off the reactor: the `search_journal` tool computes `expansion_terms` in
the worker pool beside the dense similarities and hands the result to `search_entries`, which
keeps only the expansions of the words the query still has as terms (`expanded_query`).
"""

import threading

import numpy

from ai_assistant.memory.search.dense import _embed_key, embeddings, unit_rows
from ai_assistant.memory.search.index import content_terms
from ai_assistant.memory.search.terms import STOPWORDS, stem, stems, words

NEIGHBOURS = 10  # the nearest journal words considered per query word
MIN_SIMILARITY = 0.3  # the embedder's cosine below which a word is not a neighbour


def _content_words(text):
    return [word for word in words(text) if word not in STOPWORDS and not word.isdigit()]


class JournalVocabulary:
    """
    One assistant's journal vocabulary: one word per stem (the first form heard) and their unit
    vectors, extended as new lines arrive, never rebuilt.

    It belongs to one assistant (`ports.runtime.caches`, see
    `journal_search.journal_vocabulary`) and is read and written in the worker pool, hence the
    lock. Stems of lines the journal has since let go stay: they match nothing in the index, so
    they expand nothing.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, embed_key):
        self._embed = embed_key
        self._read = set()  # hashes of the contents already read
        self._rows = {}  # stem -> row
        self._stems = []  # row -> stem
        self._matrix = None  # unit vectors, rows beyond len(self._stems) unused

    def update(self, embed, texts):
        """
        Read the texts not read yet and embed their new words (blocking: the worker pool).

        Returns:
            tuple: `(stems, matrix)`: the stems so far and their unit vectors, one row each.
        """
        with self._lock:
            if self._embed != _embed_key(embed):  # another embedder: start again
                self._reset(_embed_key(embed))
            fresh = {}
            for text in texts:
                key = hash(text)
                if key in self._read:
                    continue
                self._read.add(key)
                # most lines bring no new word: their terms (the index's, kept per text) say
                # so without reading the line again
                if all(term in self._rows or term in fresh for term in content_terms(text)[0]):
                    continue
                found = _content_words(text)
                for word, term in zip(found, stems(found), strict=True):
                    if term not in self._rows and term not in fresh:
                        fresh[term] = word
            if fresh:
                self._append(list(fresh), unit_rows(embeddings(embed, list(fresh.values()))))
            size = len(self._stems)
            return tuple(self._stems), (self._matrix[:size] if size else None)

    def _append(self, stems, vectors):
        size = len(self._stems)
        needed = size + len(stems)
        if self._matrix is None or needed > len(self._matrix):
            # grown by doubling, so a journal that adds a word a line copies its matrix rarely
            grown = numpy.zeros((max(needed, 2 * size, 256), vectors.shape[1]), numpy.float32)
            if size:
                grown[:size] = self._matrix[:size]
            self._matrix = grown
        self._matrix[size:needed] = vectors
        for offset, term in enumerate(stems):
            self._rows[term] = size + offset
        self._stems.extend(stems)


def expansion_terms(embed, query, texts, vocabulary=None, neighbours=NEIGHBOURS,
                    min_similarity=MIN_SIMILARITY):  # fmt: skip
    """
    The journal's words nearest in meaning to each word of the query (blocking: run it in the
    worker pool).

    Args:
        embed (callable): `embed(texts) -> list[vector]`, the local embedder's.
        query (str): The query as asked.
        texts (iterable): The journal's contents.
        vocabulary (JournalVocabulary, optional): The assistant's, kept between calls.
        neighbours (int): At most this many neighbours per query word.
        min_similarity (float): The least cosine of a neighbour.

    Returns:
        dict: `{query stem: {neighbour stem: similarity}}`, without the query word's own stem.
    """
    query_words = list(dict.fromkeys(_content_words(query)))
    if not query_words:
        return {}
    stems, matrix = (vocabulary or JournalVocabulary()).update(embed, texts)
    if matrix is None:
        return {}
    vectors = unit_rows(embeddings(embed, query_words))
    count = min(neighbours + 1, len(stems))  # one more: the word itself is usually nearest
    expansion = {}
    for word, vector in zip(query_words, vectors, strict=True):
        # one matrix-vector product per word: a matrix-matrix product wakes the BLAS threads,
        # which costs milliseconds on a busy machine (measured: 5 ms against 0.3 ms a query)
        row = matrix @ vector
        own = stem(word)
        nearest = numpy.argpartition(-row, count - 1)[:count]
        found = expansion.setdefault(own, {})
        for position in nearest.tolist():
            term, similarity = stems[position], float(row[position])
            if term != own and similarity >= min_similarity:
                found[term] = max(similarity, found.get(term, 0.0))
        if not found:
            del expansion[own]
    return expansion


def expanded_query(expansion, terms, weight):
    """
    The weighted query of the expansions of `terms` (`{stem: weight x similarity}`, the best
    similarity where several query words reach the same stem; the query's own terms left out).

    Args:
        expansion (dict): What `expansion_terms` returned.
        terms (list): The query's terms as the search reads them (time references and the
            speakers' names already out, so they expand nothing).
        weight (float): `journal.expansion_weight`.
    """
    own = set(terms)
    query = {}
    for source in own.intersection(expansion):
        for term, similarity in expansion[source].items():
            if term not in own:
                query[term] = max(query.get(term, 0.0), weight * similarity)
    return query
