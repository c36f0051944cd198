"""
What the memory inspector reads about an assistant: plain, JSON-ready dicts, one per tier.

Every function here takes the assistant NPC and reads it through `npc.assistant.ports()`, the
same state documents and stores the assistant itself uses; the callers (`web.api`,
`web.views`) run them on the reactor thread (`web.reactor.on_reactor`), where that state
lives. The functions that read the semantic tier return Deferreds.
"""

from urllib.parse import quote

from twisted.internet import defer

from ai_assistant.memory import attribute_sources, entities, provenance
from ai_assistant.memory.audience import PUBLIC, audience_of
from ai_assistant.memory.corrections import audit_trail, is_wrong
from ai_assistant.memory.entities import People
from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.supersede import is_superseded
from ai_assistant.memory.nodes import DEAD, DYING, Nodes, effective_importance
from ai_assistant.memory.patrol_record import PatrolRecord
from ai_assistant.memory.patrol_record import provenance_of as patrol_provenance
from ai_assistant.memory.recall.long_term import UNKNOWN_TRUST
from ai_assistant.memory.search.journal_search import search_journal, split_matches
from ai_assistant.plumbing.ports import parse_iso
from ai_assistant.sleep.reports import recent_sleeps
from ai_assistant.workspace.session_memory import MEMORY_TYPES
from ai_assistant.workspace.status import inspector_status

# The most results one journal search returns (the pages of a search come from these).
SEARCH_LIMIT = 200
# The first listing's size when reading every long-term memory for the page and its counts:
# one listing holds them all in practice (`Memories.list_all` grows it if not).
MEMORY_SCAN_LIMIT = 100_000
# How importance was set, in words (`journal.importance_method`).
IMPORTANCE_METHODS = {"l": "scored by the LLM", "h": "heuristic", "m": "set by hand"}
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
def status(npc, long_term=None):
    """
    The status header (`workspace.status.inspector_status`) with who and where it is.

    Args:
        long_term (int, optional): The number of long-term memories, when the caller has
            already read them all (else they are counted here).

    Returns:
        Deferred[dict]
    """
    view = yield inspector_status(npc.assistant.ports(), long_term)
    return {**assistant_summary(npc), "dbref": npc.dbref, **view}


# ----------------------------------------------------------------------------------------------
# Provenance


def _source_link(kind, record_id):
    """Where on the page the record a `derived_from` reference names is (None if nowhere)."""
    if kind == "journal":
        return f"#entry-{record_id}"
    if kind == "memory":
        return f"?memory={quote(str(record_id))}#memories"
    if kind in ("node", "note"):
        return f"#node-{record_id}"
    if kind == "fact":
        return f"#fact-{record_id}"
    if kind == "observation":
        entity_id = str(record_id).rsplit(":", 1)[0]  # the page's rows: person-<alnum id>
        return "#person-" + "".join(ch for ch in entity_id if ch.isalnum())
    return None


def provenance_view(record):
    """
    Where a record came from, as the inspector and the API show it (`memory.provenance`):
    speaker (name and stable id), channel (and what it means), trust, and `derived_from`,
    each reference with the link to its row on the page.
    """
    view = provenance.summary(provenance.of(record))
    for item in view["derived_from"]:
        item["href"] = _source_link(item["kind"], item["id"])
    return view


# ----------------------------------------------------------------------------------------------
# Journal


def entry_view(entry, consolidated, score=None):
    """A journal entry as the inspector shows it."""
    view = {key: entry.get(key) for key in (
        "id", "timestamp", "content", "importance", "importance_method", "source_type",
        "source_trust", "source_entity", "tags", "related_projects")}
    view["row"] = f"entry-{entry.get('id')}"
    view["importance_how"] = IMPORTANCE_METHODS.get(
        str(entry.get("importance_method") or "")[:1], entry.get("importance_method") or "")
    view["audience"] = audience_of(entry)
    view["private"] = view["audience"] is not PUBLIC
    view["consolidated"] = entry.get("id") in consolidated
    view["wrong"] = entry.get("wrong")
    view["corrected"] = entry.get("corrected")
    view["provenance"] = provenance_view(entry)
    if score is not None:
        view["score"] = round(float(score), 4)
    return view


