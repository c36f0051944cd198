"""
Session memory: persistent facts, learned patterns and completed tasks.

State document `"session_memory"`::

    {
        "key_facts": ["Player Alice prefers formal address", ...],
        "learned_patterns": ["Players tend to explore before asking for help", ...],
        "completed_tasks": [{"description": "...", "timestamp": "2025-12-06T10:00:00Z"}, ...],
        "last_compacted": "2025-12-06T10:00:00Z",   # or None
        "sources": {"key_facts": {"player alice prefers formal address": {
            "id": "3f2a9c1b7d0e", "provenance": {...}, "turn": 41,
            "set_at": "2025-12-06T10:00:00Z"}}, ...},
    }

Every entry records where it came from in `sources` (beside the lists, so the lists keep their
plain shape), keyed by the entry's normalized text: a stable `id` (a `fact:<id>` reference),
its `provenance` (`memory.provenance`: who set it, how it was heard, that source's trust), the
tick it was set in (`turn`) and when (`set_at`). What the tool records comes from the turn's
grant (`tools.agency`): an admin's order is the admin's statement, the assistant's own turn
its own thought, or the word of whom it names. A near duplicate that `compact` merges is
derived from both (`provenance.derive`): the kept entry names both ids, and its trust is the
lower. An entry kept before provenance existed reads as the assistant's own
(`SessionMemory.source_of`).

Everything stored here is about the world, the players and events, never about the assistant
itself: `SessionMemory.add` refuses self-referential content with the specification's error
and suggestion (the same test reflection uses, from `ai_assistant.memory.persona`).
`SessionMemory.compact` removes exact and near duplicates (token-set similarity), keeping the
more informative wording of each.
"""

import hashlib
import re

from ai_assistant.memory import provenance as provenance_model
from ai_assistant.memory.persona import (
    SELF_REFERENCE_ERROR,
    SELF_REFERENCE_SUGGESTION,
    is_self_referential,
)
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso
from ai_assistant.workspace.mode import Mode

# memory_type -> the list it is stored in
MEMORY_TYPES = {
    "fact": "key_facts",
    "pattern": "learned_patterns",
    "completed_task": "completed_tasks",
}
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


class SessionMemoryError(ValueError):
    """A session-memory operation was refused; the message says why. Nothing was changed."""

    def __init__(self, message, suggestion=None):
        super().__init__(message)
        self.suggestion = suggestion


# ----------------------------------------------------------------------------------------------
# Reading


def empty_session_memory():
    """A fresh `"session_memory"` document."""
    return {"key_facts": [], "learned_patterns": [], "completed_tasks": [], "last_compacted": None,
            "sources": {}}


def entry_id(text):
    """The stable id of an entry: from its normalized text, so the same entry keeps it."""
    return hashlib.sha1(normalize_text(text).encode("utf-8")).hexdigest()[:12]


def entry_text(entry):
    """The text of a session memory entry (a string, or a dict's description), or None."""
    if isinstance(entry, dict):
        entry = entry.get("description")
    return entry if isinstance(entry, str) else None


# ----------------------------------------------------------------------------------------------
# Similarity


def normalize_text(text):
    """Lower case, single spaces, no surrounding punctuation: what makes two entries equal."""
    return " ".join(text.lower().split()).strip(" .,;:!?\"'")


def token_set(text):
    """The set of lower-case word tokens in `text`."""
    return frozenset(_TOKEN.findall(text.lower()))


def similarity(first, second):
    """
    Token-set (Jaccard) similarity of two texts.

    Returns:
        float: 0.0 (no words shared) to 1.0 (the same words).
    """
    return _jaccard(token_set(first), token_set(second))


def _jaccard(a, b):
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


# ----------------------------------------------------------------------------------------------
# Duplicates


