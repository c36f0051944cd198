"""
`run_sleep_tick`: the one orchestrator of a sleep tick.

Compacting phase: LLM importance scoring, then journal -> semantic consolidation; when the
consolidation reports `completed`, the phase moves to dreaming. Wake is deferred meanwhile.

Dreaming phase, in order, every tick: A-MEM link generation, orphan link pruning (and the
links' bound), entity consolidation, entity pruning (forgetting passers-by), reflection (when
the importance threshold is reached), episodic pruning, stale conversation cleanup,
pre-compaction extraction, context compaction, and the memory patrol.

Every step is bounded per tick by its own settings, reports what it did, and a failing step is
recorded without stopping the others. After the steps, wake conditions are checked. The whole
report is kept as the last sleep tick (`workspace.mode.Mode.record_sleep_tick`) for
`@assistant` status.
"""

from twisted.internet import defer

from ai_assistant.memory.conversation import clear_stale_conversations
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.plumbing.ports import iso
from ai_assistant.sleep import modes, reports
from ai_assistant.sleep.compaction import (
    compact_conversation_history,
    run_pre_compaction_extraction,
)
from ai_assistant.sleep.consolidation import run_sleep_consolidation
from ai_assistant.sleep.entity_consolidation import run_entity_consolidation_batch
from ai_assistant.sleep.linking import run_dreaming_tick, run_link_cleanup
from ai_assistant.sleep.patrol import run_patrol_if_due
from ai_assistant.sleep.reflection import run_reflection_if_triggered
from ai_assistant.sleep.scoring import score_pending_entries
from ai_assistant.workspace.mode import Mode

# (report name, step): each step is `step(ports) -> report or Deferred[report]`, run in order.
COMPACTING_STEPS = (
    ("importance_scoring", score_pending_entries),
    ("consolidation", run_sleep_consolidation),
)
DREAMING_STEPS = (
    ("memory_links", run_dreaming_tick),
    ("link_cleanup", run_link_cleanup),
    ("entity_consolidation", run_entity_consolidation_batch),
    ("entity_pruning", lambda ports: People(ports).prune()),
    ("reflection", run_reflection_if_triggered),
    ("episodic_pruning", lambda ports: Journal(ports).prune_low_importance()),
    ("stale_conversations", clear_stale_conversations),
    ("pre_compaction", run_pre_compaction_extraction),
    ("context_compaction", compact_conversation_history),
    ("patrol", run_patrol_if_due),
)

# Steps that give the assistant a ReAct pass: they are handed the agent's cycle as `run_cycle`
# (the sleep layer never imports the agent).
RUNS_A_CYCLE = (run_pre_compaction_extraction,)


def _woken(ports):
    """True once the assistant was woken (a forced wake can come while a tick runs)."""
    return Mode(ports).recorded() == "awake"


@defer.inlineCallbacks
def run_steps(ports, steps, *, run_cycle=None):
    """
    Run steps in order; each failure is recorded and the next step still runs.

    Args:
        ports (AssistantPorts): The assistant.
        steps (iterable): `(report name, step)` pairs.
        run_cycle (callable, optional): The agent's ReAct cycle, for the steps in
            `RUNS_A_CYCLE`.

    Returns:
        Deferred[dict]: `{step name: its report}`; a failed step reports `{"error": ...}`.
    """
    report = {}
    for name, step in steps:
        if _woken(ports):
            # woken while the tick ran (a forced wake): the rest waits for the next sleep
            report["interrupted"] = f"woken before {name}"
            break
        extra = {"run_cycle": run_cycle} if step in RUNS_A_CYCLE else {}
        try:
            report[name] = yield defer.maybeDeferred(step, ports, **extra)
        except Exception as err:  # one broken step must not stop the others
            ports.log(f"{ports.name}: sleep step {name} failed: {err}")
            report[name] = {"error": str(err) or type(err).__name__}
    return report


@defer.inlineCallbacks
def run_sleep_tick(ports, transition, *, run_cycle=None):
    """
    One sleep tick.

    Args:
        ports (AssistantPorts): The assistant.
        transition (callable): The shell's `transition(target, reason)` (for waking).
        run_cycle (callable, optional): The agent's ReAct cycle (normally
            `agent.react.run_react_cycle`), for the pre-compaction extraction pass; without
            it that pass reports that it did not run.

    Returns:
        Deferred[dict]: `{"phase", "steps": {...}, "woke": reason or None, "time"}`.
    """
    state = Mode(ports)
    phase = state.phase() or modes.COMPACTING
    asleep = state.count_sleep_tick()

    if phase == modes.COMPACTING:
        steps = yield run_steps(ports, COMPACTING_STEPS, run_cycle=run_cycle)
        consolidation = steps.get("consolidation")
        # without a consolidation step (no semantic tier) there is nothing to wait for
        if not _woken(ports) and (
                consolidation is None
                or (isinstance(consolidation, dict) and consolidation.get("completed"))):
            state.set_phase(modes.DREAMING)
    else:
        steps = yield run_steps(ports, DREAMING_STEPS, run_cycle=run_cycle)

    report = {"phase": phase, "steps": steps, "woke": None, "time": iso(ports.clock.now())}
    should_wake, reason, deferred = modes.check_wake_conditions(ports)
    if should_wake and not deferred:
        modes.perform_wake_transition(ports, reason, transition)
        report["woke"] = reason
    elif should_wake:
        report["wake_deferred"] = reason
    state.record_sleep_tick(report)
    reports.note_sleep_tick(ports, report, asleep)  # what this whole sleep changed, so far
    return report
