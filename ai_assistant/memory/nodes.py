"""
Memory nodes and clusters (seed 004, "Memory Structure"): the data model the patrol works on.

A **scene note** is what the assistant jots down while awake: a JSON scene (action, actors,
when, setting, dialogue, sensory) with a first-person `feeling`, an `importance` 0-1, `themes`
and the VADSNT `emotion` vector. The patrol (memory/patrol.py) turns notes into **nodes**, one
per scene, and files each node in a **cluster**: the two roots `Business` and `Private`
(created lazily, never split) or a topic sub-cluster under one of them.

State documents (per assistant, so every assistant's memory is isolated from every other's):

- "scene_notes": list of notes `{"id", "type", "created_at", "text", "status", "error"}`.
  `type` "scene" notes are patrol input (`text` is the raw JSON); `status` is "pending" or
  `PARSE_FAILED` (kept for repair, never dropped). Notes of any other type (todo, reminder)
  are shown as unread notes in the prompt snapshot until `read` is set.
- "memory_nodes": `{node id: node}` with every field of the seed's table except the vector.
- "memory_clusters": `{cluster id: {"id", "name", "parent_id", "is_parent", "created_at"}}`;
  a root's `parent_id` is its own id.
- "node_vectors": `{"dims", "revision", "nodes": {id: base64 float32}, "clusters": {...}}`,
  the node vectors and the cluster centroids, kept apart from the documents so that reading a
  node never decodes vectors. `VectorIndex` caches them as one numpy matrix per assistant
  (keyed by `revision`, which changes on every write), so a search over 10,000 nodes is one
  matrix product.

Decay, as the seed's own code computes it (its plain formula could never revive a node):
`eff_imp = importance * exp(-(session_count - reactivation_count) / decay_sessions)`.
"""

import base64
import json
import math
import uuid

import numpy as np

from ai_assistant.plumbing.ports import iso

SCENE_NOTES_DOC = "scene_notes"
NODES_DOC = "memory_nodes"
CLUSTERS_DOC = "memory_clusters"
VECTORS_DOC = "node_vectors"

PARSE_FAILED = "[PARSE_FAILED]"
PENDING = "pending"

ACTIVE, DYING, DEAD = "active", "dying", "dead"
STATUSES = (ACTIVE, DYING, DEAD)
ROOT_NAMES = ("Business", "Private")

# VADSNT: Valence, Arousal, Dominance, Safety, Novelty, Trust. Each in [-1, 1].
EMOTION_AXES = ("valence", "arousal", "dominance", "safety", "novelty", "trust")

MAX_LIST_ITEMS = 20
MAX_FIELD_CHARS = 1000

# The seed's thresholds are on text-embedding-3-small's cosine scale. WordLlama's scores sit
# lower (unrelated scenes score at most ~0.22, same-topic scenes 0.19-0.59, a scene against
# the centroid of its topic 0.67-0.88, a question against the scene that answers it
# 0.29-0.48), so while a game leaves a seed default in place, the embedder's equivalent is
# used: recall at 0.30 (above every unrelated pair, below most answers) and clustering at
# 0.40 (a newcomer to a topic clears it, a scene from another topic does not).
SEED_DEFAULTS = {"recall_threshold": 0.35, "cluster_threshold": 0.45}
CALIBRATED_THRESHOLDS = {
    "wordllama-l2_supercat-256": {"recall_threshold": 0.30, "cluster_threshold": 0.40},
}


class SceneError(ValueError):
    """A scene note that is not a valid scene (the message says why)."""


# ----------------------------------------------------------------------------------------------
# Settings


def setting(ports, name):
    """A `nodes.<name>` setting."""
    return ports.settings.get(f"nodes.{name}")


def threshold(ports, name, embedder=None):
    """
    A similarity threshold ("recall_threshold" or "cluster_threshold") on the embedder's scale.

    Args:
        ports (AssistantPorts): The assistant.
        name (str): The setting name under `nodes`.
        embedder (LocalEmbedder, optional): The embedder the vectors come from.

    Returns:
        float: The configured value; the embedder's calibrated equivalent when the game left
        the seed's default in place.
    """
    value = float(setting(ports, name))
    calibrated = CALIBRATED_THRESHOLDS.get(getattr(embedder, "name", None), {})
    if name in calibrated and math.isclose(value, SEED_DEFAULTS.get(name, -1.0)):
        return calibrated[name]
    return value


# ----------------------------------------------------------------------------------------------
# Scenes


def _text(value, field, limit=MAX_FIELD_CHARS, required=False):
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise SceneError(f"'{field}' is required")
        return ""
    if not isinstance(value, (str, int, float)):
        raise SceneError(f"'{field}' must be text")
    return " ".join(str(value).split())[:limit]


