"""
Corrections staff make to what an assistant remembers, and their audit trail.

The memory inspector on the game's website (`ai_assistant.web`) calls these; they are store
logic, so they live here and run without Evennia. Each correction changes one store through its
own rules, then is recorded twice: in the `documents.CORRECTIONS_AUDIT` trail (the last
`inspector.audit_kept`) with the values before and after (`memory.correction_undo` puts them
back), and as a journal entry tagged `correction`, so the assistant itself knows its memory was
corrected and by whom. That note is bookkeeping, not a memory: it has the lowest importance
(`NOTE_IMPORTANCE`, below `memory.min_importance`, so it is never consolidated) and a staff-only
audience, and it is never ranked by the journal search or recall (`not_recalled`), so it neither
outranks the entry it corrected nor reaches a player's prompt; staff see it in the journal and
the inspector. An edited entry carries its own short marker (`corrected`: by whom, when), which
the journal tools show the assistant as "corrected by an admin".

- pin or unpin a memory node (a pinned node never starts dying: `sleep.patrol.decay`);
- edit or delete a journal entry, or mark it wrong: the long-term memories made from it (its
  `journal_ids` in `memory_links`, its `entry_id` in their metadata) are marked wrong with it,
  and an edited entry's corrected text becomes a long-term memory in their place;
- edit or delete a long-term (semantic) memory;
- correct, add or remove an attribute of an entity profile;
- mark a journal entry or a long-term memory as wrong: it stays visible to staff but is never
  recalled again (`is_wrong`, applied by the journal search and by semantic recall).

Journal entries are replaced, never changed in place: the search index caches a journal
version by the identity of its entry objects (`memory.search.index.get_index`).

Functions on the semantic tier return Deferreds (its port runs off the reactor); the others
return at once. Every function raises (or errbacks with) `CorrectionError` on bad input, with a
message meant for the staff member who asked.
"""

from datetime import UTC, datetime

from twisted.internet import defer

from ai_assistant.memory import provenance
from ai_assistant.memory.attribute_sources import ATTRIBUTE_PROVENANCE, attributes_derived_from
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal, JournalError
from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.sources import ADMIN_SOURCE, ADMIN_TRUST
from ai_assistant.memory.nodes import Nodes
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso

CORRECTION_TAG = "correction"
# The audience of a correction note: no player's id, so recall never puts it in a prompt built
# for a player (`memory.audience.visible_to`); it is in the assistant's own journal all the same.
STAFF_AUDIENCE = "staff"
# A correction note's importance: the lowest, so it never outranks what it corrects.
NOTE_IMPORTANCE = 1
MAX_ATTRIBUTE_NAME_CHARS = 64
MAX_ATTRIBUTE_VALUE_CHARS = 500
MAX_REASON_CHARS = 300
# The most memories looked up as made from one journal entry (far more than one entry yields).
DERIVED_SCAN = 200


class CorrectionError(ValueError):
    """A correction that cannot be made: unknown target or bad input. The message says why."""


def is_wrong(item):
    """
    Whether staff marked this journal entry or semantic hit as wrong (so it is not recalled).

    Args:
        item (dict): A journal entry, or a semantic memory with its `metadata`.
    """
    if not isinstance(item, dict):
        return False
    return bool(item.get("wrong") or (item.get("metadata") or {}).get("wrong"))


def is_correction_note(item):
    """Whether this journal entry (or a memory made from one) is a correction note."""
    if not isinstance(item, dict):
        return False
    tags = item.get("tags") or (item.get("metadata") or {}).get("tags") or ()
    return CORRECTION_TAG in tags


def not_recalled(item):
    """Whether search and recall leave this item out: marked wrong, or a correction note."""
    return is_wrong(item) or is_correction_note(item)


def audit_trail(ports):
    """The corrections made so far, oldest first (`documents.CORRECTIONS_AUDIT`)."""
    trail = ports.state.get(documents.CORRECTIONS_AUDIT, None)
    return list(trail) if isinstance(trail, list) else []


def correction_provenance(by):
    """The provenance of what staff wrote in a correction: an admin's correction."""
    return provenance.build(provenance.CHANNEL_CORRECTION, speaker=str(by or "staff")[:80])


