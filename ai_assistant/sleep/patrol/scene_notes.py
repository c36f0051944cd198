"""
Patrol step: scene notes become memory nodes.

Unreadable notes are first offered to the model for repair; each readable note becomes a fresh
node, embedded with the others in one batch and filed in the most similar cluster at or above
the cluster threshold, else in the root (Business or Private) the model classifies it under -
Business when there is no model. Notes still unreadable stay queued, marked `[PARSE_FAILED]`.
"""

import json

from twisted.internet import defer

from ai_assistant.memory import node_vectors, provenance
from ai_assistant.memory import nodes as nodes_model
from ai_assistant.memory.audience import PUBLIC, audience_of
from ai_assistant.memory.nodes import (
    PARSE_FAILED,
    Nodes,
    SceneError,
    recompute_centroids,
    setting,
)
from ai_assistant.memory.patrol_record import PatrolRecord
from ai_assistant.plumbing.ports import LLMError
from ai_assistant.plumbing.quoting import defuse
from ai_assistant.sleep.patrol.graph import embedder_or_none, now_iso
from ai_assistant.sleep.patrol.prompts import CLASSIFY_PROMPT, REPAIR_PROMPT, ask_json


@defer.inlineCallbacks
def repair_failed_notes(ports):
    """
    Ask the LLM to rewrite `[PARSE_FAILED]` scene notes as valid scenes (bounded per patrol).

    Returns:
        Deferred[dict]: `{note id: repaired JSON text}` for the notes it could repair.
    """
    repaired = {}
    if ports.mechanical:
        return repaired
    limit = int(setting(ports, "repair_max_per_patrol"))
    candidates = []
    for note in Nodes(ports).scene_notes():
        if note.get("type", "scene") != "scene" or note.get("status") != PARSE_FAILED:
            continue
        try:  # edited since it failed: nothing to repair
            nodes_model.parse_scene_input(note.get("text"), default_date="0000-00-00")
        except SceneError as err:
            candidates.append((note, str(err)))
    for note, error in candidates[:limit]:
        prompt = REPAIR_PROMPT.format(error=error, text=defuse(note.get("text"), 4000))
        try:
            value = yield ask_json(ports, prompt, "patrol_repair")
            nodes_model.parse_scene_input(value, default_date=(note.get("created_at") or "")[:10])
        except (LLMError, SceneError) as err:
            ports.log(f"{ports.name}: patrol could not repair scene note {note['id']}: {err}")
            continue
        repaired[note["id"]] = json.dumps(value, ensure_ascii=False)
    return repaired


@defer.inlineCallbacks
def classify_actions(ports, node_list):
    """
    Business or Private for each node, in one LLM call; Business when there is no LLM or
    its answer is unusable (the specification's mechanical default).

    Returns:
        Deferred[list[str]]: One root name per node.
    """
    names = ["Business"] * len(node_list)
    if ports.mechanical or not node_list:
        return names
    lines = "\n".join(
        # one line each, so no action can forge another's number
        f"[{number}] {' '.join(defuse(node['scene']['action'], 300).split())}"
        for number, node in enumerate(node_list, 1)
    )
    prompt = CLASSIFY_PROMPT.format(name=ports.name, lines=lines)
    try:
        reply = yield ask_json(ports, prompt, "patrol_classify")
    except LLMError as err:
        ports.log(f"{ports.name}: patrol classification failed, filing as Business: {err}")
        return names
    for number in range(1, len(node_list) + 1):
        answer = str(reply.get(str(number), "")).strip().lower()
        if answer == "private":
            names[number - 1] = "Private"
    return names


def _parse_notes(ports, repaired):
    """
    The scene notes as fresh nodes (repaired text where there is some).

    Returns:
        tuple: `(nodes, failed)`: the nodes of the readable notes, and `{note id: error}`.
    """
    default_importance = float(setting(ports, "default_importance"))
    prepared, failed = [], {}
    for note in Nodes(ports).scene_notes():
        if note.get("type", "scene") != "scene":
            continue
        text = repaired.get(note["id"], note.get("text"))
        try:
            parsed = nodes_model.parse_scene_input(
                text, default_date=(note.get("created_at") or "")[:10] or None
            )
        except SceneError as err:
            failed[note["id"]] = str(err)
            continue
        node = nodes_model.new_node(note["id"], parsed, default_importance=default_importance)
        if audience_of(note) is not PUBLIC:
            node["audience"] = audience_of(note)  # a scene told in private stays private
        # a scene noted on a player's word stays theirs, at their trust
        node.update({key: note[key] for key in ("source_entity", "source_trust") if key in note})
        node["provenance"] = provenance.of(note)  # what it was made from: the note's inputs
        prepared.append(node)
    return prepared, failed