def journal_hits(npc, query="", day="", related=False):
    """
    The journal, newest first; with a query, the entries of the assistant's own journal search
    that match it, best first (`split_matches`).

    Args:
        day (str, optional): `YYYY-MM-DD`: only the entries of that day (UTC).
        related (bool): With a query, the search's other results instead: entries it ranks
            near the matches that share no word, speaker or time with the query.

    Returns:
        list[tuple]: `(entry, score or None)` each (views of a page: `entry_views`).
    """
    ports = npc.assistant.ports()
    journal = npc.assistant.journal
    if query and query.strip():
        hits = search_journal(ports, query.strip(), limit=SEARCH_LIMIT)
        matches, others = split_matches(ports, query.strip(), hits)
        found = [(entry, score) for score, entry in (others if related else matches)]
    elif related:
        return []
    else:
        found = [(entry, None) for entry in reversed(journal.entries())]
    if day:
        found = [(entry, score) for entry, score in found if _day_of(entry) == day]
    return found


def entry_views(npc, hits):
    """`entry_view`s of `journal_hits` rows."""
    consolidated = set(npc.assistant.journal.consolidated_ids())
    return [entry_view(entry, consolidated, score) for entry, score in hits]


def derived_by_entry(npc, views):
    """Give each entry view `derived`: the long-term memories made from it (`memory_links`)."""
    wanted = {view["id"] for view in views}
    made = {}
    for mem_id, record in MemoryLinks(npc.assistant.ports()).records().items():
        for entry_id in record.get("journal_ids") or ():
            if entry_id in wanted:
                made.setdefault(entry_id, []).append(mem_id)
    for view in views:
        view["derived"] = made.get(view["id"], [])
    return views


def journal_entries(npc, query="", day="", related=False):
    """Every `journal_hits` row as an `entry_view` (the API pages them)."""
    return entry_views(npc, journal_hits(npc, query, day, related))


def _day_of(entry):
    moment = parse_iso(entry.get("timestamp"))
    return moment.date().isoformat() if moment is not None else ""


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
    audience = audience_of(hit)
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
        "audience": audience,
        "private": audience is not PUBLIC,
        "superseded": is_superseded(hit),
        "superseded_by": metadata.get("superseded_by"),
        "disputed": bool(metadata.get("disputed")),
        "provenance": provenance_view(metadata),
        "metadata": metadata,
    }
    if hit.get("score") is not None:
        view["score"] = round(float(hit["score"]), 4)
        # whether the assistant's own recall would return it (`recall.long_term`'s two stages)
        view["recalled"] = bool(view["score"] > threshold and trust >= min_trust
                                and not view["wrong"])
    return view


def _memory_summary(hit):
    """What the filters read of a memory (cheap: the page builds full views for one page)."""
    metadata = hit.get("metadata") or {}
    audience = audience_of(hit)
    return {"id": str(hit.get("id")), "created_at": hit.get("created_at"),
            "source": {"source_type": metadata.get("source_type"),
                       "source_entity": metadata.get("source_entity")},
            "audience": audience, "private": audience is not PUBLIC, "wrong": is_wrong(hit),
            "superseded": is_superseded(hit)}


