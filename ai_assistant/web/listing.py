"""
The inspector's long lists in pages, and the filters that narrow them.

Long-term memories, memory nodes and people are read whole (so the counts shown are true) and
shown a page at a time; `MemoryFilters` narrows the memories by person, source, audience,
correctness, supersession and date, from a page's or the API's query parameters.
"""

from dataclasses import asdict, dataclass
from urllib.parse import urlencode

from ai_assistant.plumbing.ports import parse_iso

# Query parameters that are flags: on for any of these values.
_TRUE = ("1", "true", "yes", "on")


def _flag(params, name):
    return str(params.get(name, "")).strip().lower() in _TRUE


def _day(params, name):
    value = str(params.get(name, "")).strip()
    moment = parse_iso(value) if value else None
    return moment.date().isoformat() if moment is not None else ""


@dataclass(frozen=True)
class MemoryFilters:
    """What a memory list is narrowed to; empty and False fields narrow nothing."""

    person: str = ""        # a source entity or audience (name or id), case-insensitive
    source: str = ""        # the source type (direct, observation, inference, environmental)
    private: bool = False   # only memories told in private (an audience)
    wrong: bool = False     # only memories marked wrong
    superseded: bool = False  # only superseded memories
    since: str = ""         # YYYY-MM-DD: made on or after
    until: str = ""         # YYYY-MM-DD: made on or before
    memory: str = ""        # one memory, by id (where the link graph leads)

    @classmethod
    def from_params(cls, params):
        """From a QueryDict (or any mapping) of `person`, `source`, `private`, `wrong`,
        `superseded`, `since`, `until`, `memory`; what cannot be read is ignored."""
        return cls(
            person=str(params.get("person", "")).strip()[:100],
            source=str(params.get("source", "")).strip()[:40],
            private=_flag(params, "private"), wrong=_flag(params, "wrong"),
            superseded=_flag(params, "superseded"),
            since=_day(params, "since"), until=_day(params, "until"),
            memory=str(params.get("memory", "")).strip()[:100])

    def active(self):
        """Whether any filter is set."""
        return any(asdict(self).values())

    def query(self):
        """The filters as a query string (for the paging links), without empty ones."""
        return urlencode({key: ("1" if value is True else value)
                          for key, value in asdict(self).items() if value})

    def matches(self, row):
        """Whether an `inspect` memory row passes every filter."""
        source = row.get("source") or {}
        if self.memory and row.get("id") != self.memory:
            return False
        if self.person:
            wanted = self.person.lower()
            who = {str(source.get("source_entity") or "").lower(),
                   str(row.get("audience") or "").lower()}
            if wanted not in who and not any(wanted in name for name in who if name):
                return False
        if self.source and str(source.get("source_type") or "") != self.source:
            return False
        if (self.private and not row.get("private")) or (self.wrong and not row.get("wrong")):
            return False
        if self.superseded and not row.get("superseded"):
            return False
        day = str(row.get("created_at") or "")[:10]
        return not ((self.since and day < self.since) or (self.until and day > self.until))


def page(rows, offset, size):
    """
    One page of `rows`.

    Returns:
        dict: `{"rows", "total", "offset", "size", "previous", "following"}`: `previous` and
        `following` are the offsets of the pages around it (None where there is none).
    """
    total = len(rows)
    offset = max(0, min(int(offset), max(total - 1, 0)))
    return {"rows": rows[offset:offset + size], "total": total, "offset": offset, "size": size,
            "previous": max(0, offset - size) if offset else None,
            "following": offset + size if offset + size < total else None}


def offset_of(params, name="offset"):
    """A non-negative offset from the query parameters (0 for anything else)."""
    try:
        return max(0, int(params.get(name, 0)))
    except (TypeError, ValueError):
        return 0