def _text_list(value, field, required=False):
    if value is None or value == "":
        value = []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise SceneError(f"'{field}' must be a list of strings")
    items = [_text(item, field) for item in value[:MAX_LIST_ITEMS]]
    items = [item for item in items if item]
    if required and not items:
        raise SceneError(f"'{field}' must name at least one")
    return items


def _when_list(value, default_date):
    if value is None or value == "" or value == []:
        return [default_date] if default_date else []
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list):
        raise SceneError("'when' must be a list of dates or {date, action} items")
    items = []
    for item in value[:MAX_LIST_ITEMS * 5]:
        if isinstance(item, dict):
            date = _text(item.get("date"), "when.date", 40, required=True)
            items.append({"date": date, "action": _text(item.get("action"), "when.action")})
        else:
            items.append(_text(item, "when", 40, required=True))
    return items


def normalize_emotion(value):
    """
    The VADSNT vector as `{axis: float in [-1, 1]}`.

    Accepts a dict keyed by axis name or initial (V, A, D, S, N, T), or a list of six numbers.

    Raises:
        SceneError: When it is neither.
    """
    if value is None or value == {}:
        return {}
    if isinstance(value, list):
        if len(value) != len(EMOTION_AXES):
            raise SceneError("'emotion' as a list needs six numbers (V, A, D, S, N, T)")
        value = dict(zip(EMOTION_AXES, value, strict=True))
    if not isinstance(value, dict):
        raise SceneError("'emotion' must be an object of VADSNT values")
    initials = {axis[0]: axis for axis in EMOTION_AXES}
    emotion = {}
    for key, number in value.items():
        axis = str(key).lower()
        axis = initials.get(axis, axis)
        if axis not in EMOTION_AXES:
            continue
        try:
            emotion[axis] = max(-1.0, min(1.0, float(number)))
        except (TypeError, ValueError):
            raise SceneError(f"emotion '{axis}' must be a number") from None
    return emotion


def parse_scene_input(data, *, default_date=None):
    """
    Validate a SceneInput: the scene fields (flat, or under "scene") plus feeling, importance,
    themes and emotion.

    Args:
        data (dict or str): The input, or its JSON text.
        default_date (str, optional): `when` when the input gives none.

    Returns:
        dict: `{"scene", "feeling", "importance", "themes", "emotion"}`; importance is clamped
        to 0-1 (the seed's `clamp(0, 1, scene.importance ?? 0.5)`), None when absent.

    Raises:
        SceneError: When the JSON is unreadable or a required field is missing.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as err:
            raise SceneError(f"not valid JSON ({err.msg} at char {err.pos})") from None
    if not isinstance(data, dict):
        raise SceneError("a scene must be a JSON object")
    scene_data = data.get("scene") if isinstance(data.get("scene"), dict) else data
    scene = {
        "action": _text(scene_data.get("action"), "action", required=True),
        "actors": _text_list(scene_data.get("actors"), "actors", required=True),
        "when": _when_list(scene_data.get("when"), default_date),
    }
    if not scene["when"]:
        raise SceneError("'when' is required")
    setting_text = _text(scene_data.get("setting"), "setting")
    if setting_text:
        scene["setting"] = setting_text
    for field in ("dialogue", "sensory"):
        items = _text_list(scene_data.get(field), field)
        if items:
            scene[field] = items
    importance = data.get("importance", scene_data.get("importance"))
    if importance is not None:
        try:
            importance = max(0.0, min(1.0, float(importance)))
        except (TypeError, ValueError):
            raise SceneError("'importance' must be a number from 0 to 1") from None
    return {
        "scene": scene,
        "feeling": _text(data.get("feeling", scene_data.get("feeling")), "feeling"),
        "importance": importance,
        "themes": _text_list(data.get("themes", scene_data.get("themes")), "themes"),
        "emotion": normalize_emotion(data.get("emotion", scene_data.get("emotion"))),
    }


def when_date(item):
    """The date of a WhenItem (either form)."""
    return item.get("date", "") if isinstance(item, dict) else str(item)


def when_text(when):
    """A scene's timeline as plain text: dates, with the absorbed actions of object items."""
    parts = []
    for item in when or []:
        if isinstance(item, dict):
            parts.append(f"{item.get('date', '')} {item.get('action', '')}".strip())
        else:
            parts.append(str(item))
    return " ".join(part for part in parts if part)


def node_embed_text(node):
    """The seed's `nodeToEmbedText`: `when + action + feeling`."""
    scene = node.get("scene") or {}
    parts = [when_text(scene.get("when")), scene.get("action", ""), node.get("feeling", "")]
    return " ".join(part for part in parts if part)


