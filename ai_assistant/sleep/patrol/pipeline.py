"""
The memory patrol: the order of its steps, and when it runs.

    1. scene notes -> nodes, embedded in one batch, filed in the best cluster (cosine >=
       threshold) or classified Business/Private by the LLM (Business in mechanical mode)
    2. session counts +1 for every active node
    3. dying: active nodes with eff_imp <= dying_threshold (pinned nodes never decay)
    4. consolidation of clusters holding fresh or dying nodes (LLM: merges, make_dead)
    5. revival of nodes whose eff_imp rose above the threshold again (recalls lift it)
    6. split of clusters with more than split_min_active active nodes (LLM)
    7. the graph's bound: past nodes.max_nodes, dead, then dying, then the least important
       unpinned nodes are dropped (`archive`)
    8. mechanical merge of small sub-clusters into their most similar sibling, else their root
    then the diary entry (3-5 lines, today) and think notes (3-7 bullets) (LLM)

Without an LLM (mechanical mode) consolidation, split, diary and think notes are skipped, with
one log line (`MECHANICAL_LOG`).

Every step follows the core's rule: yield the port calls (embedding in the thread pool, LLM
calls) first, then read state, change it and `set` it with no yield in between. A failed LLM
call leaves the nodes as they were (fresh flags stay set, notes stay queued), so the next
patrol retries. The patrol runs once per sleep, in the dreaming phase (`run_patrol_if_due`),
or on demand (`run_patrol`, for `@assistant/patrol <npc>`).
"""

from twisted.internet import defer

from ai_assistant.memory.nodes import Nodes
from ai_assistant.memory.patrol_record import PatrolRecord
from ai_assistant.sleep.patrol.archive import bound_node_graph
from ai_assistant.sleep.patrol.clusters import (
    consolidate_clusters,
    merge_small_clusters,
    split_large_clusters,
)
from ai_assistant.sleep.patrol.decay import (
    flag_dying_nodes,
    increment_session_counts,
    revive_nodes,
)
from ai_assistant.sleep.patrol.diary import write_diary_and_think
from ai_assistant.sleep.patrol.graph import now_iso
from ai_assistant.sleep.patrol.scene_notes import convert_scene_notes
from ai_assistant.workspace.mode import Mode

MECHANICAL_LOG = (
    "[graph] no LLM configured: skipping consolidation, split, the diary and the think notes "
    "(mechanical processing only)"
)


def _steps(ports, embedder, runner):
    """The patrol's steps in order: `(report name, callable)`."""
    kwargs = {"embedder": embedder, "runner": runner}
    return (
        ("notes", lambda: convert_scene_notes(ports, **kwargs)),
        ("session_counts", lambda: increment_session_counts(ports)),
        ("dying", lambda: flag_dying_nodes(ports)),
        ("consolidation", lambda: consolidate_clusters(ports, **kwargs)),
        ("revival", lambda: revive_nodes(ports)),
        ("split", lambda: split_large_clusters(ports)),
        ("bound", lambda: bound_node_graph(ports)),
        ("small_clusters", lambda: merge_small_clusters(ports, embedder=embedder)),
        ("diary", lambda: write_diary_and_think(ports)),
    )


@defer.inlineCallbacks
def run_patrol(ports, *, embedder=None, runner=None):
    """
    Run the whole patrol now (every step, then the diary and think notes). A step that fails is
    reported and the next still runs; a second patrol for the same assistant while one runs is
    refused.

    Args:
        ports (AssistantPorts): The assistant.
        embedder (LocalEmbedder, optional): Overrides the configured embedder.
        runner (callable, optional): Runs embedding calls; the thread pool by default.

    Returns:
        Deferred[dict]: The report, step by step (as text: `workspace.status`).
    """
    if ports.runtime.patrol_running:
        return {"skipped": "a patrol is already running for this assistant"}
    ports.runtime.patrol_running = True
    try:
        report = {"started_at": now_iso(ports), "mechanical": ports.mechanical, "steps": {}}
        if ports.mechanical:
            ports.log(MECHANICAL_LOG)
        for name, step in _steps(ports, embedder, runner):
            try:
                report["steps"][name] = yield defer.maybeDeferred(step)
            except Exception as err:  # one failing step must not stop the others
                ports.log(f"{ports.name}: patrol step {name} failed: {err}")
                report["steps"][name] = {"error": str(err) or type(err).__name__}
        report["finished_at"] = now_iso(ports)
        PatrolRecord(ports).record_run(report)
        return report
    finally:
        ports.runtime.patrol_running = False


def run_patrol_if_due(ports):
    """
    The dreaming-phase entry point: patrol once per sleep, when there is anything to patrol.

    The sleep is identified by when it started (`workspace.mode.Mode.sleep_state`); the patrol
    records the sleep it ran for (`memory.patrol_record`), so later dreaming ticks of the same
    sleep skip it.

    Returns:
        Deferred[dict]: The patrol report, or `{"skipped": reason}`.
    """
    sleep_started = Mode(ports).sleep_state().get("started_at")
    if not sleep_started:
        return defer.succeed({"skipped": "not asleep"})
    if PatrolRecord(ports).patrolled_sleep() == sleep_started:
        return defer.succeed({"skipped": "already patrolled this sleep"})
    graph = Nodes(ports)
    has_notes = any(n.get("type", "scene") == "scene" for n in graph.scene_notes())
    if not has_notes and not graph.stored():
        return defer.succeed({"skipped": "nothing to patrol"})

    def _record(report):
        if not report.get("skipped"):
            PatrolRecord(ports).mark_sleep_patrolled(sleep_started)
        return report

    return run_patrol(ports).addCallback(_record)
