"""
Memory nodes and clusters: the data model of the memory patrol (the specification's "Memory
Structure").

A **scene note** is what the assistant jots down while awake: a JSON scene (action, actors,
when, setting, dialogue, sensory) with a first-person `feeling`, an `importance` 0-1, `themes`
and the VADSNT `emotion` vector. The patrol (`sleep.patrol`) turns notes into **nodes**, one
per scene, and files each node in a **cluster**: the two roots `Business` and `Private`
(created lazily, never split) or a topic sub-cluster under one of them.

State documents (per assistant, so every assistant's memory is isolated from every other's):

- "scene_notes": list of notes `{"id", "type", "created_at", "text", "status", "error"}`.
  `type` "scene" notes are patrol input (`text` is the raw JSON); `status` is "pending" or
  `PARSE_FAILED` (kept for repair, never dropped). Notes of any other type (todo, reminder)
  are shown as unread notes in the prompt snapshot until `read` is set.
- "memory_nodes": `{node id: node}` with every field of the specification's node table
  except the vector.
- "memory_clusters": `{cluster id: {"id", "name", "parent_id", "is_parent", "created_at"}}`;
  a root's `parent_id` is its own id.
- "node_vectors": the node vectors and cluster centroids (`memory.node_vectors` encodes and
  indexes them).

`Nodes(ports)` (or `npc.assistant.nodes`) is the only code that reads or writes these four
documents; the patrol, the node tools, the prompt's blocks, corrections and the inspector go
through it.

Decay, as the specification's own code computes it (its plain formula could never revive a
node): `eff_imp = importance * exp(-(session_count - reactivation_count) / decay_sessions)`.
"""

import json
import math
import uuid

import numpy as np

from ai_assistant.memory import node_vectors
from ai_assistant.memory import provenance as provenance_model
from ai_assistant.memory.audience import PUBLIC, visible_to
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso

PARSE_FAILED = "[PARSE_FAILED]"
PENDING = "pending"

ACTIVE, DYING, DEAD = "active", "dying", "dead"
STATUSES = (ACTIVE, DYING, DEAD)

# VADSNT: Valence, Arousal, Dominance, Safety, Novelty, Trust. Each in [-1, 1].
EMOTION_AXES = ("valence", "arousal", "dominance", "safety", "novelty", "trust")

MAX_LIST_ITEMS = 20
MAX_FIELD_CHARS = 1000


class SceneError(ValueError):
    """A scene note that is not a valid scene (the message says why)."""


# ----------------------------------------------------------------------------------------------
# Settings


