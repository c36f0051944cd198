"""
Self-monitoring and self-modification tools.

`get_system_status` reports context-window usage with an advisory level and the ReAct loop's own
counters; `update_system_prompt` rewrites the assistant's own guidelines (never the admins'
`user_system_prompt`, which no tool can write). The work is done by
`ai_assistant.workspace.status`.
"""

from ai_assistant.tools.registry import SCOPED, Tool, ToolCategory, error_result
from ai_assistant.workspace import status
from ai_assistant.workspace.status import SystemPromptError


class GetSystemStatusTool(Tool):
    name = "get_system_status"
    description = (
        "Check your own resources: context-window token usage with an advisory (normal, "
        "warning, critical), this cycle's iterations and tools, session tool-call counts."
    )
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    category = ToolCategory.SAFE_CHAIN
    family = "status"
    reach = SCOPED

    def run(self, ports):
        return status.system_status(ports)


class UpdateSystemPromptTool(Tool):
    name = "update_system_prompt"
    description = (
        "Rewrite your own behavioural guidelines (your part of the system prompt). The "
        "admins' rules always take precedence and cannot be changed. Give the reason."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "new_prompt": {"type": "string", "description": "The complete new guidelines."},
            "reason": {
                "type": "string",
                "description": "Why the guidelines should change (kept in the change history).",
            },
        },
        "required": ["new_prompt", "reason"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "status"
    # self-modification: an unexpected argument (say, a "target" aimed at the admins' prompt)
    # is refused, never quietly dropped
    strict_arguments = True

    def run(self, ports, new_prompt, reason=None, reasoning=None):
        # execute_tool consumes the generic `reasoning` argument, so the specification's `reasoning`
        # travels as `reason`; a direct caller may still pass `reasoning`.
        try:
            changed = status.update_system_prompt(ports, new_prompt, reason or reasoning)
        except SystemPromptError as err:
            return error_result(str(err))
        return {"success": True, **changed}
