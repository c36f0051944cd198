"""
The links store: what connects journal entries and long-term memories, and memories to each other.

`MemoryLinks` owns the document; consolidation and dreaming write it through its verbs.
`documents.MEMORY_LINKS` maps a semantic memory's id to its record::

    {mem_id: {"linked_to": [{"id": other_id, "score": 0.85}], "journal_ids": [...],
              "processed_at": "2025-12-06T10:00:00Z"}}

- `journal_ids`: the journal entries the memory was consolidated from (`link_entry`, by sleep
  consolidation, `ai_assistant.sleep.consolidation`);
- `merged_journal_ids` (only where there are some): the entries among them whose claim was
  found already stored in this memory (the store kept it instead of a duplicate), so this
  record is the only place that says their words live on here;
- `linked_to` and `processed_at`: the A-MEM links of the dreaming phase (`connect`, by
  `ai_assistant.sleep.linking`), bidirectional, strongest first.

`prune_orphaned` (a dreaming-phase step) removes records and links of memories that
no longer exist in the semantic store, then keeps the document within its bound
(`bound_memory_links`): at most `memory.links_max_records` records. Past it, the records
processed longest ago are dropped (their memories stay in the store and stay linked from the
records that point at them); records not yet processed are never dropped, so dreaming still
links every new memory. Dreaming does not take a dropped memory up again: it skips memories
older than the oldest processed record kept (`linking_horizon`).

Old records cost less (`age_memory_links`, the same step): a record processed more than
`memory.links_full_days` days ago keeps only its `memory.links_old_kept` strongest links, and
forgets the journal entries the journal no longer holds, so after the first month the document
grows by a fraction of what a new record costs. A merged entry is not forgotten: the memory's
own metadata (`entry_id`) names the entry it was made from, but nothing else names the entries
merged into it, and without them what those entries said could no longer be traced to any
memory.
"""

from datetime import timedelta

from twisted.internet import defer

from ai_assistant.memory.journal import get_journal
from ai_assistant.memory.longterm.memories import SCAN_LIMIT, Memories
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso, parse_iso


class MemoryLinks:
    """
    One assistant's memory links (`documents.MEMORY_LINKS`), read fresh on every call.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self._ports = ports

    def records(self):
        """
        The document: `{mem_id: {"linked_to": [{"id", "score"}], "journal_ids": [entry ids],
        "processed_at": iso or None}}`.
        """
        links = self._ports.state.get(documents.MEMORY_LINKS, {})
        return links if isinstance(links, dict) else {}

    def _save(self, links):
        self._ports.state.set(documents.MEMORY_LINKS, links)

    def memory_ids_for_entry(self, entry_id):
        """The ids of the memories consolidated from journal entry `entry_id`."""
        return [mem_id for mem_id, record in self.records().items()
                if entry_id in (record.get("journal_ids") or ())]

    def link_entry(self, entry_id, memory_ids, merged=()):
        """
        Record that the memories `memory_ids` came from journal entry `entry_id`; `merged`
        are those among them the store kept instead of storing the entry's claim again.
        """
        links = self.records()
        link_entry_to_memories(links, entry_id, memory_ids, merged)
        self._save(links)

    def processed_ids(self):
        """The memories dreaming has linked already."""
        return {mem_id for mem_id, record in self.records().items()
                if record.get("processed_at")}

    def horizon(self):
        """
        The time before which dreaming skips memories: the oldest `processed_at` kept once the
        document is full (its older records were dropped), else None.
        """
        return linking_horizon(self._ports, self.records())

    def connect(self, neighbours, max_links):
        """
        Link each memory to its neighbours, both ways (each keeps its strongest `max_links`),
        and mark it processed. No yield inside: fresh state, one write.

        Args:
            neighbours (dict): `{memory id: [{"id", "score"}]}` (the similar memories).
            max_links (int): Links kept per memory.

        Returns:
            int: How many links were made.
        """
        if not neighbours:
            return 0
        links = self.records()
        now = iso(self._ports.clock.now())
        made = 0
        for memory_id, hits in neighbours.items():
            record = link_record(links, memory_id)
            for hit in hits:
                add_link(record, hit["id"], hit["score"], max_links)
                add_link(link_record(links, hit["id"]), memory_id, hit["score"], max_links)
                made += 1
            record["processed_at"] = now
        self._save(links)
        return made

    @defer.inlineCallbacks
    def prune_orphaned(self):
        """
        Remove link records of deleted memories and links that point at them, then keep the
        document within `memory.links_max_records` (`bound_memory_links`).

        Returns:
            Deferred[dict]: `{"success", "removed_records": n, "removed_links": n}`, with
            `"dropped_old": n` when the bound dropped records and `"aged": n` when old records
            were made compact (`age_memory_links`). Never errbacks; on a store failure
            nothing orphaned is removed (a missing answer is not proof of deletion).
        """
        ports = self._ports
        result = {"success": True, "removed_records": 0, "removed_links": 0}
        store = Memories(ports)
        links = self.records()
        dropped = bound_memory_links(ports, links)
        aged = age_memory_links(ports, links)
        if dropped:
            result["dropped_old"] = dropped
        if aged:
            result["aged"] = aged
        if dropped or aged:
            self._save(links)
        if not store.available or not links:
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
        links = self.records()
        for memory_id in [mem_id for mem_id in links if mem_id in orphaned]:
            del links[memory_id]
            result["removed_records"] += 1
        for record in links.values():
            kept = [link for link in record.get("linked_to") or ()
                    if link.get("id") not in orphaned]
            result["removed_links"] += len(record.get("linked_to") or ()) - len(kept)
            record["linked_to"] = kept
        if result["removed_records"] or result["removed_links"]:
            self._save(links)
        return result


def add_link(record, other_id, score, max_links):
    """Add or refresh one link of a record, keeping its strongest `max_links`."""
    linked = [link for link in record["linked_to"] if link.get("id") != other_id]
    linked.append({"id": other_id, "score": round(float(score), 4)})
    linked.sort(key=lambda link: link["score"], reverse=True)
    record["linked_to"] = linked[:max_links]


def link_record(links, memory_id):
    """The record of `memory_id` in `links`, created empty if missing."""
    record = links.setdefault(memory_id, {})
    record.setdefault("linked_to", [])
    record.setdefault("journal_ids", [])
    record.setdefault("processed_at", None)
    return record


def link_entry_to_memories(links, entry_id, memory_ids, merged=()):
    """
    Record, in `links`, that the memories `memory_ids` came from journal entry `entry_id`, and
    that it was merged into those of them in `merged` (see the module doc).
    """
    merged = set(merged)
    for memory_id in memory_ids:
        record = link_record(links, memory_id)
        if entry_id not in record["journal_ids"]:
            record["journal_ids"].append(entry_id)
        if memory_id in merged:
            kept = record.setdefault("merged_journal_ids", [])
            if entry_id not in kept:
                kept.append(entry_id)


def linking_horizon(ports, links):
    """The oldest `processed_at` kept once `links` is full, else None (`MemoryLinks.horizon`)."""
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
    the journal still holds or that were merged into it (`merged_journal_ids`).

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
        merged = set(record.get("merged_journal_ids") or ())
        still = [entry_id for entry_id in journal_ids
                 if entry_id in in_journal or entry_id in merged]  # fmt: skip
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
