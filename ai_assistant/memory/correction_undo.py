"""
Undoing a correction: the values a correction kept (`before` in its audit record,
`memory.corrections`) are put back, and the undo is itself a correction in the trail.

A correction is undone once: its record gets `undone_by` (the undo's record id), and a second
undo of it is refused. What undoing each does:

- pin / unpin a node: the pin as it was;
- edit a journal entry: its old text; the long-term memories made from it are no longer marked
  wrong, the memory of the corrected text is deleted;
- delete a journal entry: the entry back in its place (by id), its memories no longer wrong;
- mark a journal entry or memory wrong: the mark lifted (and from the entry's memories);
- correct an attribute: its old value (or none), with its provenance;
- what a correction of a journal entry put to rest besides its memories (the memory nodes and
  profile attributes made from it, by their `derived_from`): the nodes back as they were, the
  attributes back with their provenance;
- edit a long-term memory: its old text; delete one: added again (under a new id).
"""

from twisted.internet import defer

from ai_assistant.memory import provenance
from ai_assistant.memory.corrections import (
    CorrectionError,
    _record,
    _replace_entry,
    audit_trail,
    mark_undone,
    store_attribute,
    store_pin,
)
from ai_assistant.memory.journal import Journal, JournalError
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.nodes import Nodes

UNDO = "undo"


def _find(ports, record_id):
    try:
        wanted = int(record_id)
    except (TypeError, ValueError):
        raise CorrectionError(f"A correction id is a number, not {record_id!r}.") from None
    for record in audit_trail(ports):
        if record.get("id") == wanted:
            if record.get("action") == UNDO:
                raise CorrectionError(f"Correction #{wanted} is an undo: correct it anew.")
            if record.get("undone_by"):
                raise CorrectionError(f"Correction #{wanted} was already undone "
                                      f"(#{record['undone_by']}).")
            if record.get("before") is None:
                raise CorrectionError(f"Correction #{wanted} kept no value to put back.")
            return record
    raise CorrectionError(f"There is no correction #{wanted} (or it is too old to undo).")


@defer.inlineCallbacks
def _lift_wrong(ports, memory_ids):
    memories = Memories(ports)  # written through to the recall mirror: recalled again at once
    for memory_id in memory_ids or ():
        memory = yield memories.get(str(memory_id))
        if memory:
            yield memories.update(str(memory_id), memory.get("memory") or "",
                                  metadata={"wrong": False, "wrong_reason": "", "undone": True})


@defer.inlineCallbacks
def _undo_journal(ports, record):
    action, before = record["action"], record.get("before") or {}
    if action == "edit_journal":
        _replace_entry(ports, record["target"], lambda entry: entry.update(
            content=before.get("content"), corrected=before.get("corrected")))
        replacement = (record.get("after") or {}).get("memory")
        if replacement and Memories(ports).available:
            yield Memories(ports).delete(str(replacement))
    elif action == "delete_journal":
        entry = before["entry"]
        try:
            Journal(ports).restore(entry, consolidated=bool(before.get("consolidated")))
        except JournalError:
            raise CorrectionError(f"Journal entry #{entry['id']} is there already.") from None
    else:  # mark_wrong of an entry
        _replace_entry(ports, record["target"].split(":", 1)[1],
                       lambda entry: entry.pop("wrong", None))
    if Memories(ports).available:
        yield _lift_wrong(ports, record.get("derived"))
    _restore_derived_records(ports, record)


def _restore_derived_records(ports, record):
    """Put back the nodes and attributes a correction of an entry put to rest."""
    Nodes(ports).lift_wrong(list(record.get("derived_nodes") or ()))
    for item in record.get("derived_attributes") or ():
        try:
            store_attribute(ports, item["entity_id"], item["attribute"], item["value"],
                            item.get("provenance"))
        except CorrectionError:
            continue  # the profile was pruned since: nothing to put back


def _undo_pin(ports, record):
    store_pin(ports, record["target"], bool(record["before"]["pinned"]))


def _undo_attribute(ports, record):
    entity_id, attribute = record["target"].split(":", 1)
    before = record.get("before") or {}
    store_attribute(ports, entity_id, attribute, before.get("value"), before.get("provenance"))


@defer.inlineCallbacks
def _undo_memory(ports, record):
    memories = Memories(ports)
    if not memories.available:
        raise CorrectionError("This assistant has no long-term memory.")
    action, before = record["action"], record.get("before") or {}
    memory_id = record["target"].removeprefix("memory:")
    if action == "delete_memory":
        yield memories.add(before.get("memory") or "", metadata=before.get("metadata"))
        return
    memory = yield memories.get(memory_id)
    if not memory:
        raise CorrectionError(f"There is no long-term memory {memory_id!r} any more.")
    if action == "edit_memory":
        # its old text, and whose word it was (a correction made it the admin's)
        yield memories.update(memory_id, before.get("memory") or "",
                              metadata=_source_before(before))
    else:
        yield _lift_wrong(ports, [memory_id])


def _source_before(before):
    """The source fields an edited memory had, to put back (None for an older record)."""
    metadata = before.get("metadata")
    if not isinstance(metadata, dict):
        return None
    restored = {key: value for key, value in metadata.items() if value is not None}
    # a memory stored before provenance existed gets the one its old fields mean
    restored["provenance"] = provenance.of(restored)
    return restored


@defer.inlineCallbacks
def undo_correction(ports, record_id, *, by):
    """
    Undo correction `record_id` (see the module). Deferred[the undo's audit record]; fails
    with `CorrectionError` for an unknown, already undone or undo record.
    """
    record = _find(ports, record_id)
    action = record["action"]
    if action in ("pin_node", "unpin_node"):
        _undo_pin(ports, record)
    elif action in ("edit_journal", "delete_journal") or (
            action == "mark_wrong" and record["target"].startswith("journal:")):
        yield _undo_journal(ports, record)
    elif action == "correct_attribute":
        _undo_attribute(ports, record)
    else:
        yield _undo_memory(ports, record)
    touched = list(record.get("derived") or ())
    if str(record["target"]).startswith("memory:") or action in ("edit_memory",
                                                                 "delete_memory"):
        touched.append(str(record["target"]).removeprefix("memory:"))
    undo = _record(ports, by, UNDO, record["id"],
                   f"undid correction #{record['id']} ({record.get('detail', '')[:160]})",
                   before=record.get("after"), after=record.get("before"), derived=touched,
                   derived_records={"nodes": record.get("derived_nodes"),
                                    "attributes": record.get("derived_attributes")})
    mark_undone(ports, record["id"], undo["id"])
    return undo

