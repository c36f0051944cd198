"""
The local embedding model of the semantic tier: offline, in-process, installed from PyPI.

The default is WordLlama's `l2_supercat` static model (256 dims), which the `wordllama` wheel
ships inside its own package folder: it loads from site-packages with downloads disabled, so
it needs no hub, no API key and no network, embeds thousands of sentences per second on a
small CPU, and pulls no torch. `docs/embedder-choice.md` records the measurements behind it.

A static model's cosine scores live on their own scale: on our check set WordLlama scores
unrelated sentences 0.06 on average (at most 0.22), related ones 0.36 (at most 0.52),
paraphrases 0.81 (at least 0.49), and a question against the fact that answers it 0.25-0.74;
MiniLM gives 0.14 / 0.46 / 0.88 and at least 0.27 on the same pairs. The specification's
thresholds (relevance 0.7, link similarity 0.7) are on a transformer scale, so every embedder
reports its own calibrated equivalents (`relevance_threshold`, `link_similarity`,
`duplicate_similarity`), and the semantic store uses them whenever the game leaves the
specification's defaults in place.

`memory.longterm.mem0_embedding.Mem0Embedder` adapts any `LocalEmbedder` to mem0's
`EmbeddingBase`, so mem0 stores and searches with our vectors.
"""

import functools
import threading
from pathlib import Path

import numpy as np

WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_DIM = 256

# Process-wide: a model is loaded once per process and shared by every assistant.
_load_lock = threading.Lock()


class EmbedderUnavailable(RuntimeError):
    """The local model could not be loaded (not installed, or its files are missing)."""


@functools.cache
def _load_wordllama(config, dim):
    """Load (once per process) a WordLlama model from the files shipped in its wheel."""
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError as err:
        raise EmbedderUnavailable(
            "the 'wordllama' package is not installed (pip install wordllama)"
        ) from err
    package_dir = Path(wordllama.__file__).parent
    try:
        # cache_dir is the package folder itself and downloads are off: the weights and
        # tokenizer it ships are found there, and a missing file is an error, never a fetch.
        return WordLlama.load(
            config=config, dim=dim, cache_dir=package_dir, disable_download=True
        )
    except FileNotFoundError as err:
        raise EmbedderUnavailable(f"wordllama model files are missing: {err}") from err


class LocalEmbedder:
    """
    A local sentence embedder with thresholds calibrated to its own cosine scale.

    Vectors are L2-normalised, so a dot product is the cosine similarity.

    Class attributes:
        name (str): Identifies the model (recorded in the store's config).
        dims (int): Vector size.
        relevance_threshold (float): Cosine above which a memory counts as relevant to a
            query; the equivalent of the specification's 0.7 on a transformer scale.
        link_similarity (float): Cosine at which two memories get an A-MEM link; the
            equivalent of the specification's 0.7.
        duplicate_similarity (float): Cosine at or above which a new text counts as a
            near-exact duplicate of a stored one and is not stored again.
    """

    name = "local"
    dims = 0
    relevance_threshold = 0.7
    link_similarity = 0.7
    duplicate_similarity = 0.97

    def _encode(self, texts):
        raise NotImplementedError

    def embed(self, texts):
        """
        Args:
            texts (str or list[str]): One text or many.

        Returns:
            numpy.ndarray: Shape `(dims,)` for one text, `(n, dims)` for a list; unit length.
        """
        single = isinstance(texts, str)
        batch = [texts] if single else list(texts)
        if not batch:
            return np.zeros((0, self.dims), dtype=np.float32)
        vectors = np.asarray(self._encode(batch), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1.0, norms)
        return vectors[0] if single else vectors

    def similarity(self, text_a, text_b):
        """Cosine similarity of two texts (float in [-1, 1])."""
        vectors = self.embed([text_a, text_b])
        return float(vectors[0] @ vectors[1])


class WordLlamaEmbedder(LocalEmbedder):
    """
    WordLlama's static `l2_supercat` model, shipped inside the `wordllama` wheel.

    Thresholds calibrated on paraphrase / related / unrelated pairs and question -> fact
    pairs (docs/embedder-choice.md): relevance 0.3 sits above every unrelated pair (max 0.22)
    and below most answers; links at 0.5 join paraphrases and close relations, not mere
    topic neighbours.
    """

    name = f"wordllama-{WORDLLAMA_CONFIG}-{WORDLLAMA_DIM}"
    dims = WORDLLAMA_DIM
    relevance_threshold = 0.3
    link_similarity = 0.5
    duplicate_similarity = 0.97

    def __init__(self):
        with _load_lock:
            self._model = _load_wordllama(WORDLLAMA_CONFIG, WORDLLAMA_DIM)

    def _encode(self, texts):
        return self._model.embed(texts, norm=True)


EMBEDDERS = {"wordllama": WordLlamaEmbedder}


@functools.cache
def get_embedder(name="wordllama"):
    """
    The shared instance of a local embedder (models load once per process).

    Args:
        name (str): A key of `EMBEDDERS`.

    Returns:
        LocalEmbedder: The embedder.

    Raises:
        EmbedderUnavailable: If the name is unknown or its model cannot be loaded offline.
    """
    try:
        embedder_class = EMBEDDERS[name]
    except KeyError:
        known = ", ".join(sorted(EMBEDDERS))
        raise EmbedderUnavailable(f"unknown local embedder {name!r} (known: {known})") from None
    return embedder_class()
