"""
Reflection state: how much importance has piled up since the last reflection.

Every journal entry counts toward the next reflection (`update_reflection_state`, called by the
journal when an entry is written); once the cumulative importance reaches the threshold
(`check_reflection_trigger`), the dreaming phase of sleep reflects (`ai_assistant.sleep.
reflection`) and starts a new window (`reset_reflection_state`). The document
`documents.REFLECTION_STATE` holds::

    {"cumulative_importance": 0.0, "threshold": 150, "last_reflection_time": None,
     "reflection_count": 0, "entries_since_reflection": [41, 42]}

`threshold` mirrors the `reflection.threshold` setting (per-NPC overrides go through settings),
so changing the setting takes effect at once. The LLM scoring step keeps
`cumulative_importance` in step when it changes the score of an entry inside the window.
"""

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso


def new_reflection_state(threshold=150):
    """A fresh reflection state document."""
    return {
        "cumulative_importance": 0.0,
        "threshold": threshold,
        "last_reflection_time": None,
        "reflection_count": 0,
        "entries_since_reflection": [],
    }


def get_reflection_state(ports):
    """
    Args:
        ports (AssistantPorts): The assistant.

    Returns:
        dict: The reflection state document, missing keys filled in and `threshold` taken
        from the `reflection.threshold` setting. Call `save_reflection_state` after changing it.
    """
    threshold = ports.settings.get("reflection.threshold")
    state = ports.state.get(documents.REFLECTION_STATE, None)
    if not isinstance(state, dict):
        state = new_reflection_state(threshold)
    for key, value in new_reflection_state(threshold).items():
        state.setdefault(key, value)
    state["threshold"] = threshold
    return state


def save_reflection_state(ports, state):
    """Write the reflection state back."""
    ports.state.set(documents.REFLECTION_STATE, state)


def update_reflection_state(ports, importance, entry_id):
    """
    Count one new journal entry toward the next reflection.

    Args:
        ports (AssistantPorts): The assistant.
        importance (int): The entry's importance.
        entry_id (int): The entry's id.

    Returns:
        dict: The updated state.
    """
    state = get_reflection_state(ports)
    state["cumulative_importance"] = float(state["cumulative_importance"]) + importance
    if entry_id not in state["entries_since_reflection"]:
        state["entries_since_reflection"].append(entry_id)
    save_reflection_state(ports, state)
    return state


def check_reflection_trigger(ports):
    """
    Args:
        ports (AssistantPorts): The assistant.

    Returns:
        bool: True when the importance gathered since the last reflection reached the
        threshold (the specification's default: cumulative_importance >= 150).
    """
    state = get_reflection_state(ports)
    return state["cumulative_importance"] >= state["threshold"]


def reset_reflection_state(ports, reflected_ids=None, reflected_importance=None):
    """
    Start a new reflection window after a reflection.

    The threshold is kept, the count goes up by one and the time is recorded. When the caller
    says which entries and how much importance the reflection covered, entries written while it
    was running stay counted toward the next one; otherwise the window is cleared, as the
    specification does.

    Args:
        ports (AssistantPorts): The assistant.
        reflected_ids (iterable, optional): Entry ids the reflection used.
        reflected_importance (float, optional): The cumulative importance it started from.

    Returns:
        dict: The new state.
    """
    state = get_reflection_state(ports)
    if reflected_ids is None:
        remaining_ids, remaining_importance = [], 0.0
    else:
        done = set(reflected_ids)
        remaining_ids = [i for i in state["entries_since_reflection"] if i not in done]
        remaining_importance = max(
            0.0, float(state["cumulative_importance"]) - float(reflected_importance or 0.0)
        )
    new_state = {
        "cumulative_importance": remaining_importance,
        "threshold": state["threshold"],
        "last_reflection_time": iso(ports.clock.now()),
        "reflection_count": int(state["reflection_count"]) + 1,
        "entries_since_reflection": remaining_ids,
    }
    save_reflection_state(ports, new_state)
    return new_state
