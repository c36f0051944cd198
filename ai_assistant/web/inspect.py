"""
What the memory inspector reads about an assistant: plain, JSON-ready dicts, one per tier.

Every function here takes the assistant NPC and reads it through `npc.assistant.ports()`, the
same state documents and stores the assistant itself uses; the callers (`web.api`,
`web.views`) run them on the reactor thread (`web.reactor.on_reactor`), where that state
lives. The functions that read the semantic tier return Deferreds.
"""

from twisted.internet import defer

from ai_assistant.memory import entities
from ai_assistant.memory.corrections import audit_trail, is_wrong
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.memories import SCAN_LIMIT
from ai_assistant.memory.nodes import DEAD, DYING, Nodes, effective_importance
from ai_assistant.memory.search.journal_search import search_journal
from ai_assistant.memory.recall.long_term import UNKNOWN_TRUST
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import parse_iso
from ai_assistant.sleep.reports import recent_sleeps
from ai_assistant.workspace.status import inspector_status

# The most results one journal search returns (the pages of a search come from these).
SEARCH_LIMIT = 200
# Relationship moves that are direct interactions (`agent.perception` classifications).
INTERACTIONS = ("direct_message", "direct_addressing", "talk")


def assistant_summary(npc):
    """One line of the list: `{"id", "key", "mode", "phase", "location"}`."""
    mode = npc.assistant.mode
    asleep = mode.asleep()
    return {
        "id": npc.id,
        "key": npc.key,
        "mode": mode.current(),
        "phase": mode.phase() if asleep else None,
        "location": npc.location.key if npc.location else None,
    }


@defer.inlineCallbacks
def status(npc):
    """
    The status header (`workspace.status.inspector_status`) with who and where it is.

    Returns:
        Deferred[dict]
    """
    view = yield inspector_status(npc.assistant.ports())
    return {**assistant_summary(npc), "dbref": npc.dbref, **view}


# ----------------------------------------------------------------------------------------------
# Journal


def entry_view(entry, consolidated, score=None):
    """A journal entry as the inspector shows it."""
    view = {key: entry.get(key) for key in (
        "id", "timestamp", "content", "importance", "importance_method", "source_type",
        "source_trust", "source_entity", "tags", "related_projects")}
    view["consolidated"] = entry.get("id") in consolidated
    view["wrong"] = entry.get("wrong")
    view["corrected"] = entry.get("corrected")
    if score is not None:
        view["score"] = round(float(score), 4)
    return view


def journal_entries(npc, query=""):
    """
    The journal, newest first; with a query, the assistant's own journal search, best first.

    Returns:
        list[dict]: `entry_view`s (with `score` for a search).
    """
    ports = npc.assistant.ports()
    journal = npc.assistant.journal
    consolidated = set(journal.consolidated_ids())
    if query and query.strip():
        hits = search_journal(ports, query.strip(), limit=SEARCH_LIMIT)
        return [entry_view(entry, consolidated, score) for score, entry in hits]
    return [entry_view(entry, consolidated) for entry in reversed(journal.entries())]


def importance_points(npc):
    """Every entry as a point of the importance-over-time plot: `(time, importance, entry)`."""
    points = []
    for entry in npc.assistant.journal.entries():
        moment = parse_iso(entry.get("timestamp"))
        if moment is not None and entry.get("importance") is not None:
            points.append((moment, float(entry["importance"]), entry))
    return points


# ----------------------------------------------------------------------------------------------
# Long-term memories


def _memory_view(ports, hit, links, threshold, min_trust):
    metadata = dict(hit.get("metadata") or {})
    trust = metadata.get("source_trust")
    trust = float(trust) if isinstance(trust, int | float) else UNKNOWN_TRUST
    record = links.get(str(hit.get("id"))) or {}
    view = {
        "id": str(hit.get("id")),
        "memory": hit.get("memory", ""),
        "trust": trust,
        "source": {key: metadata.get(key) for key in ("source", "source_type",
                                                      "source_entity", "entry_id")},
        "tags": list(metadata.get("tags") or []),
        "created_at": hit.get("created_at"),
        "links": list(record.get("linked_to") or []),
        "journal_ids": list(record.get("journal_ids") or []),
        "wrong": is_wrong(hit),
        "metadata": metadata,
    }
    if hit.get("score") is not None:
        view["score"] = round(float(hit["score"]), 4)
        # whether the assistant's own recall would return it (`recall.long_term`'s two stages)
        view["recalled"] = bool(view["score"] > threshold and trust >= min_trust
                                and not view["wrong"])
    return view


@defer.inlineCallbacks
def long_term_memories(npc, query="", limit=SCAN_LIMIT):
    """
    The long-term memories with trust, source and links; with a query, scored as the
    assistant's recall scores them (`recalled` says whether its recall would return each).

    Returns:
        Deferred[dict]: `{"available": bool, "memories": [...], "threshold", "min_trust"}`.
    """
    ports = npc.assistant.ports()
    memories = npc.assistant.memories
    if not memories.available:
        return {"available": False, "memories": [], "threshold": None, "min_trust": None}
    if query and query.strip():
        hits = yield memories.search(query.strip(), limit=min(limit, 50))
    else:
        hits = yield memories.list(limit=limit)
    links = MemoryLinks(ports).records()  # read after the yield: the links as they are now
    threshold = memories.threshold("relevance_threshold")
    min_trust = float(ports.settings.get("memory.min_source_trust"))
    memories = [_memory_view(ports, hit, links, threshold, min_trust) for hit in hits or ()]
    if not query:
        memories.sort(key=lambda memory: memory.get("created_at") or "", reverse=True)
    return {"available": True, "memories": memories, "threshold": threshold,
            "min_trust": min_trust}