def _deduplicate(entries, threshold):
    """
    Returns:
        tuple: `(kept, removed, merged)`. Of exact duplicates (same normalized text) the first
        is kept. Of near duplicates the one with more words is kept (the later one on a tie, as
        newer wording is likelier current), in the earlier one's place. `merged` maps each kept
        entry's normalized text to the normalized texts of the duplicates it stands for.
    """
    kept, removed = [], []  # kept: [entry, normalized, tokens]
    merged = {}
    for entry in entries:
        text = entry_text(entry)
        if text is None or not text.strip():
            removed.append(entry)  # unreadable leftovers
            continue
        if isinstance(entry, str):
            entry = " ".join(entry.split())
        normalized, tokens = normalize_text(text), token_set(text)
        for slot in kept:
            if slot[1] == normalized:
                removed.append(entry)
                break
            if _jaccard(slot[2], tokens) >= threshold:
                absorbed = merged.pop(slot[1], [])
                if len(tokens) >= len(slot[2]):
                    removed.append(slot[0])
                    absorbed.append(slot[1])
                    slot[:] = [entry, normalized, tokens]
                else:
                    removed.append(entry)
                    absorbed.append(normalized)
                merged[slot[1]] = absorbed
                break
        else:
            kept.append([entry, normalized, tokens])
    return [slot[0] for slot in kept], removed, merged


# ----------------------------------------------------------------------------------------------
# The store