def _record(ports, by, action, target, detail, *, before=None, after=None, derived=None,
            derived_records=None):
    """
    Append a correction to the audit trail and the journal; returns the audit record.

    `before` and `after` are the values the correction changed (what `correction_undo` puts
    back); `derived` the long-term memories it changed with a journal entry, and
    `derived_records` the memory nodes and profile attributes (`{"nodes": {id: status
    before}, "attributes": [{entity_id, attribute, value, provenance}]}`).
    """
    who = str(by or "staff")[:80]
    entry = Journal(ports).add(
        f"{who} corrected my memory: {detail}", tags=[CORRECTION_TAG],
        source_type="direct", source_entity=who, count_for_reflection=False,
        importance=NOTE_IMPORTANCE, audience=STAFF_AUDIENCE,
        provenance=correction_provenance(who),
    )
    trail = audit_trail(ports)
    record = {
        "id": (trail[-1]["id"] + 1) if trail else 1,
        "time": iso(ports.clock.now()),
        # the wall clock too: mem0 dates a memory's history by it, while the game's clock may
        # run faster (Evennia's TIME_FACTOR), and a memory's history orders both together
        "recorded_at": datetime.now(UTC).isoformat(),
        "by": who,
        "action": action,
        "target": str(target),
        "detail": detail,
        "journal_entry_id": entry["id"],
        "before": before,
        "after": after,
        "derived": list(derived or ()),
    }
    if derived_records and (derived_records.get("nodes") or derived_records.get("attributes")):
        record["derived_nodes"] = dict(derived_records.get("nodes") or {})
        record["derived_attributes"] = list(derived_records.get("attributes") or ())
    trail.append(record)
    kept = max(1, int(ports.settings.get("inspector.audit_kept")))
    ports.state.set(documents.CORRECTIONS_AUDIT, trail[-kept:])
    return record


def mark_undone(ports, record_id, undo_id):
    """Note on correction `record_id` that correction `undo_id` undid it."""
    trail = audit_trail(ports)
    for record in trail:
        if record.get("id") == record_id:
            record["undone_by"] = undo_id
    ports.state.set(documents.CORRECTIONS_AUDIT, trail)


def store_pin(ports, node_id, pinned):
    """Pin or unpin a node, unrecorded (`correction_undo` records the undo); the node."""
    try:
        return Nodes(ports).pin(node_id, pinned)
    except KeyError:
        raise CorrectionError(f"There is no memory node {node_id!r}.") from None


def store_attribute(ports, entity_id, attribute, value, source=None):
    """Set (or, for None, remove) a profile attribute, unrecorded (`correction_undo`), with
    its provenance `source` (None: none recorded)."""
    try:
        People(ports).set_attribute(entity_id, attribute, value, provenance=source)
    except KeyError:
        raise CorrectionError(f"There is no profile of {entity_id!r}.") from None


def _clean_reason(reason):
    return " ".join(str(reason or "").split())[:MAX_REASON_CHARS]


def _clean_text(ports, text, what):
    text = str(text or "").strip()
    if not text:
        raise CorrectionError(f"{what} cannot be empty.")
    limit = int(ports.settings.get("journal.max_content_chars"))
    if len(text) > limit:
        raise CorrectionError(f"{what} is {len(text)} characters long; at most {limit}.")
    return text


# ----------------------------------------------------------------------------------------------
# Memory nodes


def set_node_pinned(ports, node_id, pinned, *, by):
    """
    Pin (or unpin) a memory node: a pinned node is never flagged as dying.

    Returns:
        dict: The audit record.
    """
    was = bool((Nodes(ports).stored().get(str(node_id)) or {}).get("pinned"))
    node = store_pin(ports, node_id, pinned)
    verb = "pinned" if pinned else "unpinned"
    title = str((node.get("scene") or {}).get("action") or node_id)[:80]
    return _record(ports, by, "pin_node" if pinned else "unpin_node", node_id,
                   f"{verb} memory node {node_id} ({title}).",
                   before={"pinned": was}, after={"pinned": bool(pinned)})


# ----------------------------------------------------------------------------------------------
# Journal entries


def _entry_id(entry_id):
    try:
        return int(entry_id)
    except (TypeError, ValueError):
        raise CorrectionError(f"A journal entry id is a number, not {entry_id!r}.") from None


