"""
Recalled items and the lines that show them.

A memory of the long-term store (mem0) becomes a journal-shaped item, so the journal's search
(`memory.search`) ranks memories and journal entries alike: its `content` is the memory's text,
its `timestamp` when the memory's source was heard (the source entry's time, kept in the
memory's metadata by consolidation; the store's own `created_at` otherwise), its
`source_entity` the speaker. Every recalled line carries its date, so a model reading "the
support group yesterday" can tell which day that was.

This is the one place that says whose word a line is (`longterm.sources.attribution`), for
every tier and every block that shows remembered things: a memory or a journal entry
(`said_by`), a memory node or scene note, a session fact, the diary and think notes
(`attributed`, from their provenance) and a profile attribute (`attribute_line`). What rests on
players' words reads as theirs ("Mallory told me: ...", "Eve says (disputed): ...", "Mallory
claimed (I know otherwise): ..."); only the assistant's own observations and thoughts, admins'
statements and the persona are stated as fact.
"""

from ai_assistant.memory import provenance as provenance_model
from ai_assistant.memory.attribute_sources import (
    ATTRIBUTE_CLAIMS,
    ATTRIBUTE_PROVENANCE,
    attribute_provenance,
)
from ai_assistant.memory.longterm.sources import (
    DISPUTED_WITH,
    DISPUTES,
    OUTRANKED_BY,
    attribution,
)
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


def attributed(provenance, content, *, disputed=False, outranked=False):
    """
    `content` with the prefix that says whose word it is, from its provenance alone (a memory
    node, a scene note, a session fact, the diary, a profile attribute).

    Args:
        provenance (dict or None): Where it came from (`memory.provenance`); None for
            something that records none, stated as it is.
        content (str): The text.
        disputed (bool): Another source of equal trust says otherwise.
        outranked (bool): A more trusted source says otherwise.

    Returns:
        str: "Mallory told me: ..." for a player's word, `content` alone for the assistant's
        own, an admin's statement or correction.
    """
    if not isinstance(provenance, dict):
        return content
    fields = {provenance_model.KEY: provenance}
    if disputed:
        fields[DISPUTED_WITH] = True
    if outranked:
        fields[OUTRANKED_BY] = True
    return attribution(fields) + content


def attribute_line(profile, key, value):
    """
    One profile attribute as a prompt shows it: "role: guest" for an admin's correction or the
    assistant's own inference (and an attribute kept before provenance existed), "Mallory told
    me: role: head archivist" for a player's account, and, when another source of equal trust
    disputes it, both sides ("Eve says (disputed): trade: pilot; Bo says (disputed): trade:
    fisher"). A claim outranked by a more trusted source is not shown (staff see it).

    Args:
        profile (dict): The entity profile (`memory.entities`).
        key (str): The attribute.
        value: Its current value.
    """
    text = f"{key}: {value}"
    if not isinstance((profile.get(ATTRIBUTE_PROVENANCE) or {}).get(key), dict):
        return text
    disputes = [claim for claim in (profile.get(ATTRIBUTE_CLAIMS) or {}).get(key) or ()
                if claim.get("outcome") == DISPUTES and isinstance(claim.get("provenance"), dict)]
    line = attributed(attribute_provenance(profile, key), text, disputed=bool(disputes))
    for claim in disputes:
        line += "; " + attributed(claim["provenance"], f"{key}: {claim.get('value')}",
                                  disputed=True)
    return line


def said_by(item, content):
    """
    `content` with the prefix that says whose word it is (`sources.attribution`): a player's
    claim reads "Mallory told me: ...", a dispute "Eve says (disputed): ...". Nothing for the
    assistant's own memories and an admin's statements, nor for a line that already starts
    with its speaker's name (a heard entry: 'Eve said to me: "..."'). A memory node says so
    from its provenance (`recall.tiers.node_item` keeps it in the item's `metadata`); a
    profile's attributes each say so in its content already (`attribute_line`).
    """
    if item.get("tier") == PROFILE_TIER:
        return content
    prefix = attribution(item)
    name = prefix.split(" ", 1)[0] if prefix and not prefix.startswith("(") else ""
    if name and content.casefold().startswith(name.casefold()) and not prefix.endswith(
            ("(disputed): ", "otherwise): ")):
        return content
    return prefix + content


def recall_line(item):
    """
    One recalled item as the prompt shows it: `- [8 May 2023] Orla said to me: "..."`, a
    player's claim as theirs (`said_by`).

    Args:
        item (dict): A journal entry or a `memory_item`.
    """
    content = said_by(item, " ".join(str(item.get("content") or "").split()))
    if is_superseded(item):
        content = f"(formerly, since corrected) {content}"
    date = recall_date(item.get("timestamp"))
    return f"- [{date}] {content}" if date else f"- {content}"