class SessionMemory:
    """
    The assistant's session memory (`documents.SESSION_MEMORY`), read fresh from its state on
    every call: `session.document()`, `session.add(...)`, `session.compact()`.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    def document(self):
        """
        The `"session_memory"` document, repaired into the expected shape.

        Returns:
            dict: The document, to read (the verbs change it).
        """
        doc = self.ports.state.get(documents.SESSION_MEMORY, None)
        if not isinstance(doc, dict):
            return empty_session_memory()
        for name in MEMORY_TYPES.values():
            if not isinstance(doc.get(name), list):
                doc[name] = []
        doc.setdefault("last_compacted", None)
        if not isinstance(doc.get("sources"), dict):
            doc["sources"] = {}
        return doc

    def source_of(self, entry, memory_type="fact", doc=None):
        """
        Where an entry came from.

        Args:
            entry (str or dict): An entry of the document (or its text).
            memory_type (str): Its list's type.
            doc (dict, optional): The document already read.

        Returns:
            dict: `{"id", "provenance", "turn", "set_at"}`; an entry kept before provenance
            existed is the assistant's own, of no known turn.
        """
        doc = self.document() if doc is None else doc
        text = entry_text(entry) or ""
        record = (doc["sources"].get(MEMORY_TYPES[memory_type]) or {}).get(normalize_text(text))
        if isinstance(record, dict):
            try:
                return {**record, "provenance": provenance_model.validate(record.get(
                    provenance_model.KEY))}
            except provenance_model.ProvenanceError:
                pass  # unreadable: read as one kept before provenance existed
        return {"id": entry_id(text), "provenance": provenance_model.build(
            provenance_model.CHANNEL_OWN), "turn": None, "set_at": None}

    def entries(self, memory_type="fact"):
        """
        Returns:
            list[dict]: The entries of one list with where each came from:
            `{"text", "timestamp", "id", "provenance", "turn", "set_at"}`, oldest first.
        """
        doc = self.document()
        rows = []
        for entry in doc[MEMORY_TYPES[memory_type]]:
            text = entry_text(entry)
            if not text:
                continue
            rows.append({"text": text, "timestamp": entry.get("timestamp")
                         if isinstance(entry, dict) else None,
                         **self.source_of(entry, memory_type, doc)})
        return rows

    def add(self, content, memory_type="fact", provenance=None):
        """
        Remember a fact, a pattern or a completed task.

        Args:
            content (str): What to remember, about the world/players/events (third person).
            memory_type (str): "fact", "pattern" or "completed_task".
            provenance (dict, optional): Who set it and how it was heard (`memory.provenance`,
                from the turn's grant); the assistant's own thought when left out.

        Returns:
            dict: `{"memory_type", "content", "added", "id", "provenance"}`; `added` is False
            when the same entry was already there (it is not stored twice, and keeps where it
            first came from).

        Raises:
            SessionMemoryError: Bad type, empty or oversized content, a full list, a provenance
                that is not one, or self-referential content (then with the specification's
                `suggestion`).
        """
        try:
            provenance = (provenance_model.build(provenance_model.CHANNEL_OWN)
                          if provenance is None else provenance_model.validate(provenance))
        except provenance_model.ProvenanceError as err:
            raise SessionMemoryError(f"provenance: {err}") from None
        if memory_type not in MEMORY_TYPES:
            raise SessionMemoryError(
                f"invalid memory_type '{memory_type}': use one of {', '.join(MEMORY_TYPES)}"
            )
        if not isinstance(content, str) or not content.strip():
            raise SessionMemoryError("content must not be empty")
        content = " ".join(content.split())
        limit = self.ports.settings.get("workspace.session_memory.max_content_chars")
        if len(content) > limit:
            raise SessionMemoryError(f"content is too long ({len(content)} chars; limit {limit})")
        if is_self_referential(content):
            raise SessionMemoryError(SELF_REFERENCE_ERROR, suggestion=SELF_REFERENCE_SUGGESTION)

        doc = self.document()
        entries = doc[MEMORY_TYPES[memory_type]]
        normalized = normalize_text(content)
        if any(normalize_text(entry_text(e) or "") == normalized for e in entries):
            known = self.source_of(content, memory_type, doc)
            return {"memory_type": memory_type, "content": content, "added": False,
                    "id": known["id"], "provenance": known["provenance"]}
        max_items = self.ports.settings.get("workspace.session_memory.max_items")
        if len(entries) >= max_items:
            raise SessionMemoryError(
                f"session memory already holds {len(entries)} {MEMORY_TYPES[memory_type]} "
                f"(limit {max_items}); run compact_session_memory or keep only what matters"
            )
        if memory_type == "completed_task":
            entries.append({"description": content, "timestamp": iso(self.ports.clock.now())})
        else:
            entries.append(content)
        record = {"id": entry_id(content), provenance_model.KEY: provenance,
                  "turn": Mode(self.ports).ticks(), "set_at": iso(self.ports.clock.now())}
        doc["sources"].setdefault(MEMORY_TYPES[memory_type], {})[normalized] = record
        self.ports.state.set(documents.SESSION_MEMORY, doc)
        return {"memory_type": memory_type, "content": content, "added": True,
                "id": record["id"], "provenance": provenance}

    def compact(self):
        """
        Remove exact and near-duplicate entries from every list and stamp `last_compacted`.

        A kept entry that stands for near duplicates is derived from them all: its provenance
        names their ids and takes the least trusted source among them (`provenance.derive`), so
        merging never raises a player's word to the assistant's own.

        Returns:
            dict: `{"removed": {list name: [entries removed]}, "removed_count",
            "counts": {list name: entries left}, "last_compacted"}`.
        """
        threshold = self.ports.settings.get("workspace.session_memory.near_duplicate")
        doc = self.document()
        removed, counts = {}, {}
        for memory_type, name in MEMORY_TYPES.items():
            doc[name], removed[name], merged = _deduplicate(doc[name], threshold)
            counts[name] = len(doc[name])
            doc["sources"][name] = self._merged_sources(doc, memory_type, merged)
        doc["last_compacted"] = iso(self.ports.clock.now())
        self.ports.state.set(documents.SESSION_MEMORY, doc)
        return {
            "removed": removed,
            "removed_count": sum(len(items) for items in removed.values()),
            "counts": counts,
            "last_compacted": doc["last_compacted"],
        }


    def _merged_sources(self, doc, memory_type, merged):
        """The sources of one list after `compact`: the kept entries', merged ones derived."""
        name = MEMORY_TYPES[memory_type]
        sources = {}
        for entry in doc[name]:
            text = entry_text(entry)
            normalized = normalize_text(text)
            record = self.source_of(text, memory_type, doc)
            absorbed = [self.source_of(other, memory_type, doc)
                        for other in merged.get(normalized, ())]
            if absorbed:
                refs = list(record[provenance_model.KEY]["derived_from"])
                for item in absorbed:
                    refs += [provenance_model.ref("fact", item["id"]),
                             *item[provenance_model.KEY]["derived_from"]]
                record = {**record, provenance_model.KEY: provenance_model.derive(
                    [item[provenance_model.KEY] for item in [record, *absorbed]], refs)}
            sources[normalized] = record
        return sources


# ----------------------------------------------------------------------------------------------
# Presentation


def format_session_memory(doc):
    """The admin's view of a `"session_memory"` document."""
    doc = doc if isinstance(doc, dict) else {}
    lines = []
    for title, name in (
        ("Key facts", "key_facts"),
        ("Learned patterns", "learned_patterns"),
        ("Completed tasks", "completed_tasks"),
    ):
        entries = doc.get(name) or []
        lines.append(f"{title} ({len(entries)}):")
        for entry in entries:
            text = entry_text(entry) or "?"
            if isinstance(entry, dict) and entry.get("timestamp"):
                text = f"{entry['timestamp']}  {text}"
            lines.append(f"  - {text}")
    lines.append(f"Last compacted: {doc.get('last_compacted') or 'never'}")
    return "\n".join(lines)
