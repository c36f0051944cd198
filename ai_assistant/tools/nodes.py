"""
Memory node tools (family "nodes"): `note_scene`, `recall_scenes`, `open_memory_cluster` and
`find_scenes_by_keyword` (formerly `recall`, `recall_memory` and `search_memory`: names a model
confused with each other and with `search_facts`; the old names are still accepted).

`note_scene` queues a scene for the next memory patrol (`sleep.patrol`). The three recall tools
read the nodes and count each hit as a reactivation, which holds decay back and can revive dead
nodes (the specification's "Revive dead nodes"): `recall_scenes` +1 on the active nodes its
vector search returns; `open_memory_cluster` and `find_scenes_by_keyword` +1 on live nodes, +2
on dead ones.
"""

import json
import random

from twisted.internet import defer

from ai_assistant.memory import node_vectors
from ai_assistant.memory import nodes as nodes_model
from ai_assistant.memory.audience import turn_audience, turn_viewer, visible_to
from ai_assistant.memory.nodes import (
    ACTIVE,
    DEAD,
    EMOTION_AXES,
    Nodes,
    SceneError,
    find_cluster,
    scene_to_text,
    setting,
)
from ai_assistant.tools.registry import (
    CONVERSATION,
    MEMORY,
    SCOPED,
    Tool,
    ToolCategory,
    error_result,
)

__all__ = [
    "NoteSceneTool", "RecallScenesTool", "OpenMemoryClusterTool", "FindScenesByKeywordTool",
    "recall_nodes", "search_nodes", "to_fragments", "RECALL_TAG",
]

# The tag recall results are wrapped in (the specification's "Recall Flow").
RECALL_TAG = "memory"

_string_list = {"type": "array", "items": {"type": "string"}}

_rng = random.Random()


def fisher_yates(items, rng=None):
    """Shuffle a copy of `items` with the Fisher-Yates algorithm (injectable `rng`)."""
    rng = rng or _rng
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        j = rng.randint(0, i)
        items[i], items[j] = items[j], items[i]
    return items


def to_fragments(node_list, rng=None):
    """
    The specification's `toFragments`: every node's action and feeling, shuffled together and
    joined with " / ", so the memories come back as a diffuse impression rather than a list.
    """
    pieces = []
    for node in node_list:
        for text in ((node.get("scene") or {}).get("action"), node.get("feeling")):
            if text and str(text).strip():
                pieces.append(str(text).strip())
    return " / ".join(fisher_yates(pieces, rng))


@defer.inlineCallbacks
def recall_nodes(ports, query, *, rng=None, embedder=None, runner=None):
    """
    Recall by meaning: the active nodes most similar to `query` (at least the recall
    threshold, at most `recall_top_k`), each reactivated +1, as shuffled fragments.

    Returns:
        Deferred[dict]: `{"success", "result", "count", "node_ids"}`; `result` is
        `<memory>fragment / fragment</memory>`, or "" when nothing matched.
    """
    index = Nodes(ports).vector_index()
    if not len(index):
        return {"success": True, "result": "", "count": 0, "node_ids": []}
    model = node_vectors.get_node_embedder(ports, embedder)
    matrix = yield node_vectors.embed_texts(ports, [query], embedder=model, runner=runner)
    cut = node_vectors.threshold(ports, "recall_threshold", model)
    limit = int(setting(ports, "recall_top_k"))
    index = Nodes(ports).vector_index()  # re-read: a patrol may have written meanwhile
    current = Nodes(ports).stored()
    viewer = turn_viewer(ports.world)  # a scene told in private comes back to its teller only
    hits = index.search(
        matrix[0], threshold=cut, limit=limit,
        accept=lambda node_id: ((current.get(node_id) or {}).get("status") == ACTIVE
                                and visible_to(current[node_id], viewer)),
    )
    if not hits:
        return {"success": True, "result": "", "count": 0, "node_ids": []}
    touched = Nodes(ports).recalled([node_id for node_id, _ in hits], amount=1)
    text = to_fragments(touched, rng)
    return {
        "success": True,
        "result": f"<{RECALL_TAG}>{text}</{RECALL_TAG}>",
        "count": len(touched),
        "node_ids": [node["id"] for node in touched],
    }


def _matches(node, term):
    scene = node.get("scene") or {}
    term = term.lower()
    if term in str(scene.get("action", "")).lower() or term in str(node.get("feeling")).lower():
        return True
    if any(str(theme).lower() == term for theme in node.get("themes") or []):
        return True
    when = json.dumps(scene.get("when") or [], ensure_ascii=False).lower()
    return term in when


def search_nodes(ports, query, mode="or", limit=None):
    """
    Keyword search over action, feeling, themes and the `when` timeline (as specified): any term
    (mode "or") or every term (mode "and"); every hit is reactivated (+1 live, +2 dead).

    Returns:
        list[dict]: The matching nodes after reactivation, most important first.
    """
    terms = [term for term in str(query).split() if term]
    limit = int(limit or setting(ports, "search_limit"))
    combine = all if mode == "and" else any
    nodes = Nodes(ports).stored()
    viewer = turn_viewer(ports.world)
    hits = [n for n in nodes.values() if combine(_matches(n, term) for term in terms)
            and visible_to(n, viewer) and not n.get("wrong")]  # staff marked its source wrong
    hits.sort(key=lambda n: (-float(n.get("importance", 0)), n.get("created_at") or ""))
    return Nodes(ports).recalled([node["id"] for node in hits[:limit]])


