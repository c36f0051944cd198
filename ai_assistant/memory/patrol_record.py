"""
What the memory patrol keeps between its runs: the diary, the think notes and its own record.

`PatrolRecord` owns three documents (`plumbing.documents`):

- `DIARY`: `{"YYYY-MM-DD": {"date", "text", "updated_at", "provenance"}}`, one entry a day,
  the last `nodes.diary_kept` days;
- `THINK_NOTES`: `{"text", "bullets", "updated_at", "provenance"}`, the notes distilled for the
  next day;
- `PATROL_STATE`: `{"runs", "last_run_at", "last_report", "last_sleep", "diary_pending"}`, its
  runs, the sleep it last patrolled and the nodes still waiting for the diary.

The patrol (`sleep.patrol`) writes them; the prompt (`agent.blocks.memory_nodes`) and the status
text (`workspace.status`) read them, so it sits below both.

The diary and the think notes are the assistant's own writing about the scenes of its memory
nodes: each records its `provenance` (`memory.provenance`), derived from those nodes (the patrol
passes it), so what rests on a player's word stays theirs; one written before provenance
existed reads as the assistant's own thought (`provenance_of`).
"""

from ai_assistant.memory import provenance as provenance_model
from ai_assistant.plumbing import documents


def provenance_of(record):
    """The provenance of a diary entry or the think notes: its own, or the assistant's."""
    if isinstance((record or {}).get(provenance_model.KEY), dict):
        return provenance_model.of(record)
    return provenance_model.build(provenance_model.CHANNEL_OWN,
                                  trust=provenance_model.INFERENCE_TRUST)


class PatrolRecord:
    """
    The diary, the think notes and the patrol's record of one assistant, read fresh from its
    state on every call.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports
        self.state = ports.state

    # --- the diary and the think notes ------------------------------------------------------

    def diary(self):
        """The diary by date: `{"YYYY-MM-DD": {"date", "text", "updated_at"}}`."""
        return dict(self.state.get(documents.DIARY, None) or {})

    def write_diary(self, date, text, stamp, provenance=None):
        """
        Write the entry of `date` (replacing one written earlier that day) and keep only the
        last `nodes.diary_kept` days.

        Args:
            date (str): "YYYY-MM-DD".
            text (str): The entry.
            stamp (str): When it was written (ISO text).
            provenance (dict, optional): What it was written from (`memory.provenance`); the
                assistant's own thought when left out.
        """
        diary = self.diary()
        diary[date] = {"date": date, "text": text, "updated_at": stamp,
                       provenance_model.KEY: _checked(provenance)}
        for old in sorted(diary)[:-int(self.ports.settings.get("nodes.diary_kept"))]:
            del diary[old]
        self.state.set(documents.DIARY, diary)

    def think_notes(self):
        """The think notes, `{"text", "bullets", "updated_at"}`, or {} before the first."""
        return dict(self.state.get(documents.THINK_NOTES, None) or {})

    def write_think_notes(self, bullets, stamp, provenance=None):
        """
        Replace the think notes with `bullets` (a list of short strings), recording what they
        were written from (`provenance`; the assistant's own thought when left out).
        """
        self.state.set(documents.THINK_NOTES, {
            "text": "\n".join(f"- {bullet}" for bullet in bullets),
            "bullets": bullets,
            "updated_at": stamp,
            provenance_model.KEY: _checked(provenance),
        })

    # --- the patrol's own record -----------------------------------------------------------

    def _read(self):
        return dict(self.state.get(documents.PATROL_STATE, None) or {})

    def _write(self, **changes):
        record = self._read()
        record.update(changes)
        self.state.set(documents.PATROL_STATE, record)

    def last_run_at(self):
        """When the last patrol finished (ISO text), or None."""
        return self._read().get("last_run_at")

    def record_run(self, report):
        """Count a finished patrol and keep its report."""
        self._write(last_run_at=report["finished_at"], runs=int(self._read().get("runs", 0)) + 1,
                    last_report=report)

    def patrolled_sleep(self):
        """The start (`started_at`) of the sleep the patrol last ran in, or None."""
        return self._read().get("last_sleep")

    def mark_sleep_patrolled(self, sleep_started):
        """Record that the sleep started at `sleep_started` was patrolled."""
        self._write(last_sleep=sleep_started)

    def diary_pending(self):
        """Ids of the nodes filed since the last diary, oldest first."""
        return list(self._read().get("diary_pending") or [])

    def queue_for_diary(self, node_ids):
        """Add nodes for the next diary (each once)."""
        pending = self.diary_pending()
        self._write(diary_pending=pending + [i for i in node_ids if i not in pending])

    def written_in_diary(self, node_ids):
        """Take the nodes a diary was written about off the queue."""
        written = set(node_ids)
        self._write(diary_pending=[i for i in self.diary_pending() if i not in written])

    def clear_diary_pending(self):
        """Empty the diary's queue (nothing in it can be written about)."""
        self._write(diary_pending=[])


def _checked(provenance):
    return provenance_of(None) if provenance is None else provenance_model.validate(provenance)