@defer.inlineCallbacks
def long_term_memories(npc, query="", filters=None, offset=0, size=None):
    """
    The long-term memories with trust, source and links, newest first; with a query, scored
    as the assistant's recall scores them (`recalled` says whether its recall would return
    each), best first. Every memory is read, so the counts are true; views are built for the
    page asked for only.

    Args:
        filters (web.listing.MemoryFilters, optional): Only the memories that pass.
        offset (int): The first of the matching memories to show.
        size (int, optional): How many to show (None: all).

    Returns:
        Deferred[dict]: `{"available": bool, "total": every memory, "count": those matching,
        "with_links": memories with a link, "memories": [a page of views], "threshold",
        "min_trust"}`; each link names the memory it leads to (`memory`).
    """
    ports = npc.assistant.ports()
    memories = npc.assistant.memories
    if not memories.available:
        return {"available": False, "memories": [], "threshold": None, "min_trust": None,
                "total": 0, "count": 0, "with_links": 0}
    if query and query.strip():
        hits = yield memories.search(query.strip(), limit=SEARCH_LIMIT)
    else:
        hits = yield memories.list_all(MEMORY_SCAN_LIMIT)
    hits = list(hits or ())
    total = len(hits)
    words = {str(hit.get("id")): hit.get("memory", "") for hit in hits}
    links = MemoryLinks(ports).records()  # read after the yield: the links as they are now
    if not query:
        hits.sort(key=lambda hit: hit.get("created_at") or "", reverse=True)
    if filters is not None and filters.active():
        hits = [hit for hit in hits if filters.matches(_memory_summary(hit))]
    threshold = memories.threshold("relevance_threshold")
    min_trust = float(ports.settings.get("memory.min_source_trust"))
    shown = hits[offset:] if size is None else hits[offset:offset + size]
    views = [_memory_view(ports, hit, links, threshold, min_trust) for hit in shown]
    for view in views:  # each link with the words of the memory it leads to
        view["links"] = [{**link, "memory": words.get(str(link.get("id")), "")}
                         for link in view["links"]]
    return {"available": True, "total": total, "count": len(hits),
            "with_links": sum(1 for record in links.values() if record.get("linked_to")),
            "memories": views, "threshold": threshold, "min_trust": min_trust}


# mem0's history events, in words (`Mem0Store.histories`); an UPDATE that kept the text changed
# only the metadata (a mark: wrong, superseded, disputed)
MEM0_EVENTS = {"ADD": "added", "UPDATE": "text changed", "DELETE": "deleted"}


def _mem0_event(change, made):
    event = MEM0_EVENTS.get(change.get("event"), str(change.get("event") or "").lower())
    if change.get("event") == "UPDATE" and change.get("before") == change.get("after"):
        event = "marked"
    detail = {"added": f"{made}: {change.get('after')}",
              "text changed": f"{change.get('before')} -> {change.get('after')}",
              "marked": "metadata changed, text kept",
              "deleted": f"was: {change.get('before')}"}.get(event, "")
    return {"time": change.get("time"), "event": event, "detail": detail, "by": "mem0",
            "before": change.get("before"), "after": change.get("after")}


def _in_time_order(events):
    """Oldest first; an event without a readable time keeps its place after those before it."""
    latest, keyed = None, []
    for number, event in enumerate(events):
        moment = parse_iso(event.get("time"))
        latest = moment if moment is not None else latest
        keyed.append(((moment or latest or parse_iso("0001-01-01T00:00:00Z")), number, event))
    return [event for _, _, event in sorted(keyed, key=lambda item: item[:2])]


def memory_history(npc, view, changes=None):
    """
    What happened to one long-term memory, oldest first, as mem0 keeps a history per memory:
    mem0's own record of it (added, text changed, marked, deleted: `changes`, with the text
    before and after) merged with what only the assistant knows (from which journal entries
    it was made, what superseded it, and each correction of the audit trail that touched it,
    with its before and after).

    Args:
        view (dict): The memory's view (`long_term_memories`).
        changes (list[dict], optional): mem0's history of it (`Memories.histories`); without
            it (a store that keeps none) the memory's making stands in for mem0's ADD.

    Returns:
        list[dict]: `{"time", "event", "detail", "by", "before", "after"}` each.
    """
    metadata = view.get("metadata") or {}
    made = "consolidated from journal " + ", ".join(
        f"#{entry_id}" for entry_id in view.get("journal_ids") or ()) if view.get(
        "journal_ids") else "added"
    events = [_mem0_event(change, made) for change in changes or ()]
    if not any(event["event"] == "added" for event in events):
        events.insert(0, {"time": view.get("created_at") or metadata.get("timestamp"),
                          "event": "added", "detail": made, "by": "assistant",
                          "before": None, "after": view.get("memory")})
    if metadata.get("superseded_by"):
        events.append({"time": metadata.get("superseded_at"), "event": "superseded",
                       "detail": f"by {metadata['superseded_by']}", "by": "assistant",
                       "before": None, "after": None})
    for record in audit_trail(npc.assistant.ports()):
        target = str(record.get("target", "")).removeprefix("memory:")
        if target == view["id"] or view["id"] in (record.get("derived") or ()) or view[
                "id"] == (record.get("after") or {}).get("memory"):
            # on mem0's (the wall) clock where the record has it, the game's time beside it
            events.append({"time": record.get("recorded_at") or record.get("time"),
                           "game_time": record.get("time"), "event": record.get("action"),
                           "detail": f"#{record.get('id')}: {record.get('detail')}",
                           "by": record.get("by"), "before": record.get("before"),
                           "after": record.get("after")})
    return _in_time_order(events)


