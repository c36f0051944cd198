"""
Dense similarities: the cosine of a query's embedding to each journal entry's.

Two ways in. The `search_journal` tool hands `dense_similarities` to the worker pool with the
assistant's `EmbeddingMatrices`, so a growing journal costs one embedding per new entry and one
matrix product per query, off the reactor. Offline callers (benchmarks, tests) pass an
`embed(texts) -> list[vector]` function to `search_entries`, which computes `cosine_scores` in
the caller's thread: never on the reactor. `default_embed` is the local embedder's function.
"""

import itertools
import threading

import numpy

# Vectors by text, per embed function. Process-wide: an embedding is a pure function of the
# text and the model, so assistants sharing a model share the vectors of the lines they both
# heard, and a journal re-read after a write does not embed its old entries again. The oldest
# vectors go first when it is full; each assistant's `EmbeddingMatrices` keeps its own anyway.
_EMBED_CACHE = {}
_EMBED_CACHE_MAX = 100_000
_EMBED_LOCK = threading.Lock()
# The object each key of `_EMBED_CACHE` was made for, held so that its id cannot be given to
# a new embedder while its vectors are kept (an id is reused once its object is gone, and the
# new object would read the old one's vectors).
_EMBED_OWNERS = {}


def _embed_key(embed):
    # Bound methods are new objects on every access; key them by function and instance.
    return (id(getattr(embed, "__func__", embed)), id(getattr(embed, "__self__", None)))


def embeddings(embed, texts):
    """Vectors for `texts`, computing only the ones this embed function has not seen."""
    key, owner = _embed_key(embed), (getattr(embed, "__func__", embed),
                                     getattr(embed, "__self__", None))  # fmt: skip
    with _EMBED_LOCK:
        known = _EMBED_OWNERS.setdefault(key, owner)
        if known[0] is not owner[0] or known[1] is not owner[1]:  # the id of one gone
            _EMBED_OWNERS[key] = owner
            _EMBED_CACHE[key] = {}
        cache = _EMBED_CACHE.setdefault(key, {})
        found = {text: cache[text] for text in texts if text in cache}
    missing = list(dict.fromkeys(text for text in texts if text not in found))
    if missing:
        found.update(zip(missing, embed(missing), strict=True))
        with _EMBED_LOCK:
            overflow = len(cache) + len(missing) - _EMBED_CACHE_MAX
            for text in list(itertools.islice(cache, max(0, overflow))):
                del cache[text]
            cache.update((text, found[text]) for text in missing)
    return [found[text] for text in texts]


def unit_rows(vectors):
    """`vectors` as a float32 matrix of unit rows (a zero vector stays zero)."""
    matrix = numpy.asarray(vectors, dtype=numpy.float32)
    norms = numpy.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def _reused_rows(known_texts, matrix, embed, texts):
    """The unit rows of `texts`, copied from `matrix` (rows of `known_texts`) where it has them."""
    row_of = {text: row for row, text in enumerate(known_texts)}
    rows = numpy.fromiter((row_of.get(text, -1) for text in texts), numpy.int64, len(texts))
    fresh = rows < 0
    if fresh.all():
        return unit_rows(embeddings(embed, texts))
    result = matrix[numpy.maximum(rows, 0)]  # a copy: the old matrix may still be in use
    if fresh.any():
        result[fresh] = unit_rows(embeddings(embed, list(itertools.compress(texts, fresh))))
    return result


class EmbeddingMatrices:
    """
    One assistant's journal as unit-row matrices (one per embed function): the texts last
    scored and their vectors, extended rather than rebuilt as the journal grows, and reused
    row by row when it changed otherwise (an entry dropped, a memory replaced).

    It belongs to one assistant (`ports.runtime.derived`, see
    `journal_search.journal_embedding_matrices`)
    and is read and written in the worker pool, hence the lock.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._matrices = {}  # embed function -> (texts, unit-row matrix) last scored

    def matrix(self, embed, texts):
        """The unit vectors of `texts` as one matrix (tuple of texts, oldest first)."""
        key = _embed_key(embed)
        with self._lock:
            known_texts, matrix = self._matrices.get(key, ((), None))
        if known_texts == texts:
            return matrix
        if matrix is not None and len(texts) > len(known_texts) and (
                texts[: len(known_texts)] == known_texts):
            added = unit_rows(embeddings(embed, texts[len(known_texts):]))
            matrix = numpy.vstack([matrix, added])
        elif matrix is not None:
            matrix = _reused_rows(known_texts, matrix, embed, texts)
        else:
            matrix = unit_rows(embeddings(embed, texts))
        with self._lock:
            self._matrices[key] = (texts, matrix)
        return matrix


def dense_similarities(embed, query, texts, matrices=None):
    """
    Cosine similarity of `query` to each of `texts` (blocking: run it in the worker pool).

    Vectors of texts already seen are reused, and with `matrices` (the assistant's
    `EmbeddingMatrices`) the matrix of the last texts scored is kept and extended, so a growing
    journal costs one embedding per new entry and one matrix product per query.

    Returns:
        list[float]: One similarity per text.
    """
    texts = tuple(texts)
    if not texts:
        return []
    vector = unit_rows([embed([query])[0]])[0]
    if matrices is None:
        matrices = EmbeddingMatrices()
    return (matrices.matrix(embed, texts) @ vector).tolist()


def cosine_scores(embed, query, entries):
    """The cosine of `query` to every entry's content (array), embedding in this thread."""
    matrix = numpy.asarray(embeddings(embed, [e.get("content", "") for e in entries]), float)
    vector = numpy.asarray(embed([query])[0], float)
    norms = numpy.linalg.norm(matrix, axis=1) * (numpy.linalg.norm(vector) or 1.0)
    norms[norms == 0] = 1.0
    return (matrix @ vector) / norms


def dense_scores(index, entries, query, embed, semantic_scores, embedding_weight):
    """
    The dense similarity of every entry (array), or None when none is to be fused.

    Args:
        index (JournalIndex): The entries' index (maps entry ids to positions).
        entries (list): The journal entries.
        query (str): The query (time references already taken out).
        embed (callable or None): An embed function, used when no `semantic_scores` are given.
        semantic_scores (dict, numpy.ndarray or None): `{entry id: similarity}` computed
            elsewhere, or one similarity per entry, in the entries' order.
        embedding_weight (float): The dense share of the fusion; 0 embeds nothing.
    """
    if isinstance(semantic_scores, numpy.ndarray):
        dense = numpy.maximum(0.0, semantic_scores.astype(float))
        return dense if dense.any() else None
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
        return cosine_scores(embed, query, entries)
    return None


def default_embed(settings):
    """
    The local embedder's `embed` function, or None.

    It is the semantic tier's own local model (WordLlama), so it needs no network, but it still
    computes in the caller's thread: the `search_journal` tool runs it in the worker pool, and
    the synchronous searches on the reactor never use it. None when `journal.embedding_weight`
    is 0, when the game configured its own mem0 embedder, or when the model is not installed.

    Args:
        settings (Settings): The assistant's settings.
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
