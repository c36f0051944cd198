"""
The assistant's own say over its operating mode: `go_to_sleep`.

Choosing to sleep lets the assistant consolidate its memories when it judges the moment right
(a quiet room, a full journal). The switch itself happens on the next tick through
`sleep.modes.take_sleep_request`, so the tool never touches the ticker.
"""

from ai_assistant.sleep import modes
from ai_assistant.tools.registry import Tool, ToolCategory, error_result


class GoToSleepTool(Tool):
    name = "go_to_sleep"
    description = (
        "Fall asleep to consolidate your memories (journal into long-term memory, reflection, "
        "tidying). Do this when things are quiet. You wake when your sleep is done, on "
        "schedule, or when someone urgently needs you."
    )
    parameters = {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "minLength": 1, "maxLength": 300,
                       "description": "Why now."},
        },
        "required": ["reason"],
        "additionalProperties": False,
    }
    category = ToolCategory.TERMINAL
    family = "modes"

    def run(self, ports, reason):
        if modes.mode(ports) == "sleep":
            return error_result("you are already asleep")
        modes.request_sleep(ports, reason)
        return {"success": True, "result": "you will fall asleep in a moment", "reason": reason}
