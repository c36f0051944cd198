"""
The consolidation progress store: which journal entries are on their way into long-term memory.

`ConsolidationProgress` owns `documents.MEMORY_CONSOLIDATION`. Sleep consolidation
(`ai_assistant.sleep.consolidation`) records through it what a crash or reload must not lose:

- `in_flight`: the entries a tick started to store, with when it started;
- `stored`: for each entry not yet marked consolidated, the memory id of each part (fact) already
  in the store, so a re-run after a crash finds it even where the store's lookup does not;
- `extraction_attempts`: the failed or unanswered fact extractions of each entry;
- `stored_total` and `last_run`, for status.

Everything about an entry goes when it is finished (`finish`).
"""

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso


class ConsolidationProgress:
    """
    The progress of consolidation, reached as `ConsolidationProgress(ports)`.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    def document(self):
        """The whole progress document (a fresh dict when none was written)."""
        return self.ports.state.get(documents.MEMORY_CONSOLIDATION, {}) or {}

    def _save(self, progress):
        self.ports.state.set(documents.MEMORY_CONSOLIDATION, progress)

    def start(self, entry_ids):
        """Record `entry_ids` as in flight (kept at the time of their first start)."""
        progress = self.document()
        in_flight = progress.setdefault("in_flight", {})
        now = iso(self.ports.clock.now())
        for entry_id in entry_ids:
            in_flight.setdefault(entry_id, now)
        self._save(progress)

    def in_flight(self):
        """`{entry id: when its storing started}`."""
        return dict(self.document().get("in_flight") or {})

    def extraction_attempts(self):
        """`{entry id: failed or unanswered fact extractions}`."""
        attempts = self.document().get("extraction_attempts")
        return dict(attempts) if isinstance(attempts, dict) else {}

    def count_extraction_failure(self, entry_ids):
        """
        Count one more failed extraction for each of `entry_ids`.

        Returns:
            dict: The attempts after counting.
        """
        progress = dict(self.document())
        attempts = self.extraction_attempts()
        for entry_id in entry_ids:
            attempts[entry_id] = attempts.get(entry_id, 0) + 1
        progress["extraction_attempts"] = attempts
        self._save(progress)
        return attempts

    def record_part(self, entry_id, index, memory_ids):
        """Record, durably, that part `index` of an entry is in the store as `memory_ids[0]`."""
        if not memory_ids:
            return
        progress = self.document()
        progress.setdefault("stored", {}).setdefault(entry_id, {})[str(index)] = memory_ids[0]
        self._save(progress)

    def parts(self, entry_id):
        """`{part index (int): memory id}` recorded for an entry not yet finished."""
        recorded = (self.document().get("stored") or {}).get(entry_id) or {}
        return {int(index): memory_id for index, memory_id in dict(recorded).items()}

    def finish(self, entry_id, stored_count):
        """Forget everything about a finished entry and count the memories it gave."""
        progress = self.document()
        progress.setdefault("in_flight", {}).pop(entry_id, None)
        (progress.get("extraction_attempts") or {}).pop(entry_id, None)
        (progress.get("stored") or {}).pop(entry_id, None)
        progress["stored_total"] = progress.get("stored_total", 0) + stored_count
        progress["last_run"] = iso(self.ports.clock.now())
        self._save(progress)
