"""
Session memory tools: persistent facts and patterns.

`add_session_memory` refuses content about the assistant itself with the specification's error
and suggestion; `compact_session_memory` removes duplicates and says what it removed. The work
is done by `ai_assistant.workspace.session_memory`. What `add_session_memory` records is
sourced (`Tool.sourced`): the turn's grant hands it its provenance (an admin's order, the
assistant's own thought, or the word of whom `source_entity` names), never the model's say-so.
"""

from ai_assistant.tools.registry import Tool, ToolCategory, error_result
from ai_assistant.workspace import session_memory
from ai_assistant.workspace.session_memory import SessionMemoryError


class AddSessionMemoryTool(Tool):
    name = "add_session_memory"
    description = (
        "Remember a fact about the world or players, a pattern you noticed in players' "
        "behaviour, or a completed task. Write in third person about the WORLD, PLAYERS or "
        "EVENTS, never about yourself."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "content": {"type": "string", "description": "What to remember (third person)."},
            "memory_type": {
                "type": "string",
                "enum": list(session_memory.MEMORY_TYPES),
                "default": "fact",
            },
            "source_entity": {"type": "string",
                              "description": "Who told you, if someone did (not yourself)."},
        },
        "required": ["content"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "session"
    sourced = True

    def run(self, ports, content, memory_type="fact", source_entity=None, provenance=None,
            **unused):
        try:
            added = session_memory.SessionMemory(ports).add(content, memory_type,
                                                            provenance=provenance)
        except SessionMemoryError as err:
            if err.suggestion:
                return error_result(str(err), suggestion=err.suggestion)
            return error_result(str(err))
        result = {"success": True, **added}
        if not added["added"]:
            result["note"] = "already remembered; not stored twice"
        return result


class CompactSessionMemoryTool(Tool):
    name = "compact_session_memory"
    description = "Consolidate session memory: remove duplicate and near-duplicate entries."
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    category = ToolCategory.SAFE_CHAIN
    family = "session"

    def run(self, ports):
        return {"success": True, **session_memory.SessionMemory(ports).compact()}
