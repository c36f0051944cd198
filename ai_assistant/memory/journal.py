"""
The journal: the assistant's episodic memory (the specification's journal entry structure).

`Journal(ports)` (or `npc.assistant.journal`) is the only code that reads or writes the state
document `documents.JOURNAL`; everything else goes through its verbs (`add`, `entry`,
`entries`, `update`, `replace`, `remove`, `mark_consolidated`, ...). The document holds::

    {
        "entries": [
            {"id": 42, "timestamp": "2025-12-06T14:30:00Z",
             "content": "Player Alice prefers formal address and dislikes jokes",
             "source_type": "direct", "source_trust": 0.9, "source_entity": "Alice",
             "importance": 7, "importance_method": "llm",   # heuristic | llm | manual
             "tags": ["player_preference"], "related_projects": ["alice_quest"],
             "audience": "#12"},   # only for a private entry: see below
        ],
        "entry_count": 42,             # the id counter: ids never repeat, even after pruning
        "max_entries": 100,            # mirrors the journal.max_entries setting
        "last_reflection": "2025-12-06T10:00:00Z",
        "consolidated_entry_ids": [1, 2, 5, 12],   # already moved to the semantic tier
    }

An entry told in private (a whisper or a page) carries `audience`: the stable id of the one
person who told it (`memory.audience`); recall shows it to that person only, and sleep carries it
over to whatever it makes from the entry. An entry said to the room has no `audience` key.

Entries are kept oldest first. A [SYNTHESIS] entry (from reflection or `review_journal`) may
also carry `"evidence"`: the ids it cites.

Auto-prune (when a new entry takes the journal over `journal.max_entries`) is fair per speaker
(`memory.journal_fairness`): it removes consolidated entries first, oldest first (their content
already lives in the semantic tier); then unconsolidated entries of the speaker who holds the
most of them, their least important and oldest first, so one speaker's flood only ever costs
that speaker's own lines; [SYNTHESIS] entries go only when nothing else is left. A heuristic
score is lowered for a speaker's repeated pattern (`journal.repeat_window_minutes`).

Lifecycle pruning during sleep (`Journal.prune_low_importance`) is separate: it removes old,
unimportant, unconsolidated entries in small batches (the specification's defaults: importance
<= 3 and age > 30 days, 10 per call, consolidated entries preserved).

Every new entry counts toward the next reflection (`memory.reflection_state`), unless the
writer says otherwise (a reflection's own synthesis does not).

Entries the search index has seen are replaced (`replace`), not changed in place, when their
text changes: the index caches a journal version by the identity of its entry objects.

Every write tells the state store what changed (`plumbing.state_changes`) where that is small:
the game's write-ahead log then records a heard line as one entry, not the whole journal again
(`add`, `update`, `remove`, `mark_consolidated`, `mark_reflected`, pruning); `replace` and
`restore`, rare staff actions, write the whole document.
"""

from datetime import timedelta

from ai_assistant.memory import provenance as provenance_model
from ai_assistant.memory.audience import PUBLIC
from ai_assistant.memory.importance import score_importance_heuristic
from ai_assistant.memory.journal_fairness import (
    decayed_score,
    eviction_order,
    repeat_penalty,
    speaker_key,
)
from ai_assistant.memory.journal_fields import (  # noqa: F401  (the journal's own names)
    DEFAULT_SOURCE_TRUST,
    MAX_ENTITY_CHARS,
    SOURCE_TYPES,
    JournalError,
    validate_entry_fields,
    validate_importance,
)
from ai_assistant.memory.reflection_state import ReflectionState
from ai_assistant.plumbing import documents
from ai_assistant.plumbing import state_changes as changes
from ai_assistant.plumbing.ports import iso, parse_iso

SYNTHESIS_PREFIX = "[SYNTHESIS]"
SYNTHESIS_TAGS = ("synthesis", "meta_learning")

def new_journal(max_entries=100):
    """A fresh, empty journal document."""
    return {
        "entries": [],
        "entry_count": 0,
        "max_entries": max_entries,
        "last_reflection": None,
        "consolidated_entry_ids": [],
    }


def get_journal(ports):
    """
    The journal document, for readers (recall and search read the entries through it).

    Args:
        ports (AssistantPorts): The assistant.

    Returns:
        dict: The journal document with missing keys filled in; only `Journal` writes it.
    """
    max_entries = ports.settings.get("journal.max_entries")
    journal = ports.state.get(documents.JOURNAL, None)
    if not isinstance(journal, dict):
        journal = new_journal(max_entries)
    for key, value in new_journal(max_entries).items():
        journal.setdefault(key, value)
    journal["max_entries"] = max_entries
    return journal


