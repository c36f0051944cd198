"""
`run_sleep_tick`: the one orchestrator of a sleep tick (seed 002, "Sleep Tick Flow").

Compacting phase: LLM importance scoring, then journal -> semantic consolidation; when the
consolidation reports `completed`, the phase moves to dreaming. Wake is deferred meanwhile.

Dreaming phase, in order, every tick: A-MEM link generation, orphan link pruning, entity
consolidation, reflection (when the importance threshold is reached), episodic pruning, stale
conversation cleanup, pre-compaction extraction, context compaction, and the memory patrol.

Every step is bounded per tick by its own settings, reports what it did, and a failing step is
recorded without stopping the others. After the steps, wake conditions are checked. The whole
report is kept in the state doc "last_sleep_tick" for `@assistant` status.
"""

import importlib

from twisted.internet import defer

from ai_assistant.plumbing.ports import iso
from ai_assistant.sleep import modes

# (report name, "module:function") - looked up at run time so each step lives in the module
# named after its concept, and a game can see the whole sequence here.
COMPACTING_STEPS = (
    ("importance_scoring", "ai_assistant.memory.importance:score_pending_entries"),
    ("consolidation", "ai_assistant.memory.consolidation:run_sleep_consolidation"),
)
DREAMING_STEPS = (
    ("memory_links", "ai_assistant.memory.links:run_dreaming_tick"),
    ("link_cleanup", "ai_assistant.memory.links:prune_orphaned_memory_links"),
    ("entity_consolidation", "ai_assistant.memory.entities:run_entity_consolidation_batch"),
    ("reflection", "ai_assistant.memory.reflection:run_reflection_if_triggered"),
    ("episodic_pruning", "ai_assistant.memory.journal:prune_low_importance_entries"),
    ("stale_conversations", "ai_assistant.memory.working:clear_stale_conversations"),
    ("pre_compaction", "ai_assistant.agent.compaction:run_pre_compaction_extraction"),
    ("context_compaction", "ai_assistant.agent.compaction:compact_conversation_history"),
    ("patrol", "ai_assistant.memory.patrol:run_patrol_if_due"),
)


def resolve(path):
    """
    Args:
        path (str): "package.module:function".

    Returns:
        callable or None: None when that module is not part of this installation.
    """
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name == module_name:
            return None
        raise
    return getattr(module, attribute, None)


@defer.inlineCallbacks
def run_steps(ports, steps):
    """
    Run steps in order; each failure is recorded and the next step still runs.

    Returns:
        Deferred[dict]: `{step name: its report}`; a failed step reports `{"error": ...}`.
    """
    report = {}
    for name, path in steps:
        step = resolve(path)
        if step is None:
            continue
        try:
            report[name] = yield defer.maybeDeferred(step, ports)
        except Exception as err:  # one broken step must not stop the others
            ports.log(f"{ports.name}: sleep step {name} failed: {err}")
            report[name] = {"error": str(err) or type(err).__name__}
    return report


@defer.inlineCallbacks
def run_sleep_tick(ports, transition):
    """
    One sleep tick.

    Args:
        ports (AssistantPorts): The assistant.
        transition (callable): The shell's `transition(target, reason)` (for waking).

    Returns:
        Deferred[dict]: `{"phase", "steps": {...}, "woke": reason or None, "time"}`.
    """
    phase = ports.state.get("sleep_phase") or modes.COMPACTING
    sleep_state = dict(ports.state.get("sleep_state") or {})
    sleep_state["ticks"] = sleep_state.get("ticks", 0) + 1
    ports.state.set("sleep_state", sleep_state)

    if phase == modes.COMPACTING:
        steps = yield run_steps(ports, COMPACTING_STEPS)
        consolidation = steps.get("consolidation")
        # without a consolidation step (no semantic tier) there is nothing to wait for
        if consolidation is None or (isinstance(consolidation, dict)
                                     and consolidation.get("completed")):
            ports.state.set("sleep_phase", modes.DREAMING)
    else:
        steps = yield run_steps(ports, DREAMING_STEPS)

    report = {"phase": phase, "steps": steps, "woke": None, "time": iso(ports.clock.now())}
    should_wake, reason, deferred = modes.check_wake_conditions(ports)
    if should_wake and not deferred:
        modes.perform_wake_transition(ports, reason, transition)
        report["woke"] = reason
    elif should_wake:
        report["wake_deferred"] = reason
    ports.state.set("last_sleep_tick", report)
    return report
