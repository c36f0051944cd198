"""
A-MEM link generation: the dreaming phase of sleep links related semantic memories.

`run_dreaming_tick` takes a few recent, important memories that have not been processed yet,
finds the memories most similar to each (cosine >= the calibrated `memory.link_similarity`)
and records bidirectional links in the links store (`ai_assistant.memory.longterm.links`).
It reads the memories through their owner (`longterm.memories.Memories`).
"""

from twisted.internet import defer

from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.memories import SCAN_LIMIT, Memories
from ai_assistant.plumbing.ports import parse_iso


def _importance(memory):
    value = (memory.get("metadata") or {}).get("importance")
    return value if isinstance(value, int | float) else 0


def _before(memory, horizon):
    """True when the memory was made before `horizon` (both are wall-clock times)."""
    made = parse_iso(memory.get("created_at"))
    return bool(horizon and made and made < horizon)


def _candidates(ports, memories, min_importance):
    """
    Unprocessed memories important enough, the most important (then most recent) first; none
    older than the links document's horizon (their records were dropped to bound it).
    """
    links = MemoryLinks(ports)
    processed = links.processed_ids()
    horizon = parse_iso(links.horizon())
    candidates = [memory for memory in memories or ()
                  if memory["id"] not in processed and _importance(memory) >= min_importance
                  and not _before(memory, horizon)]
    candidates.sort(key=lambda memory: (_importance(memory), memory.get("created_at") or ""),
                    reverse=True)
    return candidates


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
    store = Memories(ports)
    if not store.available:
        result["skipped"] = "semantic memory is off"
        return result
    settings = ports.settings
    batch_size = int(batch_size or settings.get("memory.link_batch"))
    min_importance = settings.get("memory.link_min_importance")
    max_links = int(settings.get("memory.link_max_per_memory"))
    threshold = store.threshold("link_similarity")

    try:
        # every memory, not the store's first SCAN_LIMIT: new ones may sort anywhere in it
        memories = yield store.list_all(max(SCAN_LIMIT, 2 * len(MemoryLinks(ports).records())))
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

    # No yield from here on: the links are written from fresh state.
    result["links_created"] += MemoryLinks(ports).connect(neighbours, max_links)
    result["processed"] += list(neighbours)
    result["remaining"] = max(0, len(candidates) - len(result["processed"]))
    return result


def run_link_cleanup(ports):
    """
    The dreaming step after linking: drop the links of deleted memories and keep the links
    document within its bound (`MemoryLinks.prune_orphaned`).

    Returns:
        Deferred[dict]: The pruning's report. Never errbacks.
    """
    return MemoryLinks(ports).prune_orphaned()
