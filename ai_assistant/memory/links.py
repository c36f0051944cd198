"""
A-MEM links between memories: the dreaming phase of sleep (seed 001 §4, seed 002 §4.1, §4.4).

`run_dreaming_tick` takes a few recent, important memories that have not been processed yet,
finds the memories most similar to each (cosine >= the calibrated `memory.link_similarity`)
and records bidirectional links in the state doc `memory_links`::

    {mem_id: {"linked_to": [{"id": other_id, "score": 0.85}], "journal_ids": [...],
              "processed_at": "2025-12-06T10:00:00Z"}}

`prune_orphaned_memory_links` removes records and links of memories that no longer exist.
"""

from twisted.internet import defer

from ai_assistant.memory.consolidation import (
    LINKS_DOC,
    calibrated_threshold,
    get_links,
    link_record,
)
from ai_assistant.plumbing.ports import iso

# How many memories one dreaming tick may look at when choosing what to process.
SCAN_LIMIT = 500


def _importance(memory):
    value = (memory.get("metadata") or {}).get("importance")
    return value if isinstance(value, int | float) else 0


def _add_link(record, other_id, score, max_links):
    """Add or refresh one link, keeping the strongest `max_links`."""
    linked = [link for link in record["linked_to"] if link.get("id") != other_id]
    linked.append({"id": other_id, "score": round(float(score), 4)})
    linked.sort(key=lambda link: link["score"], reverse=True)
    record["linked_to"] = linked[:max_links]


@defer.inlineCallbacks
def run_dreaming_tick(ports, batch_size=None):
    """
    Link up to `memory.link_batch` unprocessed memories to their similar memories.

    Memories qualify when their metadata importance is at least `memory.link_min_importance`;
    the most important (then most recent) go first.

    Args:
        ports (AssistantPorts): The assistant.
        batch_size (int, optional): Override of `memory.link_batch`.

    Returns:
        Deferred[dict]: `{"success", "processed": [mem ids], "links_created": n,
        "remaining": n, "error"?}`. Never errbacks.
    """
    result = {"success": True, "processed": [], "links_created": 0, "remaining": 0}
    store = ports.semantic
    if store is None:
        result["skipped"] = "semantic memory is off"
        return result
    settings = ports.settings
    batch_size = int(batch_size or settings.get("memory.link_batch"))
    min_importance = settings.get("memory.link_min_importance")
    max_links = int(settings.get("memory.link_max_per_memory"))
    threshold = calibrated_threshold(ports, "link_similarity")

    try:
        memories = yield store.list(limit=SCAN_LIMIT)
    except Exception as err:
        ports.log(f"{ports.name}: dreaming could not list memories: {err}")
        return {**result, "success": False, "error": str(err)}
    processed = {mem_id for mem_id, record in get_links(ports).items()
                 if record.get("processed_at")}
    candidates = [memory for memory in memories or ()
                  if memory["id"] not in processed and _importance(memory) >= min_importance]
    candidates.sort(key=lambda memory: (_importance(memory), memory.get("created_at") or ""),
                    reverse=True)
    batch = candidates[:batch_size]

    neighbours = {}
    for memory in batch:
        try:
            hits = yield store.search(memory["memory"], limit=max_links + 1)
        except Exception as err:
            ports.log(f"{ports.name}: dreaming search failed for {memory['id']}: {err}")
            result.update(success=False, error=str(err))
            break
        neighbours[memory["id"]] = [
            hit for hit in hits or ()
            if hit["id"] != memory["id"] and hit.get("score", 0.0) >= threshold
        ]

    # No yield from here on: links are written from fresh state in one step.
    links = get_links(ports)
    now = iso(ports.clock.now())
    for memory_id, hits in neighbours.items():
        record = link_record(links, memory_id)
        for hit in hits:
            _add_link(record, hit["id"], hit["score"], max_links)
            _add_link(link_record(links, hit["id"]), memory_id, hit["score"], max_links)
            result["links_created"] += 1
        record["processed_at"] = now
        result["processed"].append(memory_id)
    if neighbours:
        ports.state.set(LINKS_DOC, links)
    result["remaining"] = max(0, len(candidates) - len(result["processed"]))
    return result


@defer.inlineCallbacks
def prune_orphaned_memory_links(ports):
    """
    Remove link records of deleted memories and links that point at them.

    Returns:
        Deferred[dict]: `{"success", "removed_records": n, "removed_links": n}`. Never errbacks;
        on a store failure nothing is removed (a missing answer is not proof of deletion).
    """
    result = {"success": True, "removed_records": 0, "removed_links": 0}
    store = ports.semantic
    links = get_links(ports)
    if store is None or not links:
        return result
    referenced = set(links)
    for record in links.values():
        referenced.update(link.get("id") for link in record.get("linked_to") or ())
    referenced.discard(None)
    alive = set()
    try:
        # One listing when it can hold everything; it is complete if it came back short.
        limit = max(SCAN_LIMIT, 2 * len(referenced))
        memories = yield store.list(limit=limit)
        if len(memories) < limit:
            alive = {memory["id"] for memory in memories}
        else:
            for memory_id in sorted(referenced):
                found = yield store.get(memory_id)
                if found is not None:
                    alive.add(memory_id)
    except Exception as err:
        ports.log(f"{ports.name}: link pruning could not read the store: {err}")
        return {**result, "success": False, "error": str(err)}

    # No yield from here on. Only ids seen before the look-up can be judged: a memory linked
    # while we waited is new, not orphaned.
    orphaned = referenced - alive
    links = get_links(ports)
    for memory_id in [mem_id for mem_id in links if mem_id in orphaned]:
        del links[memory_id]
        result["removed_records"] += 1
    for record in links.values():
        kept = [link for link in record.get("linked_to") or ()
                if link.get("id") not in orphaned]
        result["removed_links"] += len(record.get("linked_to") or ()) - len(kept)
        record["linked_to"] = kept
    if result["removed_records"] or result["removed_links"]:
        ports.state.set(LINKS_DOC, links)
    return result