def setting(ports, name):
    """A `nodes.<name>` setting."""
    return ports.settings.get(f"nodes.{name}")


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
        to 0-1 (the specification's `clamp(0, 1, scene.importance ?? 0.5)`), None when absent.

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
    """The specification's `nodeToEmbedText`: `when + action + feeling`."""
    scene = node.get("scene") or {}
    parts = [when_text(scene.get("when")), scene.get("action", ""), node.get("feeling", "")]
    return " ".join(part for part in parts if part)


def scene_to_text(node):
    """
    The specification's `sceneToText`:
    `YYYY-MM-DD — setting — action — "first dialogue" — (feeling)`, leaving out the parts a
    scene does not have.
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
    """Today's date as the specification writes it, YYYY-MM-DD."""
    return ports.clock.now().strftime("%Y-%m-%d")


# ----------------------------------------------------------------------------------------------
# Nodes


def new_node(node_id, parsed, *, cluster_id=None, now=None, default_importance=0.5):
    """
    A fresh node from a parsed SceneInput (every field of the specification's node table but
    the vector).
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
    """
    `{id: node}`, copies, for readers (recall reads the nodes through it); only `Nodes`
    writes them.
    """
    stored = ports.state.get(documents.MEMORY_NODES, None) or {}
    return {key: dict(node) for key, node in stored.items()}


def effective_importance(node, decay_sessions=30):
    """
    `importance * exp(-(session_count - reactivation_count) / decay_sessions)`.

    Args:
        node (dict): The node.
        decay_sessions (float): The decay constant (the specification's 30).

    Returns:
        float: The importance decay leaves; recalls (reactivations) hold it up.
    """
    elapsed = int(node.get("session_count", 0)) - int(node.get("reactivation_count", 0))
    return float(node.get("importance", 0.0)) * math.exp(-elapsed / float(decay_sessions))


def reactivate(node, amount, now):
    """Count a recall of `node` (+1 for a live node, +2 for a dead one, as specified)."""
    node["reactivation_count"] = int(node.get("reactivation_count", 0)) + int(amount)
    node["last_activated"] = iso(now)
    return node


def reactivation_amount(node):
    """The specification's table: dead nodes +2 (aggressive revival signal), others +1."""
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


def public_members(nodes, cluster_id, statuses=None):
    """
    The members of a cluster that everyone may hear of: what the patrol's model merges, splits
    and writes the diary from (a node from a private scene is left as it is).
    """
    return [node for node in cluster_members(nodes, cluster_id, statuses)
            if visible_to(node, PUBLIC)]


def find_cluster(clusters, key):
    """A cluster by id, or by name (case-insensitive); None when unknown."""
    if key in clusters:
        return clusters[key]
    wanted = str(key).strip().lower()
    for cluster in clusters.values():
        if str(cluster.get("name", "")).lower() == wanted:
            return cluster
    return None


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
                rows[cluster_id].append(node_vectors.decode_vector(encoded))
    for cluster_id, members in rows.items():
        if members:
            centroid = node_vectors.unit(np.mean(members, axis=0))
            vectors["clusters"][cluster_id] = node_vectors.encode_vector(centroid)
        else:
            vectors["clusters"].pop(cluster_id, None)


# ----------------------------------------------------------------------------------------------
# The owner


class Nodes:
    """
    One assistant's memory nodes: the only code that reads or writes its scene notes, nodes,
    clusters and node vectors.

    Cheap to build (`Nodes(ports)`, or `npc.assistant.nodes` in a game): it keeps nothing and
    reads the documents afresh on every call. The patrol rewrites the graph as a whole: it
    reads copies (`nodes`, `clusters`, `vectors`), changes them and writes back whichever it
    changed with `save_graph`, with no yield in between.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    # -- scene notes

    def scene_notes(self):
        """The scene notes, oldest first (copies)."""
        return [dict(note) for note in self.ports.state.get(documents.SCENE_NOTES, None) or []]

    def add_scene_note(self, scene_input, audience=PUBLIC, source=None, provenance=None):
        """
        Record a scene note for the next patrol. Text that is not a valid scene is kept too,
        marked `[PARSE_FAILED]`, so a later patrol can repair it.

        Args:
            scene_input (dict or str): A SceneInput, or the raw text the model wrote.
            audience (str, optional): Who may see it (`memory.audience`): the whisperer in a
                private conversation; the node filed from it keeps it.
            source (dict, optional): `source_entity`/`source_trust` of a note made on someone's
                word (a player's turn); the node filed from it keeps them.
            provenance (dict, optional): Where it came from (`memory.provenance`: the turn's
                speaker, how they were heard, the journal entries of their words); read from
                `source` when left out. The node filed from it keeps it.

        Raises:
            ProvenanceError: A provenance that is not valid.

        Returns:
            dict: The stored note.
        """
        text = scene_input if isinstance(scene_input, str) else json.dumps(scene_input)
        limit = int(setting(self.ports, "max_note_chars"))
        note = {
            "id": uuid.uuid4().hex,
            "type": "scene",
            "created_at": iso(self.ports.clock.now()),
            "text": text[: limit * 2],  # oversized raw text is cut, never rejected
            "status": PENDING,
            "error": None,
        }
        if audience is not PUBLIC:
            note["audience"] = str(audience)
        note.update({key: value for key, value in (source or {}).items() if value is not None})
        note = provenance_model.with_provenance(note, provenance)
        try:
            parse_scene_input(text, default_date=today(self.ports))
        except SceneError as err:
            note.update(status=PARSE_FAILED, error=str(err))
        notes = self.scene_notes()
        notes.append(note)
        self.replace_scene_notes(notes)
        return note

    def replace_scene_notes(self, notes):
        """Write the queue of scene notes back (the patrol drops the notes it converted)."""
        self.ports.state.set(documents.SCENE_NOTES, notes)

    # -- the graph

    def stored(self):
        """`{id: node}` as stored, to read only (no copy: cheap on a large graph)."""
        return self.ports.state.get(documents.MEMORY_NODES, None) or {}

    def nodes(self):
        """`{id: node}`: copies to change and `save_graph`."""
        return load_nodes(self.ports)

    def clusters(self):
        """`{id: cluster}`: copies to change and `save_graph`."""
        stored = self.ports.state.get(documents.MEMORY_CLUSTERS, None) or {}
        return {key: dict(cluster) for key, cluster in stored.items()}

    def vectors(self):
        """The vectors document (`memory.node_vectors`): a copy to change and `save_graph`."""
        doc = self.ports.state.get(documents.NODE_VECTORS, None) or {}
        return {
            "dims": doc.get("dims"),
            "revision": doc.get("revision"),
            "nodes": dict(doc.get("nodes") or {}),
            "clusters": dict(doc.get("clusters") or {}),
        }

    def save_graph(self, nodes=None, clusters=None, vectors=None):
        """
        Write back whichever of the nodes, clusters and vectors changed. Vectors get a new
        revision, so every cached index of them is dropped.
        """
        if nodes is not None:
            self.ports.state.set(documents.MEMORY_NODES, nodes)
        if clusters is not None:
            self.ports.state.set(documents.MEMORY_CLUSTERS, clusters)
        if vectors is not None:
            vectors["revision"] = uuid.uuid4().hex
            self.ports.state.set(documents.NODE_VECTORS, vectors)

    def vector_index(self):
        """
        The cached `VectorIndex` of the node vectors, rebuilt when they change.

        The cache lives on the assistant's runtime (`derived["node_index"]`, dropped while the
        assistant is not resident: `plumbing.residency`) and is checked against the document's
        revision (renewed by every `save_graph` of vectors), so a stale index is never used and
        assistants never share one.
        """
        doc = self.ports.state.get(documents.NODE_VECTORS, None) or {}
        revision = doc.get("revision")
        held = self.ports.runtime.derived_cache(node_vectors.INDEX_CACHE, dict)
        if revision is not None and held.get("revision") == revision:
            return held["index"]
        index = node_vectors.VectorIndex.from_doc(doc)
        held.update(revision=revision, index=index)
        return index

    # -- what recall and staff change

    def recalled(self, node_ids, amount=None):
        """
        Count a recall of these nodes (`reactivate`: +1 live, +2 dead unless `amount` says).

        Returns:
            list: The nodes recalled (those that still exist), as stored now.
        """
        nodes = self.nodes()
        now = self.ports.clock.now()
        touched = []
        for node_id in node_ids:
            node = nodes.get(node_id)
            if node is None:
                continue
            reactivate(node, amount if amount is not None else reactivation_amount(node), now)
            touched.append(node)
        if touched:
            self.save_graph(nodes)
        return touched

    def derived_from(self, reference):
        """Ids of the nodes made from the record `reference` ("journal:12"), at any remove."""
        return [node_id for node_id, node in self.stored().items()
                if reference in provenance_model.of(node)["derived_from"]]

    def mark_wrong(self, node_ids, mark):
        """
        Put nodes to rest for a correction of what they were made from: dead, never revived
        nor recalled while `wrong` stays. Returns `{node id: status before}` of those marked.
        """
        nodes, before = self.nodes(), {}
        for node in (nodes[i] for i in node_ids if i in nodes and not nodes[i].get("wrong")):
            before[node["id"]] = node.get("status")
            node.update(wrong={**mark, "status_before": node.get("status")}, status=DEAD)
        if before:
            self.save_graph(nodes)
        return before

    def lift_wrong(self, node_ids):
        """Lift the wrong mark of nodes, their status back as it was; the ids lifted."""
        nodes = self.nodes()
        lifted = [i for i in node_ids if i in nodes and nodes[i].get("wrong")]
        for node_id in lifted:
            nodes[node_id]["status"] = nodes[node_id].pop("wrong").get("status_before") or ACTIVE
        if lifted:
            self.save_graph(nodes)
        return lifted

    def pin(self, node_id, pinned):
        """
        Pin (or unpin) a node: a pinned node never starts dying.

        Returns:
            dict: The node.

        Raises:
            KeyError: When there is no such node.
        """
        nodes = self.nodes()
        node = nodes[str(node_id)]
        node["pinned"] = bool(pinned)
        self.save_graph(nodes)
        return node
