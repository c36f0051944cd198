"""
The memory patrol and the memory graph as text for admins (`@assistant/patrol`,
`@assistant/nodes`).
"""

from ai_assistant.memory.nodes import ACTIVE, DEAD, DYING, PARSE_FAILED, Nodes, cluster_members
from ai_assistant.plumbing import documents

# The report's steps in patrol order, with their titles.
STEP_TITLES = (
    ("notes", "scene notes -> nodes"),
    ("session_counts", "session counts"),
    ("dying", "dying"),
    ("consolidation", "consolidation"),
    ("revival", "revival"),
    ("split", "split"),
    ("bound", "bound (nodes.max_nodes)"),
    ("small_clusters", "small clusters"),
    ("diary", "diary and think notes"),
)


def format_patrol_report(report):
    """
    A patrol report as text for `@assistant/patrol`.

    Args:
        report (dict): What `run_patrol` or `run_patrol_if_due` returned.

    Returns:
        str: A few readable lines.
    """
    if not report:
        return "No patrol report."
    if report.get("skipped"):
        return f"Patrol skipped: {report['skipped']}."
    steps = report.get("steps") or {}
    mode = "mechanical (no LLM)" if report.get("mechanical") else "with LLM"
    lines = [f"Patrol at {report.get('started_at', '?')} ({mode}):"]
    for key, title in STEP_TITLES:
        outcome = steps.get(key)
        if outcome is None:
            continue
        if isinstance(outcome, dict):
            text = ", ".join(
                f"{k} {v}" if not isinstance(v, list) else f"{k} {len(v)}"
                for k, v in outcome.items() if k != "ids"
            )
        else:
            text = str(outcome)
        lines.append(f"  {title}: {text or 'nothing to do'}")
    return "\n".join(lines)


def format_nodes_overview(ports):
    """
    The memory graph at a glance for admins: clusters with their node counts, pending notes,
    the last patrol.

    Returns:
        str: Readable lines.
    """
    graph = Nodes(ports)
    nodes, clusters, notes = graph.stored(), graph.clusters(), graph.scene_notes()
    scene = [n for n in notes if n.get("type", "scene") == "scene"]
    failed = sum(1 for n in scene if n.get("status") == PARSE_FAILED)
    counts = {status: 0 for status in (ACTIVE, DYING, DEAD)}
    for node in nodes.values():
        counts[node.get("status", ACTIVE)] = counts.get(node.get("status", ACTIVE), 0) + 1
    lines = [
        f"Memory nodes: {len(nodes)} ({counts[ACTIVE]} active, {counts[DYING]} dying, "
        f"{counts[DEAD]} dead), {len(clusters)} clusters.",
        f"Scene notes waiting: {len(scene) - failed} pending, {failed} {PARSE_FAILED}.",
    ]
    roots = sorted((c for c in clusters.values() if c.get("is_parent")),
                   key=lambda c: c.get("name", ""))
    for root in roots:
        lines.append(_cluster_line(root, nodes, "  "))
        subs = sorted((c for c in clusters.values()
                       if c.get("parent_id") == root["id"] and not c.get("is_parent")),
                      key=lambda c: c.get("name", ""))
        lines += [_cluster_line(sub, nodes, "    ") for sub in subs]
    last = (ports.state.get(documents.PATROL_STATE, None) or {}).get("last_run_at")
    lines.append(f"Last patrol: {last or 'never'}.")
    return "\n".join(lines)


def _cluster_line(cluster, nodes, indent):
    members = cluster_members(nodes, cluster["id"])
    active = sum(1 for n in members if n.get("status") == ACTIVE)
    return (f"{indent}{cluster.get('name')} [{cluster['id'][:8]}]: {active} active / "
            f"{len(members)} nodes")