def _existing_entry(ports, entry_id):
    """The journal entry `entry_id` (a copy), or `CorrectionError`."""
    wanted = _entry_id(entry_id)
    entry = Journal(ports).entry(wanted)
    if entry is None:
        raise CorrectionError(f"There is no journal entry #{wanted}.")
    return dict(entry)


def _replace_entry(ports, entry_id, change):
    """Replace an entry by a changed copy (`change(copy)`); returns the new entry."""
    wanted = _entry_id(entry_id)
    try:
        return Journal(ports).replace(wanted, change)
    except JournalError:
        raise CorrectionError(f"There is no journal entry #{wanted}.") from None


@defer.inlineCallbacks
def derived_memories(ports, entry_id):
    """
    The long-term memories made from journal entry `entry_id`: those whose link record names
    it (`journal_ids`, written by sleep) and those whose metadata does (`entry_id`).

    Returns:
        Deferred[list[dict]]: The memories (`{"id", "memory", "metadata"}`), none if the
        assistant has no long-term memory.
    """
    memories = Memories(ports)
    if not memories.available:
        return []
    wanted = {str(mem_id) for mem_id in MemoryLinks(ports).memory_ids_for_entry(entry_id)}
    listed = yield memories.list(limit=DERIVED_SCAN, filters={"entry_id": entry_id})
    found = {str(hit.get("id")): hit for hit in listed or ()
             if (hit.get("metadata") or {}).get("entry_id") == entry_id}
    for mem_id in wanted - set(found):
        hit = yield memories.get(mem_id)
        if hit:
            found[mem_id] = hit
    return sorted(found.values(), key=lambda hit: str(hit.get("id")))


@defer.inlineCallbacks
def _mark_derived_wrong(ports, entry_id, reason, by):
    """Mark every memory made from the entry wrong (recall skips them); their ids."""
    marked = []
    for memory in (yield derived_memories(ports, entry_id)):
        if is_wrong(memory):
            continue
        # through the owner: recall skips it at once (its mirror is written through)
        yield Memories(ports).update(str(memory["id"]), memory.get("memory") or "",
                                     metadata=_wrong_mark(ports, reason, by))
        marked.append(str(memory["id"]))
    return marked


def _correct_derived_records(ports, entry_id, reason, by):
    """
    Put to rest what was made from journal entry `entry_id` besides long-term memories (its
    `derived_from` names the entry, `memory.provenance`): its memory nodes are marked wrong
    (never recalled or revived while the mark stays), its profile attributes withdrawn.

    Returns:
        dict: `{"nodes": {node id: status before}, "attributes": [{entity_id, attribute,
        value, provenance}]}`: what `correction_undo` puts back.
    """
    reference = provenance.ref("journal", entry_id)
    nodes = Nodes(ports)
    marked = nodes.mark_wrong(nodes.derived_from(reference), _wrong_mark(ports, reason, by))
    withdrawn = []
    people = People(ports)
    for entity_id, attribute, value, source in attributes_derived_from(people.profiles(),
                                                                       reference):
        people.set_attribute(entity_id, attribute, "")
        withdrawn.append({"entity_id": entity_id, "attribute": attribute, "value": value,
                          "provenance": source})
    return {"nodes": marked, "attributes": withdrawn}


def _derived_detail(records):
    """What a correction of an entry did to its nodes and attributes, in words."""
    parts = []
    if records.get("nodes"):
        parts.append(f"{len(records['nodes'])} memory node(s) made from it put to rest")
    if records.get("attributes"):
        names = ", ".join(item["attribute"] for item in records["attributes"])
        parts.append(f"profile attribute(s) made from it withdrawn ({names})")
    return (" " + "; ".join(parts) + ".") if parts else ""


def _wrong_mark(ports, reason, by):
    return {"wrong": True, "wrong_reason": reason, "wrong_by": str(by),
            "wrong_at": iso(ports.clock.now())}


