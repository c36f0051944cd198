"""
Workspace blocks: what the assistant is working on - the active project, its goals, and the
facts and patterns it keeps in session memory.
"""

from ai_assistant.memory.recall.lines import attributed
from ai_assistant.workspace.goals import PRIORITIES, Goals, format_goal_tree
from ai_assistant.workspace.projects import Projects
from ai_assistant.workspace.session_memory import SessionMemory


def project_context_block(ports, situation=None):
    """
    The prompt block for the active project.

    Args:
        ports (AssistantPorts): The assistant.
        situation (any, optional): Unused; accepted so this is a context provider as it is.

    Returns:
        str or None: Its key, summary and context, or None when no project is active.
    """
    doc = Projects(ports).document()
    key = doc["active"]
    if key is None:
        return None
    slot = doc["slots"][key]
    lines = [f"Active project: {key}", f"Summary: {slot.get('summary', '')}"]
    context = (slot.get("context") or "").strip()
    lines.append(f"Context:\n{context}" if context else "Context: (none recorded yet)")
    paused = sum(1 for other in doc["slots"].values() if other.get("status") == "paused")
    if paused:
        lines.append(f"({paused} paused project(s); list_projects / swap_project to switch.)")
    return "\n".join(lines)


def goals_context_block(ports, situation=None):
    """
    The prompt block listing the active goals as a tree, high priority first.

    Args:
        ports (AssistantPorts): The assistant.
        situation (any, optional): Unused; accepted so this is a context provider as it is.

    Returns:
        str or None: None when there are no active goals.
    """
    active = [goal for goal in Goals(ports).all() if goal.get("status") == "active"]
    if not active:
        return None
    rank = {priority: index for index, priority in enumerate(PRIORITIES)}
    active.sort(key=lambda goal: rank.get(goal.get("priority"), len(rank)))  # stable
    limit = ports.settings.get("workspace.goals.context_max_goals")
    shown, hidden = active[:limit], len(active) - limit
    tree = format_goal_tree(shown).split("\n", 1)[1]
    lines = [tree, "(Mark progress with update_goal as you go.)"]
    if hidden > 0:
        lines.append(f"(+{hidden} more active goals)")
    return "\n".join(lines)


def session_memory_context_block(ports, situation=None, limit=20):
    """
    The prompt block of remembered facts and patterns (the newest `limit` of each).

    Args:
        ports (AssistantPorts): The assistant.
        situation (any, optional): Unused; accepted so this is a context provider as it is.
        limit (int): How many of each kind to show.

    Returns:
        str or None: None when nothing is remembered.
    """
    session = SessionMemory(ports)
    lines = []
    for title, memory_type in (("Key facts", "fact"), ("Learned patterns", "pattern")):
        items = session.entries(memory_type)[-limit:]
        if items:
            lines.append(f"{title}:")
            # a fact set on someone's word says whose (`memory.recall.lines.attributed`)
            lines.extend(f"- {attributed(item['provenance'], item['text'])}" for item in items)
    if not lines:
        return None
    return "\n".join(lines)
