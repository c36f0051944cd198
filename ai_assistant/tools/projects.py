"""
Project tools: pageable context slots for long-running work.

`create_project`, `list_projects` (cached for the tick), `swap_project` (pages the active
project out with a progress note and another one in) and `update_project`. The work is done by
`ai_assistant.workspace.projects`; these tools turn its refusals into clear results.
"""

from ai_assistant.tools.registry import SCOPED, Tool, ToolCategory, error_result
from ai_assistant.workspace import projects
from ai_assistant.workspace.projects import ProjectError


class CreateProjectTool(Tool):
    name = "create_project"
    description = (
        "Create a project slot for a long-running, multi-session task, with a one-line summary "
        "and its initial working context. It becomes the active project if none is active."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "key": {"type": "string", "description": "Short key, e.g. 'build_tavern'."},
            "summary": {"type": "string", "description": "One line: what the project is."},
            "context": {"type": "string", "description": "Initial working context/notes."},
        },
        "required": ["key", "summary"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "projects"

    def run(self, ports, key, summary, context=""):
        try:
            created = projects.Projects(ports).create(key, summary, context)
        except ProjectError as err:
            return error_result(str(err))
        return {
            "success": True,
            "key": created["key"],
            "status": created["slot"]["status"],
            "active": created["active"],
        }


class ListProjectsTool(Tool):
    name = "list_projects"
    description = "List all projects with their summaries and status; the active one is marked."
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    category = ToolCategory.SAFE_CHAIN
    family = "projects"
    reach = SCOPED
    cacheable = True
    cache_ttl = 30.0
    cache_scope = "tick"

    def run(self, ports):
        rows = projects.Projects(ports).all()
        active = next((row["key"] for row in rows if row["active"]), None)
        return {"success": True, "active": active, "count": len(rows), "projects": rows}


class SwapProjectTool(Tool):
    name = "swap_project"
    description = (
        "Switch to another project: the active project's context is replaced by "
        "current_project_update (write where you got to) and it is paused; the other "
        "project's stored context is restored and returned."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "project_key": {"type": "string", "description": "The project to switch to."},
            "current_project_update": {
                "type": "string",
                "description": "Progress notes saved into the project being paged out.",
            },
        },
        "required": ["project_key"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "projects"

    def run(self, ports, project_key, current_project_update=None):
        try:
            swapped = projects.Projects(ports).swap(project_key, current_project_update)
        except ProjectError as err:
            return error_result(str(err))
        result = {"success": True, **swapped}
        if result["note"] is None:
            del result["note"]
        return result


class UpdateProjectTool(Tool):
    name = "update_project"
    description = (
        "Update the active project without swapping: replace its context, change its summary, "
        "or set its status (paused or completed also unloads it)."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "context": {"type": "string", "description": "The new working context."},
            "status": {"type": "string", "enum": list(projects.STATUSES)},
            "summary": {"type": "string", "description": "A new one-line summary."},
        },
    }
    category = ToolCategory.SAFE_CHAIN
    family = "projects"

    def run(self, ports, context=None, status=None, summary=None):
        try:
            updated = projects.Projects(ports).update(context, status, summary)
        except ProjectError as err:
            return error_result(str(err))
        return {
            "success": True,
            "key": updated["key"],
            "status": updated["slot"]["status"],
            "unloaded": updated["unloaded"],
        }
