"""
World tools: how the assistant speaks and looks around, through `ports.world`.

Speaking to the room (`say`, `emote`) ends the assistant's turn (TERMINAL). A private aside
(`whisper`, or its alias `page`) does not: the assistant may whisper to one person and still
answer the room in the same turn, so it is SAFE_CHAIN. `inspect_location` is read-only and
cached for the tick. `noop` is the explicit "nothing to do" that ends a quiet turn.
"""

from ai_assistant.tools.registry import (
    CONVERSATION,
    SCOPED,
    WORKSPACE,
    Tool,
    ToolCategory,
    error_result,
)

MAX_MESSAGE_CHARS = 2000
MAX_TARGET_CHARS = 80


def _check_text(value, what, limit=MAX_MESSAGE_CHARS):
    """None when `value` is usable text, else a clear error message."""
    if not isinstance(value, str) or not value.strip():
        return f"{what} is empty; give the text to use"
    if len(value) > limit:
        return f"{what} is too long ({len(value)} characters; the limit is {limit})"
    return None


def _no_body(ports):
    return error_result(f"{ports.name} has no body in the game right now")


class SayTool(Tool):
    name = "say"
    description = "Say something out loud to everyone in the room. Ends your turn."
    parameters = {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    }
    category = ToolCategory.TERMINAL
    family = "world"
    reach = SCOPED
    kit = CONVERSATION

    def run(self, ports, message):
        error = _check_text(message, "message")
        if error:
            return error_result(error)
        if ports.world is None:
            return _no_body(ports)
        text = message.strip()
        ports.world.say(text)
        return {"success": True, "said": text}


class EmoteTool(Tool):
    name = "emote"
    description = "A visible action, e.g. 'nods slowly.' (after your name). Ends your turn."
    parameters = {
        "type": "object",
        "properties": {"action": {"type": "string"}},
        "required": ["action"],
    }
    category = ToolCategory.TERMINAL
    family = "world"
    reach = SCOPED
    kit = CONVERSATION

    def run(self, ports, action):
        error = _check_text(action, "action")
        if error:
            return error_result(error)
        if ports.world is None:
            return _no_body(ports)
        text = action.strip()
        ports.world.emote(text)
        return {"success": True, "emoted": text}


class WhisperTool(Tool):
    name = "whisper"
    description = "Say something privately to one character here. Does not end your turn."
    parameters = {
        "type": "object",
        "properties": {
            "target": {"type": "string", "description": "Their name."},
            "message": {"type": "string"},
        },
        "required": ["target", "message"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "world"
    reach = SCOPED
    recipient_argument = "target"
    kit = CONVERSATION

    def run(self, ports, target, message):
        error = _check_text(target, "target", MAX_TARGET_CHARS) or _check_text(message, "message")
        if error:
            return error_result(error)
        if ports.world is None:
            return _no_body(ports)
        target, text = target.strip(), message.strip()
        reason = ports.world.whisper(target, text)
        if reason:
            present = [person.get("name") for person in (ports.world.present() or [])]
            return error_result(
                f"could not {self.name} to '{target}': {reason}",
                present=[name for name in present if name],
            )
        return {"success": True, "target": target, "message": text}


class PageTool(WhisperTool):
    name = "page"
    description = "Send a private message to one character (the same as whisper)."
    kit = WORKSPACE  # offered with the full set; in a conversation `whisper` does the same


class InspectLocationTool(Tool):
    name = "inspect_location"
    description = "Look around: where you are, the exits, objects and who is present."
    parameters = {"type": "object", "properties": {}}
    category = ToolCategory.SAFE_CHAIN
    family = "world"
    reach = SCOPED
    kit = CONVERSATION
    cacheable = True
    cache_ttl = 60.0
    cache_scope = "tick"

    def run(self, ports):
        if ports.world is None:
            return _no_body(ports)
        return {
            "success": True,
            "location": ports.world.describe_location() or {},
            "present": ports.world.present() or [],
        }


class NoopTool(Tool):
    name = "noop"
    description = "Do nothing this turn (when nothing needs a response). Ends your turn."
    parameters = {"type": "object", "properties": {}}
    category = ToolCategory.TERMINAL
    family = "world"
    reach = SCOPED
    kit = CONVERSATION

    def run(self, ports):
        return {"success": True, "result": "nothing to do"}
