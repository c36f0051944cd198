"""
What a journal search may return at all: tags, age, project, trust.

The same rules serve `search_entries` (over index positions) and one entry at a time
(`entry_matches_filters`, e.g. the journal review).
"""

from dataclasses import dataclass

import numpy

from ai_assistant.plumbing.ports import parse_iso


@dataclass(frozen=True)
class SearchFilters:
    """
    Attributes:
        tags (list[str], optional): All must be on the entry (case-insensitive).
        days_back (float, optional): Written within the last N days.
        related_to_project (str, optional): Listed in its related_projects (case-insensitive).
        min_trust (float, optional): Its source_trust is at least this.
    """

    tags: list | tuple | None = None
    days_back: float | None = None
    related_to_project: str | None = None
    min_trust: float | None = None

    @property
    def active(self):
        """Whether any filter applies (a `days_back` of 0 does)."""
        return bool(self.tags or self.related_to_project) or (
            self.days_back is not None or self.min_trust is not None
        )

    def _rules(self, now):
        """Lower-cased tag set, lower-cased project, earliest epoch (each None if unset)."""
        tags = {str(t).lower() for t in self.tags} if self.tags else None
        project = str(self.related_to_project).lower() if self.related_to_project else None
        since = now.timestamp() - self.days_back * 86400 if self.days_back is not None else None
        return tags, project, since

    def keep(self, entries, positions, epochs, now):
        """
        Args:
            entries (list): The journal entries.
            positions (numpy.ndarray): Candidate positions in `entries`, in order.
            epochs (list): The entries' times (epoch seconds, None when unknown).
            now (datetime): The current time.

        Returns:
            numpy.ndarray: The positions whose entries pass, in the same order.
        """
        tags, project, since = self._rules(now)
        return numpy.asarray(
            [
                p
                for p in positions.tolist()
                if _passes(entries[p], tags, project, since, epochs[p], self.min_trust)
            ],
            dtype=numpy.int64,
        )

    def matches(self, entry, now):
        """Whether one entry passes (the same rules `keep` applies)."""
        moment = parse_iso(entry.get("timestamp"))
        tags, project, since = self._rules(now)
        epoch = moment.timestamp() if moment else None
        return _passes(entry, tags, project, since, epoch, self.min_trust)


def _passes(entry, tags, project, since_epoch, epoch, min_trust):
    if tags:
        own = {str(t).lower() for t in entry.get("tags") or ()}
        if not tags <= own:
            return False
    if project:
        if project not in {str(p).lower() for p in entry.get("related_projects") or ()}:
            return False
    if since_epoch is not None and (epoch is None or epoch < since_epoch):
        return False
    if min_trust is not None and entry.get("source_trust", 1.0) < min_trust:
        return False
    return True


def entry_matches_filters(
    entry, now, *, tags=None, days_back=None, related_to_project=None, min_trust=None
):
    """
    Whether one entry passes the search filters (the same rules `search_entries` applies).

    Args:
        entry (dict): A journal entry.
        now (datetime): The current time.
        tags, days_back, related_to_project, min_trust: As `SearchFilters`.

    Returns:
        bool
    """
    filters = SearchFilters(tags=tags, days_back=days_back,
                            related_to_project=related_to_project, min_trust=min_trust)  # fmt: skip
    return filters.matches(entry, now)