@defer.inlineCallbacks
def edit_journal_entry(ports, entry_id, content, *, by):
    """
    Replace the text of a journal entry, and what was made of it: its long-term memories are
    marked wrong and one memory of the corrected text takes their place.

    Returns:
        Deferred[dict]: The audit record (`derived`: the memories marked wrong).
    """
    content = _clean_text(ports, content, "The new text")
    stamp = {"by": str(by), "time": iso(ports.clock.now())}
    old = _existing_entry(ports, entry_id)
    entry = _replace_entry(ports, entry_id,
                           lambda entry: entry.update(content=content, corrected=stamp))
    derived = yield _mark_derived_wrong(
        ports, entry["id"], f"journal entry #{entry['id']} was corrected", by)
    records = _correct_derived_records(
        ports, entry["id"], f"journal entry #{entry['id']} was corrected", by)
    replacement = None
    if derived:
        metadata = {key: value for key, value in (old.items()) if key in (
            "source_type", "source_trust", "source_entity", "importance", "timestamp",
            "audience")}
        metadata.update(source="journal", entry_id=entry["id"], corrected_by=str(by),
                        corrected_at=stamp["time"], replaces=derived)
        # the corrected text is the admin's word, made from the entry it corrects
        source = correction_provenance(by)
        source["derived_from"] = [provenance.ref("journal", entry["id"])]
        metadata = provenance.with_provenance(metadata, source)
        added = yield Memories(ports).add(content, metadata=metadata)
        replacement = next((str(hit.get("id")) for hit in added or () if hit.get("id")), None)
    return _record(ports, by, "edit_journal", entry["id"],
                   f"rewrote journal entry #{entry['id']} as: {content[:200]}"
                   + (f" ({len(derived)} long-term memories made from it replaced)"
                      if derived else "") + _derived_detail(records),
                   before={"content": old.get("content"), "corrected": old.get("corrected")},
                   after={"content": content, "memory": replacement}, derived=derived,
                   derived_records=records)


@defer.inlineCallbacks
def delete_journal_entry(ports, entry_id, *, by):
    """
    Remove a journal entry; the long-term memories made from it are marked wrong.

    Returns:
        Deferred[dict]: The audit record (`before`: the entry, to put back).
    """
    wanted = _entry_id(entry_id)
    journal = Journal(ports)
    was_consolidated = wanted in journal.consolidated_ids()
    try:
        removed = journal.remove(wanted)
    except JournalError:
        raise CorrectionError(f"There is no journal entry #{wanted}.") from None
    derived = yield _mark_derived_wrong(
        ports, removed["id"], f"journal entry #{removed['id']} was deleted", by)
    records = _correct_derived_records(
        ports, removed["id"], f"journal entry #{removed['id']} was deleted", by)
    return _record(ports, by, "delete_journal", removed["id"],
                   f"deleted journal entry #{removed['id']}."
                   + (f" {len(derived)} long-term memories made from it marked wrong."
                      if derived else "") + _derived_detail(records),
                   before={"entry": removed, "consolidated": was_consolidated},
                   derived=derived, derived_records=records)


@defer.inlineCallbacks
def mark_journal_entry_wrong(ports, entry_id, reason="", *, by):
    """
    Mark a journal entry as wrong (searches never return it again), and the long-term
    memories made from it. Deferred[audit record].
    """
    reason = _clean_reason(reason)
    mark = {"by": str(by), "time": iso(ports.clock.now()), "reason": reason}
    entry = _replace_entry(ports, entry_id, lambda entry: entry.update(wrong=mark))
    derived = yield _mark_derived_wrong(ports, entry["id"], reason or
                                        f"journal entry #{entry['id']} is wrong", by)
    records = _correct_derived_records(
        ports, entry["id"], reason or f"journal entry #{entry['id']} is wrong", by)
    why = f" ({reason})" if reason else ""
    return _record(ports, by, "mark_wrong", f"journal:{entry['id']}",
                   f"marked journal entry #{entry['id']} as wrong{why}; I will not recall it"
                   + (f", nor the {len(derived)} long-term memories made from it."
                      if derived else ".") + _derived_detail(records),
                   before={"wrong": None}, after={"wrong": mark}, derived=derived,
                   derived_records=records)


# ----------------------------------------------------------------------------------------------
# Entity profiles