# ----------------------------------------------------------------------------------------------
# People, goals, projects


def _relationship_course(ports, profile):
    """Favorability after each direct interaction the profile still holds, replayed."""
    settings = ports.settings
    relationship = {"favorability": float(settings.get("entities.initial_favorability"))}
    course = []
    for observation in profile.get("observations") or ():
        if observation.get("source") not in INTERACTIONS:
            continue
        moment = parse_iso(observation.get("time"))
        if moment is None:
            continue
        entities.apply_interaction(relationship, observation.get("text"), moment, settings)
        course.append({"time": observation.get("time"),
                       "favorability": round(relationship["favorability"], 4),
                       "state": relationship["state"]})
    return course


def profiles(npc):
    """Entity profiles: attributes, observations, the relationship now and its recent course."""
    ports = npc.assistant.ports()
    people = People(ports)
    rows = []
    for entity_id, stored in people.profiles().items():
        profile = people.profile(entity_id)
        rows.append({
            **{key: profile.get(key) for key in (
                "entity_id", "name", "entity_type", "first_seen", "last_seen",
                "last_interaction", "last_consolidated", "observation_count")},
            "attributes": dict(profile.get("attributes") or {}),
            "observations": list(profile.get("observations") or [])[-20:],
            "relationship": profile.get("relationship"),
            "course": _relationship_course(ports, stored),
        })
    rows.sort(key=lambda row: row.get("last_seen") or "", reverse=True)
    return rows


def relationship_bands(npc):
    """`[(band, lowest favorability)]`, lowest band first (for the relationship charts)."""
    settings = npc.assistant.ports().settings
    return [("stranger", 0.0),
            ("acquaintance", float(settings.get("entities.acquaintance_threshold"))),
            ("friend", float(settings.get("entities.friend_threshold"))),
            ("ally", float(settings.get("entities.ally_threshold")))]


def goal_tree(npc):
    """The goals as a tree: root goals, each with its `children`, in creation order."""
    goals = npc.assistant.goals.all()
    nodes = {goal["id"]: {**goal, "children": []} for goal in goals}
    roots = []
    for goal in goals:
        parent = nodes.get(goal.get("parent_id"))
        (parent["children"] if parent and goal.get("parent_id") != goal["id"]
         else roots).append(nodes[goal["id"]])
    return roots


def projects(npc):
    """Project slots, the active one first (`workspace.projects.Projects.all`)."""
    return npc.assistant.projects.all()


# ----------------------------------------------------------------------------------------------
# Memory nodes, sleeps, corrections


def _node_state(node):
    status = node.get("status", "active")
    if status == "active" and "died_reactivation_count" in node:
        return "revived"
    return status


def memory_nodes(npc):
    """
    Nodes with their effective importance and state (active, dying, dead, revived), and the
    clusters with their member counts.

    Returns:
        dict: `{"nodes": [...], "clusters": [...], "dying_threshold", "decay_sessions"}`.
    """
    ports = npc.assistant.ports()
    decay = float(ports.settings.get("nodes.decay_sessions"))
    graph = Nodes(ports)
    nodes, clusters = graph.nodes(), graph.clusters()
    rows = []
    for node in nodes.values():
        scene = node.get("scene") or {}
        rows.append({
            **{key: node.get(key) for key in (
                "id", "status", "importance", "session_count", "reactivation_count",
                "cluster_id", "themes", "feeling", "created_at", "last_activated",
                "merged_into")},
            "action": scene.get("action", ""),
            "pinned": bool(node.get("pinned")),
            "state": _node_state(node),
            "effective_importance": round(effective_importance(node, decay), 4),
            "cluster": (clusters.get(node.get("cluster_id")) or {}).get("name"),
        })
    order = {DYING: 0, "revived": 1, "active": 2, DEAD: 3}
    rows.sort(key=lambda row: (order.get(row["state"], 4), -row["effective_importance"]))
    cluster_rows = [
        {**cluster, "members": sum(1 for node in nodes.values()
                                   if node.get("cluster_id") == cluster_id)}
        for cluster_id, cluster in clusters.items()
    ]
    return {"nodes": rows, "clusters": cluster_rows,
            "dying_threshold": float(ports.settings.get("nodes.dying_threshold")),
            "decay_sessions": decay}


def sleeps(npc):
    """The reports of the recent sleeps, newest first (`sleep.reports`)."""
    return recent_sleeps(npc.assistant.ports(), npc.assistant.mode.asleep())


def corrections(npc):
    """The audit trail of corrections, newest first."""
    return list(reversed(audit_trail(npc.assistant.ports())))