def scene_to_text(node):
    """
    The seed's `sceneToText`: `YYYY-MM-DD — setting — action — "first dialogue" — (feeling)`,
    leaving out the parts a scene does not have.
    """
    scene = node.get("scene") or {}
    when = scene.get("when") or []
    parts = [when_date(when[0]) if when else "", scene.get("setting", ""), scene.get("action", "")]
    dialogue = scene.get("dialogue") or []
    if dialogue:
        parts.append(f'"{dialogue[0]}"')
    if node.get("feeling"):
        parts.append(f"({node['feeling']})")
    return " — ".join(part for part in parts if part)


def today(ports):
    """Today's date as the seed writes it, YYYY-MM-DD."""
    return ports.clock.now().strftime("%Y-%m-%d")


# ----------------------------------------------------------------------------------------------
# Scene notes


def scene_notes(ports):
    """The "scene_notes" list (a copy to change and `set` back)."""
    return [dict(note) for note in ports.state.get(SCENE_NOTES_DOC, None) or []]


def add_scene_note(ports, scene_input):
    """
    Record a scene note for the next patrol. Text that is not a valid scene is kept too,
    marked `[PARSE_FAILED]`, so a later patrol can repair it.

    Args:
        ports (AssistantPorts): The assistant.
        scene_input (dict or str): A SceneInput, or the raw text the model wrote.

    Returns:
        dict: The stored note.
    """
    text = scene_input if isinstance(scene_input, str) else json.dumps(scene_input)
    limit = int(setting(ports, "max_note_chars"))
    note = {
        "id": uuid.uuid4().hex,
        "type": "scene",
        "created_at": iso(ports.clock.now()),
        "text": text[: limit * 2],  # oversized raw text is cut, never rejected: it is repairable
        "status": PENDING,
        "error": None,
    }
    try:
        parse_scene_input(text, default_date=today(ports))
    except SceneError as err:
        note.update(status=PARSE_FAILED, error=str(err))
    notes = scene_notes(ports)
    notes.append(note)
    ports.state.set(SCENE_NOTES_DOC, notes)
    return note


# ----------------------------------------------------------------------------------------------
# Nodes


def new_node(node_id, parsed, *, cluster_id=None, now=None, default_importance=0.5):
    """
    A fresh node from a parsed SceneInput (every field of the seed's table but the vector).
    """
    importance = parsed.get("importance")
    return {
        "id": node_id,
        "scene": parsed["scene"],
        "feeling": parsed.get("feeling", ""),
        "importance": float(default_importance if importance is None else importance),
        "cluster_id": cluster_id,
        "themes": list(parsed.get("themes") or []),
        "emotion": dict(parsed.get("emotion") or {}),
        "session_count": 0,
        "status": ACTIVE,
        "fresh": True,
        "pinned": False,
        "reactivation_count": 0,
        "last_activated": None,
        "created_at": now,
    }


def load_nodes(ports):
    """The "memory_nodes" document: `{id: node}` (a copy to change and `set` back)."""
    return {key: dict(node) for key, node in (ports.state.get(NODES_DOC, None) or {}).items()}


def load_clusters(ports):
    """The "memory_clusters" document: `{id: cluster}` (a copy to change and `set` back)."""
    return {key: dict(c) for key, c in (ports.state.get(CLUSTERS_DOC, None) or {}).items()}


def effective_importance(node, decay_sessions=30):
    """
    `importance * exp(-(session_count - reactivation_count) / decay_sessions)`.

    Args:
        node (dict): The node.
        decay_sessions (float): The decay constant (the seed's 30).

    Returns:
        float: The importance decay leaves; recalls (reactivations) hold it up.
    """
    elapsed = int(node.get("session_count", 0)) - int(node.get("reactivation_count", 0))
    return float(node.get("importance", 0.0)) * math.exp(-elapsed / float(decay_sessions))


def reactivate(node, amount, now):
    """Count a recall of `node` (+1 for a live node, +2 for a dead one as the seed says)."""
    node["reactivation_count"] = int(node.get("reactivation_count", 0)) + int(amount)
    node["last_activated"] = iso(now)
    return node


def reactivation_amount(node):
    """The seed's table: dead nodes +2 (aggressive revival signal), others +1."""
    return 2 if node.get("status") == DEAD else 1


# ----------------------------------------------------------------------------------------------
# Clusters


