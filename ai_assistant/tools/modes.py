"""
The assistant's own say over its operating mode: `go_to_sleep`.

Choosing to sleep lets the assistant consolidate its memories when it judges the moment right
(a quiet room, a full journal). The tool only records the wish (`workspace.mode`); the switch
itself happens on the next tick (`sleep.modes.take_sleep_request`), so the tool never touches
the ticker. It has lasting effects (the assistant is silent while asleep), so a player's words
never run it (`tools.agency`), and it is refused for `sleep.go_to_sleep_cooldown_minutes`
after the assistant last fell asleep (the mode history says when) or asked to.
"""

from ai_assistant.plumbing.ports import parse_iso
from ai_assistant.tools.registry import Tool, ToolCategory, error_result
from ai_assistant.workspace.mode import Mode


def last_fell_asleep(ports):
    """When the assistant last fell asleep or asked to (a datetime), or None."""
    mode = Mode(ports)
    moments = [parse_iso(change.get("time"))
               for change in mode.history()
               if isinstance(change, dict) and change.get("to") == "sleep"]
    request = mode.sleep_request()
    if isinstance(request, dict):
        moments.append(parse_iso(request.get("time")))
    moments = [moment for moment in moments if moment is not None]
    return max(moments) if moments else None


def cooldown_left(ports):
    """Minutes before `go_to_sleep` may run again (0 when it may now)."""
    minutes = float(ports.settings.get("sleep.go_to_sleep_cooldown_minutes"))
    last = last_fell_asleep(ports)
    if last is None or minutes <= 0:
        return 0.0
    elapsed = (ports.clock.now() - last).total_seconds() / 60.0
    return max(0.0, minutes - elapsed)


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
        mode = Mode(ports)
        if mode.asleep():
            return error_result("you are already asleep")
        left = cooldown_left(ports)
        if left > 0:
            return error_result(f"you slept only recently: you may choose to sleep again in "
                                f"{left:.0f} minute(s)", cooldown_minutes=round(left, 1))
        mode.request_sleep(reason)
        return {"success": True, "result": "you will fall asleep in a moment", "reason": reason}