def is_synthesis(entry):
    """True for an entry produced by reflection or `review_journal`."""
    return str(entry.get("content", "")).startswith(SYNTHESIS_PREFIX)


# ----------------------------------------------------------------------------------------------
# Pure helpers over a journal document


def _new_entry(now, journal, fields, evidence, settings):
    """The entry for validated `fields`, with the next id; scored by heuristic if need be."""
    provenance = fields["provenance"]
    if fields["importance"] is None:
        importance = score_importance_heuristic(
            fields["content"], fields["source_type"], fields["tags"]
        )
        # one speaker's repeated pattern decays (memory.journal_fairness)
        speaker = speaker_key(fields)
        importance = decayed_score(
            importance, repeat_penalty(journal, fields["content"], speaker, now, settings))
        method = "heuristic"
    else:
        importance, method = fields["importance"], "manual"
    entry = {
        "id": int(journal["entry_count"]) + 1,
        "timestamp": iso(now),
        "content": fields["content"],
        "source_type": fields["source_type"],
        "source_trust": fields["source_trust"],
        "source_entity": fields["source_entity"],
        "importance": importance,
        "importance_method": method,
        "tags": fields["tags"],
        "related_projects": fields["related_projects"],
        "provenance": provenance,
    }
    if evidence:
        entry["evidence"] = list(evidence)
    return entry


def auto_prune(journal):
    """
    Shrink a journal document to its `max_entries`, in place (see the module doc for the order).

    Args:
        journal (dict): A journal document.

    Returns:
        list: The ids removed (`removal(ids)` says so as a state change).
    """
    excess = len(journal["entries"]) - max(1, int(journal.get("max_entries") or 1))
    if excess <= 0:
        return []
    doomed = set(eviction_order(journal, excess))
    removed = [journal["entries"][i]["id"] for i in sorted(doomed)]
    journal["entries"] = [e for i, e in enumerate(journal["entries"]) if i not in doomed]
    _forget_consolidated(journal, removed)
    return removed


def removal(removed_ids):
    """The state change that removes entries (and their consolidated marks) by id."""
    if not removed_ids:
        return []
    return [changes.remove(("entries",), removed_ids, key="id"),
            changes.remove(("consolidated_entry_ids",), removed_ids)]


def _forget_consolidated(journal, removed_ids):
    # The consolidated list only needs ids still in the journal: pruning checks membership and
    # consolidation skips ids it no longer finds, so dropping stale ids keeps the list small.
    gone = set(removed_ids)
    journal["consolidated_entry_ids"] = [
        i for i in journal.get("consolidated_entry_ids") or () if i not in gone
    ]


def _low_importance_candidates(journal, max_importance, cutoff):
    """Ids of the old, unimportant, unconsolidated, non-synthesis entries, oldest first."""
    consolidated = set(journal["consolidated_entry_ids"])
    candidates = []
    for entry in journal["entries"]:
        if entry["id"] in consolidated or is_synthesis(entry):
            continue
        moment = parse_iso(entry.get("timestamp"))
        if entry.get("importance", 10) <= max_importance and moment and moment < cutoff:
            candidates.append(entry["id"])
    return candidates


# ----------------------------------------------------------------------------------------------
# The owner


