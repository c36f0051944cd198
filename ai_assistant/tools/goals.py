"""
Goal tools: hierarchical goals with automatic rollup.

`add_goal` and `update_goal` are plain state changes; `decompose_goal` asks the LLM to split a
goal into 3-7 subtasks (ASYNC_REQUIRED, unavailable in mechanical mode). The work is done by
`ai_assistant.workspace.goals`; these tools turn its refusals into clear results.
"""

from ai_assistant.tools.registry import Tool, ToolCategory, error_result
from ai_assistant.workspace import goals
from ai_assistant.workspace.goals import GoalError


class AddGoalTool(Tool):
    name = "add_goal"
    description = (
        "Add a goal to track, or a subtask of an active goal (give parent_id). "
        "Parent progress is the mean of its subtasks' progress."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "description": {"type": "string", "description": "What is to be achieved."},
            "priority": {"type": "string", "enum": list(goals.PRIORITIES), "default": "medium"},
            "parent_id": {"type": "string", "description": "Id of the goal this is part of."},
        },
        "required": ["description"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "goals"

    def run(self, ports, description, priority="medium", parent_id=None):
        try:
            added = goals.Goals(ports).add(description, priority, parent_id)
        except GoalError as err:
            return error_result(str(err))
        return {"success": True, **added}


class UpdateGoalTool(Tool):
    name = "update_goal"
    description = (
        "Update a goal's status (active, completed, abandoned) and/or progress (0-100, for "
        "goals without subtasks). Parent goals are recalculated automatically."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "goal_id": {"type": "string", "description": "E.g. 'goal_42_1'."},
            "status": {"type": "string", "enum": list(goals.STATUSES)},
            "progress": {"type": "number", "minimum": 0, "maximum": 100},
        },
        "required": ["goal_id"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "goals"

    def run(self, ports, goal_id, status=None, progress=None):
        try:
            updated = goals.Goals(ports).update(goal_id, status, progress)
        except GoalError as err:
            return error_result(str(err))
        return {"success": True, **updated}


class DecomposeGoalTool(Tool):
    name = "decompose_goal"
    description = (
        "Break an active goal that has no subtasks yet into 3-7 concrete subtasks "
        "(they are added under it)."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"goal_id": {"type": "string", "description": "The goal to split."}},
        "required": ["goal_id"],
    }
    category = ToolCategory.ASYNC_REQUIRED
    family = "goals"
    timeout = 120.0  # one LLM call, retries included

    def run(self, ports, goal_id):
        def _refused(failure):
            failure.trap(GoalError)
            return error_result(failure.getErrorMessage())

        deferred = goals.Goals(ports).decompose(goal_id)
        deferred.addCallbacks(lambda done: {"success": True, **done}, _refused)
        return deferred
