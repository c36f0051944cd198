"""
Patrol steps of decay: session counts, dying and revival.

Every patrol counts one more session for each active node; an active, unpinned node whose
effective importance (`memory.nodes.effective_importance`) falls to the dying threshold starts
dying, and recalls (reactivations) can lift it back.

The specification's revival rule would revive an absorbed node at once (it dies with its
importance intact), so a dead node is revived only when its reactivation count grew since it
died ("eff_imp rose above" the threshold); a dying node whenever its eff_imp is above it again
(in mechanical mode nothing else would ever finish dying).
"""

from ai_assistant.memory.nodes import (
    ACTIVE,
    DEAD,
    DYING,
    Nodes,
    effective_importance,
    recompute_centroids,
    setting,
)


def increment_session_counts(ports):
    """One more patrol cycle for every active node. Returns how many were counted."""
    graph = Nodes(ports)
    nodes = graph.nodes()
    count = 0
    for node in nodes.values():
        if node.get("status") == ACTIVE:
            node["session_count"] = int(node.get("session_count", 0)) + 1
            count += 1
    if count:
        graph.save_graph(nodes)
    return {"incremented": count}


def flag_dying_nodes(ports):
    """Active, unpinned nodes whose eff_imp is at or below the threshold start dying."""
    cut = float(setting(ports, "dying_threshold"))
    decay = float(setting(ports, "decay_sessions"))
    nodes = Nodes(ports).nodes()
    dying = [
        node for node in nodes.values()
        if node.get("status") == ACTIVE and not node.get("pinned")
        and effective_importance(node, decay) <= cut
    ]
    if not dying:
        return {"dying": 0}
    for node in dying:
        node["status"] = DYING
    vectors = Nodes(ports).vectors()
    recompute_centroids(nodes, vectors, {node.get("cluster_id") for node in dying})
    Nodes(ports).save_graph(nodes, vectors=vectors)
    return {"dying": len(dying), "ids": [node["id"] for node in dying]}


def revive_nodes(ports):
    """
    Dead nodes whose eff_imp rose above the threshold (their reactivation count grew since
    they died) and dying nodes whose eff_imp is above it again become active.
    """
    cut = float(setting(ports, "dying_threshold"))
    decay = float(setting(ports, "decay_sessions"))
    nodes = Nodes(ports).nodes()
    revived = []
    for node in nodes.values():
        status = node.get("status")
        if status not in (DEAD, DYING) or effective_importance(node, decay) <= cut:
            continue
        if node.get("wrong"):
            continue  # staff corrected what it was made from: it stays at rest
        if status == DEAD and int(node.get("reactivation_count", 0)) <= int(
            node.get("died_reactivation_count", 0)
        ):
            continue
        node["status"] = ACTIVE
        node.pop("merged_into", None)
        revived.append(node)
    if not revived:
        return {"revived": 0}
    vectors = Nodes(ports).vectors()
    recompute_centroids(nodes, vectors, {node.get("cluster_id") for node in revived})
    Nodes(ports).save_graph(nodes, vectors=vectors)
    return {"revived": len(revived), "ids": [node["id"] for node in revived]}


def kill(node):
    """Mark a node dead, remembering its reactivation count so that only new recalls revive it."""
    node["status"] = DEAD
    node["fresh"] = False
    node["died_reactivation_count"] = int(node.get("reactivation_count", 0))
