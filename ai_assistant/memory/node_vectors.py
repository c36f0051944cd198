"""
Memory node vectors: how scenes are embedded, stored, indexed and compared.

The "node_vectors" document (kept by `memory.nodes.Nodes`) holds `{"dims", "revision", "nodes":
{id: base64 float32}, "clusters": {id: base64 float32}}`: every node's vector and every
cluster's centroid, kept apart from the nodes themselves so that reading a node never decodes
vectors. `Nodes.vector_index` keeps them as one `VectorIndex` matrix per assistant (in
`ports.runtime.derived["node_index"]`, checked against the document's `revision`, which changes
on every write), so a search over 10,000 nodes is one matrix product. A node older than
`nodes.vectors_full_days` days keeps its vector at a quarter of the size, as int8
(`compact_vector`, by the patrol's bound step).

Embedding runs in the thread pool, off the reactor. Which model embeds is the `nodes.embedder`
setting; tests and benches replace the model and the runner with `set_embedding`.
"""

import base64
import math

import numpy as np

# The specification's thresholds are on text-embedding-3-small's cosine scale. WordLlama's
# scores sit lower (unrelated scenes score at most ~0.22, same-topic scenes 0.19-0.59, a scene
# against the centroid of its topic 0.67-0.88, a question against the scene that answers it
# 0.29-0.48), so while a game leaves a specification default in place, the embedder's
# equivalent is used: recall at 0.30 (above every unrelated pair, below most answers) and
# clustering at 0.40 (a newcomer to a topic clears it, a scene from another topic does not).
SPECIFICATION_DEFAULTS = {"recall_threshold": 0.35, "cluster_threshold": 0.45}
CALIBRATED_THRESHOLDS = {
    "wordllama-l2_supercat-256": {"recall_threshold": 0.30, "cluster_threshold": 0.40},
}

INDEX_CACHE = "node_index"


def threshold(ports, name, embedder=None):
    """
    A similarity threshold ("recall_threshold" or "cluster_threshold") on the embedder's scale.

    Args:
        ports (AssistantPorts): The assistant.
        name (str): The setting name under `nodes`.
        embedder (LocalEmbedder, optional): The embedder the vectors come from.

    Returns:
        float: The configured value; the embedder's calibrated equivalent when the game left
        the specification's default in place.
    """
    value = float(ports.settings.get(f"nodes.{name}"))
    calibrated = CALIBRATED_THRESHOLDS.get(getattr(embedder, "name", None), {})
    if name in calibrated and math.isclose(value, SPECIFICATION_DEFAULTS.get(name, -1.0)):
        return calibrated[name]
    return value


# ----------------------------------------------------------------------------------------------
# The vectors document


# An old node's vector, stored at a quarter of the size: this prefix, then base64 of a float32
# scale and one int8 per dimension (`compact_vector`).
COMPACT_PREFIX = "q8:"


def encode_vector(vector):
    """A vector as compact text: base64 of its float32 bytes."""
    return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode("ascii")


def compact_vector(text):
    """
    An encoded vector at a quarter of its size (idempotent): each dimension as an int8 of
    `scale = max |x| / 127`. Cosine similarities move by well under 0.01, which is below what
    the recall and clustering thresholds tell apart.
    """
    if text.startswith(COMPACT_PREFIX):
        return text
    vector = decode_vector(text)
    scale = float(np.max(np.abs(vector))) / 127 if vector.size else 0.0
    quantised = np.round(vector / scale) if scale else np.zeros_like(vector)
    raw = np.float32(scale).tobytes() + quantised.astype(np.int8).tobytes()
    return COMPACT_PREFIX + base64.b64encode(raw).decode("ascii")


def decode_vector(text):
    """The inverse of `encode_vector` (and of `compact_vector`, to a float32 vector)."""
    if text.startswith(COMPACT_PREFIX):
        raw = base64.b64decode(text[len(COMPACT_PREFIX):])
        scale = np.frombuffer(raw[:4], dtype=np.float32)[0]
        return np.frombuffer(raw[4:], dtype=np.int8).astype(np.float32) * scale
    return np.frombuffer(base64.b64decode(text), dtype=np.float32)


def unit(vector):
    """`vector` scaled to length 1 (zero stays zero)."""
    vector = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


# ----------------------------------------------------------------------------------------------
# Cluster centroids