def _node_summary(node):
    return {
        "id": node["id"],
        "text": scene_to_text(node),
        "status": node.get("status"),
        "importance": round(float(node.get("importance", 0)), 3),
        "themes": node.get("themes") or [],
        "reactivation_count": node.get("reactivation_count", 0),
    }


class NoteSceneTool(Tool):
    name = "note_scene"
    description = (
        "Note a scene you lived through, to be filed in long-term memory at your next memory "
        "patrol: what happened, who was there, when, and how you felt about it (first person)."
    )
    parameters = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "minLength": 1, "description": "What happened."},
            "actors": {**_string_list, "minItems": 1, "description": "Who was involved."},
            "when": {
                "type": "array",
                "items": {"anyOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {"date": {"type": "string"},
                                                      "action": {"type": "string"}},
                     "required": ["date"]},
                ]},
                "description": "Dates (YYYY-MM-DD); today when left out.",
            },
            "setting": {"type": "string", "description": "Where, or the context."},
            "dialogue": {**_string_list, "description": "Notable quotes."},
            "sensory": {**_string_list, "description": "Sensory details."},
            "feeling": {"type": "string", "description": "Your impression, first person."},
            "importance": {"type": "number", "minimum": 0, "maximum": 1},
            "themes": {**_string_list, "description": "Theme tags."},
            "emotion": {
                "type": "object",
                "properties": {axis: {"type": "number", "minimum": -1, "maximum": 1}
                               for axis in EMOTION_AXES},
                "description": "VADSNT: valence, arousal, dominance, safety, novelty, trust.",
            },
        },
        "required": ["action", "actors"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "nodes"
    reach = SCOPED
    kit = MEMORY
    # in a player's turn the grant sources the note to the speaker, importance and trust capped
    sourced = True

    def run(self, ports, source_entity=None, source_trust=None, provenance=None, **scene):
        limit = int(setting(ports, "max_note_chars"))
        if len(json.dumps(scene)) > limit:
            return error_result(f"the scene is too long (at most {limit} characters)")
        try:
            nodes_model.parse_scene_input(scene, default_date=nodes_model.today(ports))
        except SceneError as err:
            return error_result(f"not a valid scene: {err}")
        if not scene.get("when"):
            scene["when"] = [nodes_model.today(ports)]
        # a scene noted in a whispered conversation stays private to the whisperer
        note = Nodes(ports).add_scene_note(
            scene, audience=turn_audience(ports.world),
            source={"source_entity": source_entity, "source_trust": source_trust},
            provenance=provenance)
        return {"success": True, "note_id": note["id"],
                "message": "Scene noted; it will be filed at your next memory patrol."}


class RecallScenesTool(Tool):
    name = "recall_scenes"
    aliases = ("recall",)
    description = (
        "Let scenes you lived through come to mind: those most like what you describe come "
        "back as loose fragments."
    )
    parameters = {
        "type": "object",
        "properties": {"query": {"type": "string", "minLength": 1}},
        "required": ["query"],
    }
    category = ToolCategory.ASYNC_REQUIRED
    family = "nodes"
    reach = SCOPED
    kit = CONVERSATION

    def run(self, ports, query=""):
        if not query.strip():
            return error_result("query must not be empty")
        deferred = recall_nodes(ports, query.strip())

        def _failed(failure):
            ports.log(f"{ports.name}: recall failed: {failure.getErrorMessage()}")
            return error_result(f"recall failed: {failure.getErrorMessage()}")

        return deferred.addErrback(_failed)


class OpenMemoryClusterTool(Tool):
    name = "open_memory_cluster"
    aliases = ("recall_memory",)
    # a model that calls `recall_memory` with a query means a search by what it describes
    former_arguments = {"query": "recall_scenes.query"}
    description = (
        "Open one memory cluster (by id or name) and go through its scenes; recalling "
        "fading or forgotten scenes brings them back."
    )
    parameters = {
        "type": "object",
        "properties": {"cluster_id": {"type": "string", "minLength": 1,
                                      "description": "The cluster's id or name."}},
        "required": ["cluster_id"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "nodes"
    reach = SCOPED
    kit = MEMORY

    def run(self, ports, cluster_id=""):
        clusters = Nodes(ports).clusters()
        cluster = find_cluster(clusters, cluster_id)
        if cluster is None:
            names = ", ".join(sorted(c.get("name", "?") for c in clusters.values())) or "none"
            return error_result(f"no memory cluster '{cluster_id}' (clusters: {names})")
        members = [node for node in nodes_model.cluster_members(Nodes(ports).nodes(), cluster["id"])
                   if visible_to(node, turn_viewer(ports.world))]
        touched = Nodes(ports).recalled([node["id"] for node in members])
        return {
            "success": True,
            "cluster": {"id": cluster["id"], "name": cluster.get("name")},
            "nodes": [_node_summary(node) for node in touched],
            "dead_recalled": sum(1 for node in members if node.get("status") == DEAD),
        }


class FindScenesByKeywordTool(Tool):
    name = "find_scenes_by_keyword"
    aliases = ("search_memory",)
    description = (
        "Search your memory scenes by keywords (in what happened, how you felt, themes and "
        "dates). Any keyword matches by default; mode 'and' needs every keyword."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "Keywords."},
            "mode": {"type": "string", "enum": ["or", "and"]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "required": ["query"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "nodes"
    reach = SCOPED
    kit = MEMORY

    def run(self, ports, query="", mode="or", limit=None):
        if not query.split():
            return error_result("query must contain at least one keyword")
        hits = search_nodes(ports, query, mode=mode, limit=limit)
        return {"success": True, "count": len(hits),
                "nodes": [_node_summary(node) for node in hits]}