def correct_entity_attribute(ports, entity_id, attribute, value, *, by):
    """
    Set an attribute of an entity profile (an empty `value` removes it).

    Returns:
        dict: The audit record.
    """
    attribute = " ".join(str(attribute or "").split())
    if not attribute or len(attribute) > MAX_ATTRIBUTE_NAME_CHARS:
        raise CorrectionError(
            f"An attribute needs a name of 1 to {MAX_ATTRIBUTE_NAME_CHARS} characters.")
    value = " ".join(str(value or "").split())
    if len(value) > MAX_ATTRIBUTE_VALUE_CHARS:
        raise CorrectionError(f"An attribute value is at most {MAX_ATTRIBUTE_VALUE_CHARS} "
                              "characters.")
    people = People(ports)
    profile = people.profiles().get(entity_id)
    if profile is None:
        raise CorrectionError(f"There is no profile of {entity_id!r}.")
    before = {"value": (profile.get("attributes") or {}).get(attribute),
              "provenance": (profile.get(ATTRIBUTE_PROVENANCE) or {}).get(attribute)}
    if value:
        detail = f"set {profile.get('name')}'s {attribute} to: {value}"
    elif attribute in (profile.get("attributes") or {}):
        detail = f"removed {profile.get('name')}'s {attribute}."
    else:
        raise CorrectionError(f"{profile.get('name')} has no attribute {attribute!r} to remove.")
    source = correction_provenance(by) if value else None
    people.set_attribute(entity_id, attribute, value, provenance=source)
    return _record(ports, by, "correct_attribute", f"{entity_id}:{attribute}", detail,
                   before=before, after={"value": value or None, "provenance": source})


# ----------------------------------------------------------------------------------------------
# Long-term (semantic) memories


def _require_store(ports):
    memories = Memories(ports)
    if not memories.available:
        raise CorrectionError("This assistant has no long-term memory.")
    return memories


@defer.inlineCallbacks
def _existing_memory(store, memory_id):
    memory = yield store.get(str(memory_id))
    if not memory:
        raise CorrectionError(f"There is no long-term memory {memory_id!r}.")
    return memory


@defer.inlineCallbacks
def edit_memory(ports, memory_id, text, *, by):
    """Rewrite a long-term memory (re-embedded; its id and links stay). Deferred[audit record]."""
    text = _clean_text(ports, text, "The new text")
    store = _require_store(ports)
    old = yield _existing_memory(store, memory_id)
    # The text is now the admin's statement (recall states it as fact, and only an admin's
    # claim may replace it: `longterm.sources`); whose word it was before stays on record.
    before = old.get("metadata") or {}
    # recall reads the corrected text at once (the owner writes through to its mirror)
    yield store.update(str(memory_id), text, metadata={
        "corrected_by": str(by), "corrected_at": iso(ports.clock.now()),
        "source_type": ADMIN_SOURCE, "source_trust": ADMIN_TRUST, "source_entity": str(by),
        "provenance": correction_provenance(by),
        "former_source": {key: before.get(key) for key in
                          ("source_type", "source_trust", "source_entity")}})
    return _record(ports, by, "edit_memory", memory_id,
                   f"rewrote long-term memory {memory_id} as: {text[:200]}",
                   before={"memory": old.get("memory"),
                           "metadata": {key: before.get(key) for key in (
                               "source_type", "source_trust", "source_entity", "provenance")}},
                   after={"memory": text})


@defer.inlineCallbacks
def delete_memory(ports, memory_id, *, by):
    """Delete a long-term memory (its links go at the next sleep's pruning). Deferred[record]."""
    store = _require_store(ports)
    memory = yield _existing_memory(store, memory_id)
    yield store.delete(str(memory_id))
    return _record(ports, by, "delete_memory", memory_id,
                   f"deleted long-term memory {memory_id} ({str(memory.get('memory'))[:80]}).",
                   before={"memory": memory.get("memory"),
                           "metadata": dict(memory.get("metadata") or {})})


@defer.inlineCallbacks
def mark_memory_wrong(ports, memory_id, reason="", *, by):
    """Mark a long-term memory as wrong: recall skips it from now on. Deferred[audit record]."""
    reason = _clean_reason(reason)
    store = _require_store(ports)
    memory = yield _existing_memory(store, memory_id)
    mark = _wrong_mark(ports, reason, by)
    yield store.update(str(memory_id), memory.get("memory") or "", metadata=mark)  # unrecalled now
    why = f" ({reason})" if reason else ""
    return _record(ports, by, "mark_wrong", f"memory:{memory_id}",
                   f"marked long-term memory {memory_id} as wrong{why}; I will not recall it.",
                   before={"wrong": bool(is_wrong(memory))}, after={"wrong": True})
