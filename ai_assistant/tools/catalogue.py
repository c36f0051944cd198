"""
The catalogue: every tool the assistant can be offered, listed by reference.

Each tool family is a module of this package; its tool classes are named here, in the order of
the families, and `load_all_tools()` puts them in the registry. Adding a tool means writing its
class and naming it below. A game adds its own tools with `registry.register(MyTool)`.
"""

from ai_assistant.tools import (
    goals,
    journal,
    memory,
    modes,
    nodes,
    projects,
    session,
    status,
    world,
)
from ai_assistant.tools.registry import REGISTRY

TOOLS = (
    # speaking and looking around
    world.SayTool,
    world.EmoteTool,
    world.WhisperTool,
    world.PageTool,
    world.InspectLocationTool,
    world.NoopTool,
    # operating mode
    modes.GoToSleepTool,
    # journal
    journal.AddJournalEntryTool,
    journal.SearchJournalTool,
    journal.ReviewJournalTool,
    # long-term (semantic) memory
    memory.StoreMemoryTool,
    memory.SearchFactsTool,
    # memory nodes
    nodes.NoteSceneTool,
    nodes.RecallScenesTool,
    nodes.OpenMemoryClusterTool,
    nodes.FindScenesByKeywordTool,
    # workspace: goals, projects, session memory, status and persona
    goals.AddGoalTool,
    goals.UpdateGoalTool,
    goals.DecomposeGoalTool,
    projects.CreateProjectTool,
    projects.ListProjectsTool,
    projects.SwapProjectTool,
    projects.UpdateProjectTool,
    session.AddSessionMemoryTool,
    session.CompactSessionMemoryTool,
    status.GetSystemStatusTool,
    status.UpdateSystemPromptTool,
)


def load_all_tools(registry=REGISTRY):
    """
    Register every tool of the catalogue (again registering one is harmless).

    Args:
        registry (ToolRegistry): Where to register them (the global registry by default).

    Returns:
        ToolRegistry: `registry`.
    """
    for tool_class in TOOLS:
        registry.register(tool_class)
    return registry