class Journal:
    """
    The journal of one assistant: the only code that reads or writes `documents.JOURNAL`.

    Cheap to build (`Journal(ports)`, or `npc.assistant.journal` in a game): it keeps nothing
    and reads the document afresh on every call, so async code may hold one across a yield.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    # -- reading

    def document(self):
        """The whole journal document (to read: `entries`, `entry_count`, ...)."""
        return get_journal(self.ports)

    def entries(self):
        """
        Returns:
            list: Every entry still in the journal, oldest first.
        """
        return get_journal(self.ports)["entries"]

    def entry(self, entry_id):
        """
        Returns:
            dict or None: The entry with this id, if it is still in the journal.
        """
        for entry in self.entries():
            if entry.get("id") == entry_id:
                return entry
        return None

    def consolidated_ids(self):
        """
        Returns:
            list: Ids of the entries already moved to the semantic tier.
        """
        return list(get_journal(self.ports)["consolidated_entry_ids"])

    def unconsolidated(self):
        """
        Returns:
            list: Entries not yet moved to the semantic tier, oldest first, [SYNTHESIS]
            excluded.
        """
        journal = get_journal(self.ports)
        done = set(journal["consolidated_entry_ids"])
        return [e for e in journal["entries"] if e["id"] not in done and not is_synthesis(e)]

    # -- writing

    def _save(self, journal, change=None):
        """
        Store the document; `change` says what changed (`plumbing.state_changes`), None for
        a write that changed too much to say. `get_journal` may have set `max_entries` from
        the settings: every change sets it too.
        """
        if change is not None:
            change = [changes.assign(("max_entries",), journal["max_entries"]), *change]
        self.ports.state.set(documents.JOURNAL, journal, change=change)

    def add(self, content, *, tags=None, related_projects=None, source_type="observation",
            source_trust=None, source_entity=None, importance=None, evidence=None,
            count_for_reflection=True, audience=PUBLIC, provenance=None):
        """
        Write a journal entry (the specification's `add_journal_entry`).

        Args:
            content (str): The narrative text (at most `journal.max_content_chars`).
            tags (list[str], optional): Labels for filtering.
            related_projects (list[str], optional): Project keys it concerns.
            source_type (str): direct, observation, inference or environmental.
            source_trust (float, optional): 0.0-1.0; defaults by source type (0.9/0.8/0.6/0.3).
            source_entity (str, optional): Who provided the information.
            importance (int, optional): 1-10 ("manual"); scored by heuristic when omitted.
            evidence (list, optional): Ids a synthesis cites.
            count_for_reflection (bool): Add its importance to the reflection state.
            audience (str, optional): The stable id of the one person it was told to in private
                (a whisper's speaker); `PUBLIC` (None) for what the room heard.
            provenance (dict, optional): Where it came from (`memory.provenance`); its trust
                and speaker replace `source_trust` and `source_entity`. Left out, it is read
                from the source fields.

        Returns:
            dict: The stored entry. A full journal is auto-pruned afterwards (see the module
            doc), which in the rare case of a trivial entry in a full journal may remove the
            entry itself.

        Raises:
            JournalError: If a field is invalid; nothing is changed then.
        """
        fields = validate_entry_fields(
            self.ports.settings, content, tags, related_projects, source_type, source_trust,
            source_entity, importance,
        )
        if audience is not PUBLIC:
            audience = str(audience).strip() or PUBLIC
        older = {"evidence": evidence or ()} | ({} if audience is PUBLIC else
                                                {"audience": audience})
        try:
            fields["provenance"] = provenance_model.settle(fields, provenance, **older)
        except provenance_model.ProvenanceError as err:
            raise JournalError(f"provenance: {err}") from None
        journal = get_journal(self.ports)
        entry = _new_entry(self.ports.clock.now(), journal, fields, evidence, self.ports.settings)
        if audience is not PUBLIC:
            entry["audience"] = audience
        journal["entry_count"] = entry["id"]
        journal["entries"].append(entry)
        pruned = auto_prune(journal)
        self._save(journal, [changes.assign(("entry_count",), entry["id"]),
                             changes.append(("entries",), entry), *removal(pruned)])
        if count_for_reflection:
            ReflectionState(self.ports).count(entry["importance"], entry["id"])
        return entry

    def update(self, fields_by_id):
        """
        Set fields of several entries in place (scores, extracted facts, flags), in one write.

        Args:
            fields_by_id (dict): `{entry id: {field: value}}`; ids no longer in the journal
                are skipped.

        Returns:
            list: The ids changed.
        """
        journal = get_journal(self.ports)
        changed = []
        for entry in journal["entries"]:
            if entry.get("id") in fields_by_id:
                entry.update(fields_by_id[entry["id"]])
                changed.append(entry["id"])
        if changed:
            self._save(journal, [changes.merge(("entries",), "id", entry_id,
                                               fields_by_id[entry_id])
                                 for entry_id in changed])
        return changed

    def replace(self, entry_id, change):
        """
        Replace an entry by a changed copy, so every cached view of the old one is dropped.

        Args:
            entry_id (int): The entry.
            change (callable): `change(copy)` changes the copy in place.

        Returns:
            dict: The new entry.

        Raises:
            JournalError: When there is no such entry.
        """
        journal = get_journal(self.ports)
        for position, entry in enumerate(journal["entries"]):
            if entry.get("id") == entry_id:
                entry = dict(entry)
                change(entry)
                journal["entries"][position] = entry
                self._save(journal)
                return entry
        raise JournalError(f"there is no journal entry #{entry_id}")

    def remove(self, entry_id):
        """
        Remove an entry (and its consolidated mark).

        Returns:
            dict: The entry removed.

        Raises:
            JournalError: When there is no such entry.
        """
        journal = get_journal(self.ports)
        for position, entry in enumerate(journal["entries"]):
            if entry.get("id") == entry_id:
                removed = journal["entries"].pop(position)
                _forget_consolidated(journal, [entry_id])
                self._save(journal, removal([entry_id]))
                return removed
        raise JournalError(f"there is no journal entry #{entry_id}")

    def restore(self, entry, *, consolidated=False):
        """
        Put a removed entry back in its place by id (undoing a staff deletion).

        Args:
            entry (dict): The entry as `remove` returned it.
            consolidated (bool): It was marked consolidated before it was removed.

        Raises:
            JournalError: When an entry with its id is in the journal already.
        """
        journal = get_journal(self.ports)
        if any(existing.get("id") == entry["id"] for existing in journal["entries"]):
            raise JournalError(f"journal entry #{entry['id']} is there already")
        journal["entries"].append(dict(entry))
        journal["entries"].sort(key=lambda existing: existing.get("id") or 0)
        if consolidated:
            journal["consolidated_entry_ids"].append(entry["id"])
        self._save(journal)

    def mark_consolidated(self, entry_ids):
        """
        Record that entries were moved to the semantic tier (used by sleep consolidation).

        Args:
            entry_ids (iterable): Ids now consolidated; already-marked ones are left alone.

        Returns:
            list: The ids newly marked.
        """
        journal = get_journal(self.ports)
        present = {entry["id"] for entry in journal["entries"]}
        marked = journal["consolidated_entry_ids"]
        new = [i for i in dict.fromkeys(entry_ids) if i in present and i not in marked]
        if new:
            marked.extend(new)
            self._save(journal, [changes.extend(("consolidated_entry_ids",), new)])
        return new

    def mark_reflected(self):
        """Record that a reflection ran now (`last_reflection`)."""
        journal = get_journal(self.ports)
        journal["last_reflection"] = iso(self.ports.clock.now())
        self._save(journal, [changes.assign(("last_reflection",), journal["last_reflection"])])

    def set_importance(self, entry_id, importance):
        """
        Set an entry's importance by hand (method "manual"), e.g. from an admin command.

        Returns:
            dict: The entry.

        Raises:
            JournalError: Unknown entry or importance out of range.
        """
        importance = validate_importance(importance)
        if entry_id not in {entry.get("id") for entry in self.entries()}:
            raise JournalError(f"there is no journal entry #{entry_id}")
        self.update({entry_id: {"importance": importance, "importance_method": "manual"}})
        return self.entry(entry_id)

    def prune_low_importance(self, *, max_importance=None, max_age_days=None, limit=None):
        """
        Remove old, unimportant entries (a dreaming-phase step: the journal lifecycle).

        An entry goes when its importance is at most `journal.prune_importance` (3) AND it is
        older than `journal.prune_age_days` (30), oldest first, at most `journal.prune_batch`
        (10) per call. Consolidated entries and [SYNTHESIS] entries are preserved.

        Args:
            max_importance (int, optional), max_age_days (float, optional), limit (int,
                optional): Override the settings.

        Returns:
            dict: `{"pruned": [ids], "remaining_candidates": int, "entries": int}`.
        """
        settings = self.ports.settings
        if max_importance is None:
            max_importance = settings.get("journal.prune_importance")
        if max_age_days is None:
            max_age_days = settings.get("journal.prune_age_days")
        if limit is None:
            limit = settings.get("journal.prune_batch")
        cutoff = self.ports.clock.now() - timedelta(days=max_age_days)
        journal = get_journal(self.ports)
        candidates = _low_importance_candidates(journal, max_importance, cutoff)
        doomed = set(candidates[: max(0, int(limit))])
        if doomed:
            journal["entries"] = [e for e in journal["entries"] if e["id"] not in doomed]
            self._save(journal, [changes.remove(("entries",), sorted(doomed), key="id")])
        return {
            "pruned": [i for i in candidates if i in doomed],
            "remaining_candidates": len(candidates) - len(doomed),
            "entries": len(journal["entries"]),
        }


# ----------------------------------------------------------------------------------------------
# Display


def format_entry(entry):
    """
    One line for admins: `#id time imp(method) source: content`.

    Args:
        entry (dict): A journal entry.

    Returns:
        str: E.g. `#42 2025-12-06 14:30 7(llm) direct/Alice: Player Alice prefers ...`.
    """
    moment = parse_iso(entry.get("timestamp"))
    when = moment.strftime("%Y-%m-%d %H:%M") if moment else "?"
    source = entry.get("source_type") or "?"
    if entry.get("source_entity"):
        source = f"{source}/{entry['source_entity']}"
    content = " ".join(str(entry.get("content", "")).split())
    if len(content) > 160:
        content = content[:157] + "..."
    method = entry.get("importance_method") or "?"
    private = f" (private to {entry['audience']})" if entry.get("audience") else ""
    return (f"#{entry.get('id')} {when} {entry.get('importance')}({method}) {source}{private}: "
            f"{content}")
