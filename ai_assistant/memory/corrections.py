"""
Corrections staff make to what an assistant remembers, and their audit trail.

The memory inspector on the game's website (`ai_assistant.web`) calls these; they are store
logic, so they live here and run without Evennia. Each correction changes one store through its
own rules, then is recorded twice: in the `documents.CORRECTIONS_AUDIT` trail (the last
`inspector.audit_kept`), and as a journal entry tagged `correction`, so the assistant itself
knows its memory was corrected and by whom. That note is bookkeeping, not a memory: it has a low
importance (`NOTE_IMPORTANCE`, below `memory.min_importance`, so it is never consolidated), it
is never ranked by the journal search or recall (`not_recalled`), so it neither outranks the
entry it corrected nor reaches a player's prompt; staff see it in the journal and the
inspector. An edited entry carries its own short marker (`corrected`: by whom, when), which the
journal tools show the assistant as "corrected by an admin".

- pin or unpin a memory node (a pinned node never starts dying: `sleep.patrol.decay`);
- edit or delete a journal entry;
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

from twisted.internet import defer

from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal, JournalError
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.sources import ADMIN_SOURCE, ADMIN_TRUST
from ai_assistant.memory.nodes import Nodes
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso

CORRECTION_TAG = "correction"
NOTE_IMPORTANCE = 2  # a correction note never outranks what it corrected
MAX_ATTRIBUTE_NAME_CHARS = 64
MAX_ATTRIBUTE_VALUE_CHARS = 500
MAX_REASON_CHARS = 300


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


def _record(ports, by, action, target, detail):
    """Append a correction to the audit trail and the journal; returns the audit record."""
    who = str(by or "staff")[:80]
    entry = Journal(ports).add(
        f"{who} corrected my memory: {detail}", tags=[CORRECTION_TAG],
        source_type="direct", source_entity=who, count_for_reflection=False,
        importance=NOTE_IMPORTANCE,
    )
    trail = audit_trail(ports)
    record = {
        "id": (trail[-1]["id"] + 1) if trail else 1,
        "time": iso(ports.clock.now()),
        "by": who,
        "action": action,
        "target": str(target),
        "detail": detail,
        "journal_entry_id": entry["id"],
    }
    trail.append(record)
    kept = max(1, int(ports.settings.get("inspector.audit_kept")))
    ports.state.set(documents.CORRECTIONS_AUDIT, trail[-kept:])
    return record


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
    try:
        node = Nodes(ports).pin(node_id, pinned)
    except KeyError:
        raise CorrectionError(f"There is no memory node {node_id!r}.") from None
    verb = "pinned" if pinned else "unpinned"
    title = str((node.get("scene") or {}).get("action") or node_id)[:80]
    return _record(ports, by, "pin_node" if pinned else "unpin_node", node_id,
                   f"{verb} memory node {node_id} ({title}).")


# ----------------------------------------------------------------------------------------------
# Journal entries


def _entry_id(entry_id):
    try:
        return int(entry_id)
    except (TypeError, ValueError):
        raise CorrectionError(f"A journal entry id is a number, not {entry_id!r}.") from None


def _replace_entry(ports, entry_id, change):
    """Replace an entry by a changed copy (`change(copy)`); returns the new entry."""
    wanted = _entry_id(entry_id)
    try:
        return Journal(ports).replace(wanted, change)
    except JournalError:
        raise CorrectionError(f"There is no journal entry #{wanted}.") from None


def edit_journal_entry(ports, entry_id, content, *, by):
    """Replace the text of a journal entry. Returns the audit record."""
    content = _clean_text(ports, content, "The new text")
    stamp = {"by": str(by), "time": iso(ports.clock.now())}
    entry = _replace_entry(ports, entry_id,
                           lambda entry: entry.update(content=content, corrected=stamp))
    return _record(ports, by, "edit_journal", entry["id"],
                   f"rewrote journal entry #{entry['id']} as: {content[:200]}")


def delete_journal_entry(ports, entry_id, *, by):
    """Remove a journal entry. Returns the audit record."""
    wanted = _entry_id(entry_id)
    try:
        removed = Journal(ports).remove(wanted)
    except JournalError:
        raise CorrectionError(f"There is no journal entry #{wanted}.") from None
    return _record(ports, by, "delete_journal", removed["id"],
                   f"deleted journal entry #{removed['id']}.")


def mark_journal_entry_wrong(ports, entry_id, reason="", *, by):
    """Mark a journal entry as wrong: searches never return it again. Returns the audit record."""
    reason = _clean_reason(reason)
    mark = {"by": str(by), "time": iso(ports.clock.now()), "reason": reason}
    entry = _replace_entry(ports, entry_id, lambda entry: entry.update(wrong=mark))
    why = f" ({reason})" if reason else ""
    return _record(ports, by, "mark_wrong", f"journal:{entry['id']}",
                   f"marked journal entry #{entry['id']} as wrong{why}; I will not recall it.")


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
    if value:
        detail = f"set {profile.get('name')}'s {attribute} to: {value}"
    elif attribute in (profile.get("attributes") or {}):
        detail = f"removed {profile.get('name')}'s {attribute}."
    else:
        raise CorrectionError(f"{profile.get('name')} has no attribute {attribute!r} to remove.")
    people.set_attribute(entity_id, attribute, value)
    return _record(ports, by, "correct_attribute", f"{entity_id}:{attribute}", detail)


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
    memory = yield _existing_memory(store, memory_id)
    # The text is now the admin's statement (recall states it as fact, and only an admin's
    # claim may replace it: `longterm.sources`); whose word it was before stays on record.
    before = memory.get("metadata") or {}
    # recall reads the corrected text at once (the owner writes through to its mirror)
    yield store.update(str(memory_id), text, metadata={
        "corrected_by": str(by), "corrected_at": iso(ports.clock.now()),
        "source_type": ADMIN_SOURCE, "source_trust": ADMIN_TRUST, "source_entity": str(by),
        "former_source": {key: before.get(key) for key in
                          ("source_type", "source_trust", "source_entity")}})
    return _record(ports, by, "edit_memory", memory_id,
                   f"rewrote long-term memory {memory_id} as: {text[:200]}")


@defer.inlineCallbacks
def delete_memory(ports, memory_id, *, by):
    """Delete a long-term memory (its links go at the next sleep's pruning). Deferred[record]."""
    store = _require_store(ports)
    memory = yield _existing_memory(store, memory_id)
    yield store.delete(str(memory_id))
    return _record(ports, by, "delete_memory", memory_id,
                   f"deleted long-term memory {memory_id} ({str(memory.get('memory'))[:80]}).")


@defer.inlineCallbacks
def mark_memory_wrong(ports, memory_id, reason="", *, by):
    """Mark a long-term memory as wrong: recall skips it from now on. Deferred[audit record]."""
    reason = _clean_reason(reason)
    store = _require_store(ports)
    memory = yield _existing_memory(store, memory_id)
    mark = {"wrong": True, "wrong_reason": reason, "wrong_by": str(by),
            "wrong_at": iso(ports.clock.now())}
    yield store.update(str(memory_id), memory.get("memory") or "", metadata=mark)  # unrecalled now
    why = f" ({reason})" if reason else ""
    return _record(ports, by, "mark_wrong", f"memory:{memory_id}",
                   f"marked long-term memory {memory_id} as wrong{why}; I will not recall it.")