@defer.inlineCallbacks
def with_histories(npc, views):
    """
    Give each memory view its `history` (`memory_history`), mem0's part read for all of them
    in one call off the reactor. A store that cannot say leaves the assistant's part alone.

    Returns:
        Deferred[list[dict]]: `views`.
    """
    memories = npc.assistant.memories
    try:
        changes = (yield memories.histories([view["id"] for view in views])) if views else {}
    except Exception as err:  # noqa: BLE001 - the rest of the history still shows
        changes = {}
        for view in views:
            view["history_error"] = f"mem0's history could not be read: {err}"
    for view in views:
        view["history"] = memory_history(npc, view, changes.get(view["id"]))
    return views


# ----------------------------------------------------------------------------------------------
# People, goals, projects


def _relationship_course(ports, profile):
    """
    Favorability after each direct interaction: the profile's `relationship_history` (kept
    across sleeps), or for a profile older than it, replayed from the observations it holds.
    """
    if profile.get("relationship_history"):
        return [dict(point) for point in profile["relationship_history"]]
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
            # each attribute with where it came from, and the claims not kept (testimony)
            "attribute_rows": [
                {"name": key, "value": value,
                 "provenance": provenance_view(
                     {"provenance": attribute_sources.attribute_provenance(stored, key)})}
                for key, value in (profile.get("attributes") or {}).items()],
            "attribute_claims": [
                {"name": key, "value": claim.get("value"), "outcome": claim.get("outcome"),
                 "provenance": provenance_view({"provenance": claim.get("provenance")})}
                for key, claims in (stored.get(attribute_sources.ATTRIBUTE_CLAIMS) or {}).items()
                for claim in claims],
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


def session_memory(npc):
    """
    The session memory's facts, patterns and completed tasks, each with where it came from
    (`workspace.session_memory.SessionMemory.entries`: who set it, how it was heard, its
    trust, what a merged one was derived from, the tick it was set in), and the think notes
    and the diary the last patrol wrote, with theirs.

    Returns:
        dict: `{"entries": [...], "last_compacted", "think_notes", "diary"}`.
    """
    session = npc.assistant.session
    rows = [{"memory_type": memory_type, "text": item["text"], "id": item["id"],
             "row": f"fact-{item['id']}", "turn": item.get("turn"),
             "set_at": item.get("set_at") or item.get("timestamp"),
             "provenance": provenance_view({provenance.KEY: item["provenance"]})}
            for memory_type in MEMORY_TYPES for item in session.entries(memory_type)]
    record = PatrolRecord(npc.assistant.ports())
    think = record.think_notes()
    return {
        "entries": rows,
        "last_compacted": session.document().get("last_compacted"),
        "think_notes": {"text": think.get("text"), "updated_at": think.get("updated_at"),
                        "provenance": provenance_view({
                            provenance.KEY: patrol_provenance(think)})} if think else None,
        "diary": [{"date": date, "text": entry.get("text"), "updated_at": entry.get("updated_at"),
                   "provenance": provenance_view({provenance.KEY: patrol_provenance(entry)})}
                  for date, entry in sorted(record.diary().items(), reverse=True)],
    }


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
            # a dead node is no longer recalled: nothing of its importance is in effect
            "effective_importance": (0.0 if node.get("status") == DEAD
                                     else round(effective_importance(node, decay), 4)),
            "decayed_importance": round(effective_importance(node, decay), 4),
            "audience": audience_of(node) or audience_of(scene),
            "private": (audience_of(node) or audience_of(scene)) is not PUBLIC,
            "cluster": (clusters.get(node.get("cluster_id")) or {}).get("name"),
            "wrong": node.get("wrong"),
            "provenance": provenance_view(node),
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