def _match_clusters(ports, matrix, embedder):
    """
    The cluster each embedded node joins, where one is similar enough.

    Returns:
        tuple: `(targets, unmatched)`: a cluster id or None per node, and the positions of the
        nodes that matched none.
    """
    cut = node_vectors.threshold(ports, "cluster_threshold", embedder_or_none(ports, embedder))
    vectors = Nodes(ports).vectors()
    targets, unmatched = [None] * len(matrix), []
    for position, vector in enumerate(matrix):
        cluster_id, score = node_vectors.best_cluster(vectors, vector)
        if cluster_id is not None and score >= cut:
            targets[position] = cluster_id
        else:
            unmatched.append(position)
    return targets, unmatched


def _file_nodes(ports, prepared, matrix, targets, root_of, report):
    """
    Store the new nodes in their clusters (a vanished cluster means the classified root), with
    their vectors and the clusters' new centroids, and queue them for the diary.

    Returns:
        set: The ids of the notes converted (now nodes).
    """
    stamp = now_iso(ports)
    nodes = Nodes(ports).nodes()
    clusters = Nodes(ports).clusters()
    vectors = Nodes(ports).vectors()
    vectors["dims"] = int(matrix.shape[1])
    converted, affected = set(), set()
    for position, node in enumerate(prepared):
        converted.add(node["id"])
        if node["id"] in nodes:  # converted before a reload lost the note's removal
            continue
        cluster_id = targets[position]
        if cluster_id not in clusters:
            cluster_id = nodes_model.ensure_root(
                clusters, root_of.get(position, "Business"), stamp
            )
            report["classified"] += 1
        else:
            report["matched"] += 1
        node.update(cluster_id=cluster_id, created_at=stamp)
        nodes[node["id"]] = node
        vectors["nodes"][node["id"]] = node_vectors.encode_vector(matrix[position])
        affected.add(cluster_id)
        report["converted"] += 1
    recompute_centroids(nodes, vectors, affected)
    Nodes(ports).save_graph(nodes, clusters, vectors)
    PatrolRecord(ports).queue_for_diary(converted)
    return converted


def _keep_unconverted(ports, notes, converted, failed):
    """Drop the converted notes from the queue; mark the unreadable ones `[PARSE_FAILED]`."""
    kept = []
    for note in notes:
        if note["id"] in converted:
            continue
        if note["id"] in failed and note.get("status") != PARSE_FAILED:
            note.update(status=PARSE_FAILED, error=failed[note["id"]])
        kept.append(note)
    if len(kept) != len(notes) or failed:
        Nodes(ports).replace_scene_notes(kept)


@defer.inlineCallbacks
def convert_scene_notes(ports, *, embedder=None, runner=None):
    """
    Parse the scene notes, turn the valid ones into fresh nodes (embedded in one batch) and
    file each in the best cluster at or above the cluster threshold, else in the root the LLM
    classifies it under. Unreadable notes stay, marked `[PARSE_FAILED]`, for repair.

    Returns:
        Deferred[dict]: Counts: converted, parse_failed, repaired, matched, classified.
    """
    repaired = yield repair_failed_notes(ports)
    prepared, failed = _parse_notes(ports, repaired)
    report = {"converted": 0, "parse_failed": len(failed), "repaired": len(repaired),
              "matched": 0, "classified": 0}
    if prepared:
        texts = [nodes_model.node_embed_text(node) for node in prepared]
        matrix = yield node_vectors.embed_texts(ports, texts, embedder=embedder, runner=runner)
        targets, unmatched = _match_clusters(ports, matrix, embedder)
        roots = yield classify_actions(ports, [prepared[position] for position in unmatched])
        root_of = dict(zip(unmatched, roots, strict=True))
    # -- every yield is done: read, change and write state
    notes = Nodes(ports).scene_notes()
    converted = set()
    if prepared:
        converted = _file_nodes(ports, prepared, matrix, targets, root_of, report)
    _keep_unconverted(ports, notes, converted, failed)
    return report
