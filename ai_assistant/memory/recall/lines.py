"""
Recalled items and the lines that show them.

A memory of the long-term store (mem0) becomes a journal-shaped item, so the journal's search
(`memory.search`) ranks memories and journal entries alike: its `content` is the memory's text,
its `timestamp` when the memory's source was heard (the source entry's time, kept in the
memory's metadata by consolidation; the store's own `created_at` otherwise), its
`source_entity` the speaker. Every recalled line carries its date, so a model reading "the
support group yesterday" can tell which day that was.
"""

from ai_assistant.memory.longterm.sources import attribution
from ai_assistant.memory.longterm.supersede import is_superseded
from ai_assistant.plumbing.ports import parse_iso

MEMORY_TIER = "memory"
# The trust of a memory that records none (the specification's neutral middle).
UNKNOWN_TRUST = 0.5
NODE_TIER = "node"
PROFILE_TIER = "profile"


def memory_item(memory):
    """
    A long-term memory as a journal-shaped item.

    Args:
        memory (dict): `{"id", "memory", "metadata", "created_at"}` as the store lists it.

    Returns:
        dict: id, content, timestamp, source_entity, importance, tags, audience, source_trust,
        `entry_id` (the journal entry it was made from, if any) and `tier` ("memory").
    """
    metadata = dict(memory.get("metadata") or {})
    item = {
        "id": str(memory.get("id")),
        "content": str(memory.get("memory") or ""),
        "timestamp": metadata.get("timestamp") or memory.get("created_at"),
        "source_entity": metadata.get("source_entity"),
        "source_type": metadata.get("source_type"),
        "source_trust": (metadata["source_trust"]
                         if isinstance(metadata.get("source_trust"), int | float)
                         else UNKNOWN_TRUST),
        "importance": metadata.get("importance"),
        "tags": list(metadata.get("tags") or ()),
        "entry_id": metadata.get("entry_id"),
        "metadata": metadata,
        "tier": MEMORY_TIER,
    }
    if metadata.get("audience") not in (None, ""):
        item["audience"] = metadata["audience"]
    return item


def source_key(item):
    """What an item was made from: one key for a journal entry and every memory made from it."""
    if item.get("tier") == MEMORY_TIER:
        entry_id = item.get("entry_id")
        return ("entry", str(entry_id)) if entry_id is not None else ("memory", item["id"])
    if item.get("tier") in (NODE_TIER, PROFILE_TIER):
        return (item["tier"], str(item.get("id")))
    return ("entry", str(item.get("id")))


def recall_date(timestamp):
    """`8 May 2023` for a timestamp, or "" when it has none."""
    moment = parse_iso(timestamp) if timestamp else None
    return f"{moment.day} {moment.strftime('%B %Y')}" if moment else ""


def said_by(item, content):
    """
    `content` with the prefix that says whose word it is (`sources.attribution`): a player's
    claim reads "Mallory told me: ...", a dispute "Eve says (disputed): ...". Nothing for the
    assistant's own memories, an admin's statements, memory nodes and profiles, nor for a line
    that already starts with its speaker's name (a heard entry: 'Eve said to me: "..."').
    """
    if item.get("tier") in (NODE_TIER, PROFILE_TIER):
        return content
    prefix = attribution(item)
    name = prefix.split(" ", 1)[0] if prefix and not prefix.startswith("(") else ""
    if name and content.casefold().startswith(name.casefold()) and prefix.endswith("told me: "):
        return content
    return prefix + content


def recall_line(item):
    """
    One recalled item as the prompt shows it: `- [8 May 2023] Audrey said to me: "..."`, a
    player's claim as theirs (`said_by`).

    Args:
        item (dict): A journal entry or a `memory_item`.
    """
    content = said_by(item, " ".join(str(item.get("content") or "").split()))
    if is_superseded(item):
        content = f"(formerly, since corrected) {content}"
    date = recall_date(item.get("timestamp"))
    return f"- [{date}] {content}" if date else f"- {content}"
