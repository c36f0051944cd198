"""
A-MEM link generation: the dreaming phase of sleep links related semantic memories.

`run_dreaming_tick` takes a few recent, important memories that have not been processed yet,
finds the memories most similar to each (cosine >= the calibrated `memory.link_similarity`)
and records bidirectional links in the links store (`ai_assistant.memory.links`).
"""

from twisted.internet import defer

from ai_assistant.memory.links import (
    SCAN_LIMIT,
    get_links,
    link_record,
    linking_horizon,
    list_all_memories,
    save_links,
)
from ai_assistant.memory.semantic_recall import calibrated_threshold
from ai_assistant.plumbing.ports import iso, parse_iso


def _importance(memory):
    value = (memory.get("metadata") or {}).get("importance")
    return value if isinstance(value, int | float) else 0


def _add_link(record, other_id, score, max_links):
    """Add or refresh one link, keeping the strongest `max_links`."""
    linked = [link for link in record["linked_to"] if link.get("id") != other_id]
    linked.append({"id": other_id, "score": round(float(score), 4)})
    linked.sort(key=lambda link: link["score"], reverse=True)
    record["linked_to"] = linked[:max_links]


def _before(memory, horizon):
    """True when the memory was made before `horizon` (both are wall-clock times)."""
    made = parse_iso(memory.get("created_at"))
    return bool(horizon and made and made < horizon)


def _candidates(ports, memories, min_importance):
    """
    Unprocessed memories important enough, the most important (then most recent) first; none
    older than the links document's horizon (their records were dropped to bound it).
    """
    links = get_links(ports)
    processed = {mem_id for mem_id, record in links.items() if record.get("processed_at")}
    horizon = parse_iso(linking_horizon(ports, links))
    candidates = [memory for memory in memories or ()
                  if memory["id"] not in processed and _importance(memory) >= min_importance
                  and not _before(memory, horizon)]
    candidates.sort(key=lambda memory: (_importance(memory), memory.get("created_at") or ""),
                    reverse=True)
    return candidates


def _write_links(ports, neighbours, max_links, result):
    """Record the links found, from fresh state in one step (no yield inside)."""
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
        save_links(ports, links)


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
        # every memory, not the store's first SCAN_LIMIT: new ones may sort anywhere in it
        memories = yield list_all_memories(
            store, max(SCAN_LIMIT, 2 * len(get_links(ports))))
    except Exception as err:
        ports.log(f"{ports.name}: dreaming could not list memories: {err}")
        return {**result, "success": False, "error": str(err)}
    candidates = _candidates(ports, memories, min_importance)

    neighbours = {}
    for memory in candidates[:batch_size]:
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

    _write_links(ports, neighbours, max_links, result)
    result["remaining"] = max(0, len(candidates) - len(result["processed"]))
    return result