def ensure_root(clusters, name, now):
    """
    The root cluster called `name` ("Business" or "Private"), created in `clusters` if absent.

    Returns:
        str: Its id.
    """
    for cluster in clusters.values():
        if cluster.get("is_parent") and cluster.get("name") == name:
            return cluster["id"]
    cluster_id = uuid.uuid4().hex
    clusters[cluster_id] = {
        "id": cluster_id,
        "name": name,
        "parent_id": cluster_id,
        "is_parent": True,
        "created_at": now,
    }
    return cluster_id


def new_sub_cluster(clusters, name, parent_id, now):
    """Add a topic sub-cluster under `parent_id`; returns its id."""
    cluster_id = uuid.uuid4().hex
    clusters[cluster_id] = {
        "id": cluster_id,
        "name": _text(name, "name", 120) or "Untitled",
        "parent_id": parent_id,
        "is_parent": False,
        "created_at": now,
    }
    return cluster_id


def cluster_members(nodes, cluster_id, statuses=None):
    """The nodes of one cluster (optionally only those with the given statuses)."""
    return [
        node for node in nodes.values()
        if node.get("cluster_id") == cluster_id
        and (statuses is None or node.get("status") in statuses)
    ]


def find_cluster(clusters, key):
    """A cluster by id, or by name (case-insensitive); None when unknown."""
    if key in clusters:
        return clusters[key]
    wanted = str(key).strip().lower()
    for cluster in clusters.values():
        if str(cluster.get("name", "")).lower() == wanted:
            return cluster
    return None


# ----------------------------------------------------------------------------------------------
# Vectors


def encode_vector(vector):
    """A vector as compact text: base64 of its float32 bytes."""
    return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode("ascii")


def decode_vector(text):
    """The inverse of `encode_vector`."""
    return np.frombuffer(base64.b64decode(text), dtype=np.float32)


def unit(vector):
    """`vector` scaled to length 1 (zero stays zero)."""
    vector = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def load_vectors(ports):
    """The "node_vectors" document (a copy to change and pass to `save_vectors`)."""
    doc = ports.state.get(VECTORS_DOC, None) or {}
    return {
        "dims": doc.get("dims"),
        "revision": doc.get("revision"),
        "nodes": dict(doc.get("nodes") or {}),
        "clusters": dict(doc.get("clusters") or {}),
    }


def save_vectors(ports, doc):
    """Persist the vectors with a new revision, so every cached index of them is dropped."""
    doc["revision"] = uuid.uuid4().hex
    ports.state.set(VECTORS_DOC, doc)


def recompute_centroids(nodes, vectors, cluster_ids):
    """
    Set each cluster's centroid to the normalised mean of its active nodes' vectors (in the
    vectors document); a cluster with no active vectors loses its centroid.

    Args:
        nodes (dict): `{id: node}`.
        vectors (dict): The "node_vectors" document, changed in place.
        cluster_ids (iterable): The clusters to recompute.
    """
    wanted = set(cluster_ids)
    rows = {cluster_id: [] for cluster_id in wanted}
    for node in nodes.values():
        cluster_id = node.get("cluster_id")
        if cluster_id in wanted and node.get("status") == ACTIVE:
            encoded = vectors["nodes"].get(node["id"])
            if encoded:
                rows[cluster_id].append(decode_vector(encoded))
    for cluster_id, members in rows.items():
        if members:
            vectors["clusters"][cluster_id] = encode_vector(unit(np.mean(members, axis=0)))
        else:
            vectors["clusters"].pop(cluster_id, None)


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


_INDEX_CACHE = {}


def vector_index(ports):
    """
    The cached `VectorIndex` of this assistant's node vectors, rebuilt when they change.

    The cache is keyed by assistant key and checked against the document's revision (which
    `save_vectors` renews), so a stale index is never used and assistants never share one.
    """
    doc = ports.state.get(VECTORS_DOC, None) or {}
    revision = doc.get("revision")
    cached = _INDEX_CACHE.get(ports.key)
    if cached is not None and revision is not None and cached[0] == revision:
        return cached[1]
    index = VectorIndex.from_doc(doc)
    _INDEX_CACHE[ports.key] = (revision, index)
    return index


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
# Embedding (off the reactor)

_EMBEDDING = {"embedder": None, "runner": None}


def set_embedding(embedder=None, runner=None):
    """
    Replace the embedder and/or the blocking-call runner nodes use (tests inject fakes).

    Args:
        embedder (LocalEmbedder, optional): None restores the configured one.
        runner (callable, optional): `runner(func, *args) -> Deferred`; None restores
            `threads.run_cpu_bound`.

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

    return get_embedder(setting(ports, "embedder"))


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
    runner = runner or _EMBEDDING["runner"]
    if runner is None:
        from ai_assistant.plumbing.threads import run_cpu_bound as runner
    return runner(model.embed, list(texts))
