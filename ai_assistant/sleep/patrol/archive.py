"""
Patrol step: keep the node graph within its bound.

Every scene filed becomes a node (with its vector in "node_vectors"), and decay only marks old
nodes dead: without a rule the graph grows by a node a scene, for ever. Past `nodes.max_nodes`
nodes this step drops, in order, the dead nodes (the oldest first), then the dying ones, then
the active ones with the lowest effective importance; a pinned node is never dropped. Their
vectors go with them and their clusters' centroids are recomputed; a sub-cluster left empty is
removed by the next step (`merge_small_clusters`).

Old nodes cost less: the vector of a node created more than `nodes.vectors_full_days` days ago
is kept as int8 (`node_vectors.compact_vector`, a quarter of the size), so after the first
month "node_vectors" grows by a quarter of what it did.
"""

from datetime import timedelta

from ai_assistant.memory import node_vectors
from ai_assistant.memory.nodes import (
    DEAD,
    DYING,
    Nodes,
    effective_importance,
    recompute_centroids,
    setting,
)
from ai_assistant.plumbing.ports import parse_iso

# Which nodes go first: dead, then dying, then active.
_STATUS_ORDER = {DEAD: 0, DYING: 1}


def compact_old_vectors(ports, nodes, vectors):
    """
    Keep the vectors of nodes created more than `nodes.vectors_full_days` days ago as int8.

    Returns:
        int: How many vectors were compacted now (`vectors` is changed in place).
    """
    horizon = ports.clock.now() - timedelta(days=setting(ports, "vectors_full_days"))
    compacted = 0
    for node_id, encoded in vectors["nodes"].items():
        if encoded.startswith(node_vectors.COMPACT_PREFIX):
            continue
        made = parse_iso((nodes.get(node_id) or {}).get("created_at"))
        if made is not None and made < horizon:
            vectors["nodes"][node_id] = node_vectors.compact_vector(encoded)
            compacted += 1
    return compacted


def bound_node_graph(ports):
    """
    Drop the least useful unpinned nodes past `nodes.max_nodes`; compact old nodes' vectors.

    Returns:
        dict: `{"dropped": n, "kept": n}` (and the dropped ids when any; `"compacted": n`
        when vectors were compacted).
    """
    nodes = Nodes(ports).nodes()
    excess = len(nodes) - int(setting(ports, "max_nodes"))
    if excess <= 0:
        vectors = Nodes(ports).vectors()
        compacted = compact_old_vectors(ports, nodes, vectors)
        if compacted:
            Nodes(ports).save_graph(vectors=vectors)
            return {"dropped": 0, "kept": len(nodes), "compacted": compacted}
        return {"dropped": 0, "kept": len(nodes)}
    decay = float(setting(ports, "decay_sessions"))
    candidates = sorted(
        (node for node in nodes.values() if not node.get("pinned")),
        key=lambda node: (_STATUS_ORDER.get(node.get("status"), 2),
                          effective_importance(node, decay), node.get("created_at") or ""),
    )
    dropped = [node["id"] for node in candidates[:excess]]
    clusters = {nodes[node_id].get("cluster_id") for node_id in dropped}
    for node_id in dropped:
        del nodes[node_id]
    vectors = Nodes(ports).vectors()
    for node_id in dropped:
        vectors["nodes"].pop(node_id, None)
    recompute_centroids(nodes, vectors, clusters - {None})
    compacted = compact_old_vectors(ports, nodes, vectors)
    Nodes(ports).save_graph(nodes, vectors=vectors)
    report = {"dropped": len(dropped), "kept": len(nodes), "ids": dropped}
    return {**report, "compacted": compacted} if compacted else report
