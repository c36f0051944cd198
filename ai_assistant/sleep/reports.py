"""
What each sleep changed: one compact report per sleep, the last `sleep.reports_kept` kept.

`run_sleep_tick` (`sleep.cycle`) hands every tick's report to `note_sleep_tick`, which adds the
tick's counts to the report of the sleep under way and closes it when the tick woke the
assistant. A sleep that ended outside a tick (an admin's `@assistant/wake`) is closed when the
next sleep starts, with `ended_at` unknown. The document is `documents.SLEEP_REPORTS`:

    {"current": report or None, "recent": [report, ...]}   # oldest first
    report = {"started_at", "ended_at", "reason", "woke", "ticks", "phases": {phase: ticks},
              "counts": {"consolidation.stored": 4, "patrol.revival.revived": 1, ...},
              "errors": ["memory_links: store unavailable", ...]}

`counts` add up, per step and key, what each tick's step reports said: numbers are summed, lists
counted, `True` flags counted (reflection `ran`); snapshot numbers (`remaining`, `pending`, ...)
are not, as they describe the moment rather than what was done. The memory inspector
(`ai_assistant.web`) names the counts it shows ("entries scored", "nodes revived").
"""

from ai_assistant.plumbing import documents

# Step report keys that describe the state at the end of a tick, not work done in it.
SNAPSHOT_KEYS = frozenset({
    "remaining", "remaining_candidates", "pending", "usage", "waiting_for_scoring", "entries",
    "success", "completed", "mechanical", "started_at", "threshold", "ids", "entry_id",
    "entity_id", "tokens_before", "tokens_after",
})
MAX_ERRORS = 10


def _new_report(asleep):
    return {
        "started_at": asleep.get("started_at"),
        "ended_at": None,
        "reason": asleep.get("reason"),
        "woke": None,
        "ticks": 0,
        "phases": {},
        "counts": {},
        "errors": [],
    }


def add_counts(counts, outcomes, prefix=""):
    """
    Add one tick's step reports to `counts` (`{"step.key": n}`), in place.

    Args:
        counts (dict): The running counts.
        outcomes (dict): `{step name: its report}`; a nested `steps` (the patrol's) is walked.
        prefix (str): The dotted path so far.
    """
    for name, outcome in (outcomes or {}).items():
        if not isinstance(outcome, dict):
            continue
        for key, value in outcome.items():
            dotted = f"{prefix}{name}.{key}"
            if key == "steps" and isinstance(value, dict):
                add_counts(counts, value, prefix=f"{prefix}{name}.")
                continue
            if key in SNAPSHOT_KEYS or key == "error":
                continue
            if isinstance(value, bool):
                amount = int(value)
            elif isinstance(value, int | float):
                amount = value
            elif isinstance(value, list | dict):
                amount = len(value)
            else:
                continue
            if amount:
                counts[dotted] = round(counts.get(dotted, 0) + amount, 4)


def _errors(outcomes, prefix=""):
    found = []
    for name, outcome in (outcomes or {}).items():
        if not isinstance(outcome, dict):
            continue
        if outcome.get("error"):
            found.append(f"{prefix}{name}: {outcome['error']}"[:200])
        if isinstance(outcome.get("steps"), dict):
            found += _errors(outcome["steps"], prefix=f"{prefix}{name}.")
    return found


def _close(doc, report, kept):
    recent = list(doc.get("recent") or [])
    recent.append(report)
    doc["recent"] = recent[-max(1, kept):]
    doc["current"] = None


def note_sleep_tick(ports, tick_report, asleep):
    """
    Add a sleep tick's report to the report of the sleep under way (closing it on wake).

    Args:
        ports (AssistantPorts): The assistant.
        tick_report (dict): What `run_sleep_tick` returns: `{"phase", "steps", "woke", "time"}`.
        asleep (dict): The sleep's state as the tick began (`{"started_at", "reason", ...}`;
            a wake clears the stored one).

    Returns:
        dict: The report of this sleep so far (closed when the tick woke it).
    """
    kept = int(ports.settings.get("sleep.reports_kept"))
    doc = dict(ports.state.get(documents.SLEEP_REPORTS, None) or {})
    asleep = asleep or {}
    current = doc.get("current")
    if current and current.get("started_at") != asleep.get("started_at"):
        _close(doc, current, kept)  # that sleep ended outside a tick: when is unknown
        current = None
    report = dict(current or _new_report(asleep))
    report["ticks"] += 1
    phase = str(tick_report.get("phase"))
    report["phases"] = {**report.get("phases", {}), phase: report["phases"].get(phase, 0) + 1}
    report["counts"] = dict(report["counts"])
    add_counts(report["counts"], tick_report.get("steps"))
    report["errors"] = (list(report["errors"]) + _errors(tick_report.get("steps")))[-MAX_ERRORS:]
    if tick_report.get("woke"):
        report["woke"] = tick_report["woke"]
        report["ended_at"] = tick_report.get("time")
        _close(doc, report, kept)
    else:
        doc["current"] = report
    ports.state.set(documents.SLEEP_REPORTS, doc)
    return report


def recent_sleeps(ports, asleep_now):
    """
    The reports of the recent sleeps, newest first.

    Args:
        ports (AssistantPorts): The assistant.
        asleep_now (bool): Whether it sleeps now: the open report is the sleep under way;
            otherwise that sleep ended outside a tick and is shown as ended.

    Returns:
        list[dict]: Reports; the one under way has `"under_way": True`.
    """
    doc = ports.state.get(documents.SLEEP_REPORTS, None) or {}
    reports = [dict(report) for report in doc.get("recent") or ()]
    if doc.get("current"):
        reports.append({**doc["current"], "under_way": bool(asleep_now)})
    return list(reversed(reports))
