"""
The links store: what connects journal entries and semantic memories, and memories to each other.

`documents.MEMORY_LINKS` maps a semantic memory's id to its record::

    {mem_id: {"linked_to": [{"id": other_id, "score": 0.85}], "journal_ids": [...],
              "processed_at": "2025-12-06T10:00:00Z"}}

- `journal_ids`: the journal entries the memory was consolidated from (written by sleep
  consolidation, `ai_assistant.sleep.consolidation`);
- `linked_to` and `processed_at`: the A-MEM links of the dreaming phase
  (`ai_assistant.sleep.linking`), bidirectional, strongest first.

`prune_orphaned_memory_links` (a dreaming-phase step) removes records and links of memories that
no longer exist in the semantic store, then keeps the document within its bound
(`bound_memory_links`): at most `memory.links_max_records` records. Past it, the records
processed longest ago are dropped (their memories stay in the store and stay linked from the
records that point at them); records not yet processed are never dropped, so dreaming still
links every new memory. Dreaming does not take a dropped memory up again: it skips memories
older than the oldest processed record kept (`linking_horizon`).

Old records cost less (`age_memory_links`, the same step): a record processed more than
`memory.links_full_days` days ago keeps only its `memory.links_old_kept` strongest links, and
forgets the journal entries the journal no longer holds, so after the first month the document
grows by a fraction of what a new record costs.
"""

from datetime import timedelta

from twisted.internet import defer

from ai_assistant.memory.journal import get_journal
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import parse_iso

# The first listing's size when scanning the store (`list_all_memories` grows it until the
# listing is complete; pruning lists at least this many).
SCAN_LIMIT = 500


@defer.inlineCallbacks
def list_all_memories(store, at_least=SCAN_LIMIT):
    """
    Every memory of `store`: a listing of `at_least`, then larger ones (doubled) until one comes
    back short, i.e. complete.

    A store lists in its own order (local qdrant: by point id, a random UUID), not newest
    first, so a listing cut at a fixed size would hide an arbitrary part of a large store,
    new memories included.

    Returns:
        Deferred[list[dict]]: The memories, as `store.list` gives them. Errbacks on a store
        failure.
    """
    limit = max(1, int(at_least))
    while True:
        memories = yield store.list(limit=limit)
        if len(memories) < limit:
            return memories
        limit *= 2


def get_links(ports):
    """
    The `documents.MEMORY_LINKS` document: `{mem_id: {"linked_to": [{"id", "score"}],
    "journal_ids": [entry ids], "processed_at": iso or None}}`.
    """
    links = ports.state.get(documents.MEMORY_LINKS, {})
    return links if isinstance(links, dict) else {}


def save_links(ports, links):
    """Write the links document back."""
    ports.state.set(documents.MEMORY_LINKS, links)


def link_record(links, memory_id):
    """The record of `memory_id` in `links`, created empty if missing."""
    record = links.setdefault(memory_id, {})
    record.setdefault("linked_to", [])
    record.setdefault("journal_ids", [])
    record.setdefault("processed_at", None)
    return record


def link_entry_to_memories(links, entry_id, memory_ids):
    """Record, in `links`, that the memories `memory_ids` came from journal entry `entry_id`."""
    for memory_id in memory_ids:
        record = link_record(links, memory_id)
        if entry_id not in record["journal_ids"]:
            record["journal_ids"].append(entry_id)


def memory_ids_for_entry(ports, entry_id):
    """
    Returns:
        list: Ids of the memories consolidated from journal entry `entry_id`.
    """
    return [mem_id for mem_id, record in get_links(ports).items()
            if entry_id in (record.get("journal_ids") or ())]


def linking_horizon(ports, links=None):
    """
    The time before which dreaming skips memories: the oldest `processed_at` kept once the
    document is full (its older records were dropped), else None.
    """
    links = get_links(ports) if links is None else links
    if len(links) < int(ports.settings.get("memory.links_max_records")):
        return None
    processed = [record.get("processed_at") for record in links.values()
                 if record.get("processed_at")]
    return min(processed) if processed else None


def bound_memory_links(ports, links):
    """
    Drop the records processed longest ago until at most `memory.links_max_records` remain.

    Args:
        ports (AssistantPorts): The assistant.
        links (dict): The links document (changed in place).

    Returns:
        int: How many records were dropped.
    """
    excess = len(links) - int(ports.settings.get("memory.links_max_records"))
    if excess <= 0:
        return 0
    processed = sorted((record.get("processed_at"), memory_id)
                       for memory_id, record in links.items() if record.get("processed_at"))
    dropped = [memory_id for _, memory_id in processed[:excess]]
    for memory_id in dropped:
        del links[memory_id]
    return len(dropped)


def age_memory_links(ports, links):
    """
    Make old records compact: processed more than `memory.links_full_days` days ago, a record
    keeps its `memory.links_old_kept` strongest links, and only the journal ids of entries
    the journal still holds.

    Args:
        ports (AssistantPorts): The assistant.
        links (dict): The links document (changed in place).

    Returns:
        int: How many records were made smaller.
    """
    horizon = ports.clock.now() - timedelta(days=ports.settings.get("memory.links_full_days"))
    kept = int(ports.settings.get("memory.links_old_kept"))
    in_journal = None
    shrunk = 0
    for record in links.values():
        processed = parse_iso(record.get("processed_at"))
        if processed is None or processed >= horizon:
            continue
        if in_journal is None:  # read once, and only when some record is old
            in_journal = {entry.get("id") for entry in get_journal(ports)["entries"]}
        linked = record.get("linked_to") or []
        journal_ids = record.get("journal_ids") or []
        still = [entry_id for entry_id in journal_ids if entry_id in in_journal]
        if len(linked) > kept or len(still) < len(journal_ids):
            # `linked_to` is kept strongest first (sleep.linking)
            record["linked_to"] = linked[:kept]
            record["journal_ids"] = still
            shrunk += 1
    return shrunk


@defer.inlineCallbacks
def _alive_memory_ids(store, referenced):
    """The ids among `referenced` that the store still holds (errbacks on a store failure)."""
    # One listing when it can hold everything; it is complete if it came back short.
    limit = max(SCAN_LIMIT, 2 * len(referenced))
    memories = yield store.list(limit=limit)
    if len(memories) < limit:
        return {memory["id"] for memory in memories}
    alive = set()
    for memory_id in sorted(referenced):
        found = yield store.get(memory_id)
        if found is not None:
            alive.add(memory_id)
    return alive


@defer.inlineCallbacks
def prune_orphaned_memory_links(ports):
    """
    Remove link records of deleted memories and links that point at them, then keep the
    document within `memory.links_max_records` (`bound_memory_links`).

    Returns:
        Deferred[dict]: `{"success", "removed_records": n, "removed_links": n}`, with
        `"dropped_old": n` when the bound dropped records and `"aged": n` when old records
        were made compact (`age_memory_links`). Never errbacks; on a store failure
        nothing orphaned is removed (a missing answer is not proof of deletion).
    """
    result = {"success": True, "removed_records": 0, "removed_links": 0}
    store = ports.semantic
    links = get_links(ports)
    dropped = bound_memory_links(ports, links)
    aged = age_memory_links(ports, links)
    if dropped:
        result["dropped_old"] = dropped
    if aged:
        result["aged"] = aged
    if dropped or aged:
        save_links(ports, links)
    if store is None or not links:
        return result
    referenced = set(links)
    for record in links.values():
        referenced.update(link.get("id") for link in record.get("linked_to") or ())
    referenced.discard(None)
    try:
        alive = yield _alive_memory_ids(store, referenced)
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
        save_links(ports, links)
    return result