def cluster_vector(vectors, cluster_id):
    """A cluster's centroid from the vectors document, or None."""
    encoded = vectors["clusters"].get(cluster_id)
    return decode_vector(encoded) if encoded else None


def best_cluster(vectors, query, cluster_ids=None):
    """
    The cluster whose centroid is most similar to `query`.

    Returns:
        tuple: `(cluster_id, similarity)`, or `(None, -1.0)` when no cluster has a centroid.
    """
    best, best_score = None, -1.0
    for cluster_id, encoded in vectors["clusters"].items():
        if cluster_ids is not None and cluster_id not in cluster_ids:
            continue
        score = float(decode_vector(encoded) @ query)
        if score > best_score:
            best, best_score = cluster_id, score
    return best, best_score


# ----------------------------------------------------------------------------------------------
# The index


class VectorIndex:
    """
    Node vectors as one matrix, so a similarity search is a single matrix product.

    Args:
        ids (list[str]): Node ids, one per row.
        matrix (numpy.ndarray): `(len(ids), dims)` float32, unit rows.
    """

    def __init__(self, ids, matrix):
        self.ids = list(ids)
        self.matrix = matrix
        self.rows = {node_id: row for row, node_id in enumerate(self.ids)}

    @classmethod
    def from_doc(cls, doc):
        ids = list(doc.get("nodes") or {})
        if not ids:
            return cls([], np.zeros((0, int(doc.get("dims") or 0)), dtype=np.float32))
        matrix = np.stack([decode_vector(doc["nodes"][node_id]) for node_id in ids])
        return cls(ids, matrix)

    def __len__(self):
        return len(self.ids)

    def scores(self, query):
        """Cosine similarity of every node to the unit vector `query`."""
        if not self.ids:
            return np.zeros(0, dtype=np.float32)
        return self.matrix @ np.asarray(query, dtype=np.float32)

    def search(self, query, *, threshold=0.0, limit=3, accept=None):
        """
        The best nodes for `query`.

        Args:
            query (numpy.ndarray): A unit vector.
            threshold (float): Minimum cosine similarity.
            limit (int): At most this many.
            accept (callable, optional): `accept(node_id) -> bool` filter (e.g. active only).

        Returns:
            list[tuple]: `(node_id, score)`, best first.
        """
        scores = self.scores(query)
        found = []
        for row in np.argsort(-scores, kind="stable"):
            score = float(scores[row])
            if score < threshold or len(found) >= limit:
                break
            node_id = self.ids[row]
            if accept is None or accept(node_id):
                found.append((node_id, score))
        return found


# ----------------------------------------------------------------------------------------------
# Embedding (off the reactor)

# Process-wide on purpose: the embedding model is loaded once per process and shared by every
# assistant (`memory.embedder.get_embedder`), and the runner is the process's CPU pool. This
# replaces both for the whole process, as tests and benches need; it holds no assistant's state.
_EMBEDDING = {"embedder": None, "runner": None}


def set_embedding(embedder=None, runner=None):
    """
    Replace the embedder and/or the blocking-call runner nodes use (tests inject fakes).

    Args:
        embedder (LocalEmbedder, optional): None restores the configured one.
        runner (callable, optional): `runner(func, *args) -> Deferred`; None restores
            the assistant's `ports.run_cpu_bound`.

    Returns:
        dict: The previous `{"embedder", "runner"}`, to restore later.
    """
    previous = dict(_EMBEDDING)
    _EMBEDDING.update(embedder=embedder, runner=runner)
    return previous


def get_node_embedder(ports, embedder=None):
    """The embedder to use: the one given, the injected one, else the `nodes.embedder` model."""
    if embedder is not None:
        return embedder
    if _EMBEDDING["embedder"] is not None:
        return _EMBEDDING["embedder"]
    from ai_assistant.memory.embedder import get_embedder  # heavy (mem0): imported on use

    return get_embedder(ports.settings.get("nodes.embedder"))


def embed_texts(ports, texts, *, embedder=None, runner=None):
    """
    Embed texts in one batch, in the thread pool.

    Returns:
        Deferred[numpy.ndarray]: `(len(texts), dims)` unit vectors.
    """
    from twisted.internet import defer

    try:
        model = get_node_embedder(ports, embedder)
    except Exception as err:  # model missing: the caller's step fails, state is untouched
        return defer.fail(err)
    runner = runner or _EMBEDDING["runner"] or ports.run_cpu_bound
    return runner(model.embed, list(texts))
