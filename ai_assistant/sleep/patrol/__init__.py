"""
The memory patrol, a step of the sleep cycle: scene notes become memory nodes, nodes decay,
die, merge and revive, clusters split and merge, then the assistant writes its diary and the
think notes its next conversation starts with.

Its modules, one concept each: `pipeline` (the order of the steps and when they run),
`scene_notes`, `decay`, `clusters`, `diary`, the model's `prompts` and the `graph` helpers the
steps share. What it keeps between runs is `memory.patrol_record`; its report as text for
admins is in `workspace.status`.
"""

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
from ai_assistant.sleep.patrol.pipeline import MECHANICAL_LOG, run_patrol, run_patrol_if_due
from ai_assistant.sleep.patrol.scene_notes import convert_scene_notes

__all__ = [
    "MECHANICAL_LOG",
    "run_patrol",
    "run_patrol_if_due",
    "convert_scene_notes",
    "increment_session_counts",
    "flag_dying_nodes",
    "consolidate_clusters",
    "revive_nodes",
    "split_large_clusters",
    "merge_small_clusters",
    "write_diary_and_think",
]
