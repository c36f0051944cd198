"""
Reflection state: how much importance has piled up since the last reflection.

`ReflectionState(ports)` is the only code that reads or writes the document. Every journal
entry counts toward the next reflection (`count`, called by the journal when an entry is
written); once the cumulative importance reaches the threshold (`due`), the dreaming phase of
sleep reflects (`ai_assistant.sleep.reflection`) and starts a new window (`reset`). The
document `documents.REFLECTION_STATE` holds::

    {"cumulative_importance": 0.0, "threshold": 150, "last_reflection_time": None,
     "reflection_count": 0, "entries_since_reflection": [41, 42]}

`threshold` mirrors the `reflection.threshold` setting (per-NPC overrides go through settings),
so changing the setting takes effect at once. The LLM scoring step keeps
`cumulative_importance` in step when it changes the score of an entry inside the window
(`rescore`).
"""

from ai_assistant.plumbing import documents, state_changes
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


class ReflectionState:
    """
    How much importance has piled up since the last reflection, for one assistant.

    Cheap to build: it keeps nothing and reads the document afresh on every call.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    def current(self):
        """
        Returns:
            dict: The reflection state, missing keys filled in and `threshold` taken from the
            `reflection.threshold` setting.
        """
        threshold = self.ports.settings.get("reflection.threshold")
        state = self.ports.state.get(documents.REFLECTION_STATE, None)
        if not isinstance(state, dict):
            state = new_reflection_state(threshold)
        for key, value in new_reflection_state(threshold).items():
            state.setdefault(key, value)
        state["threshold"] = threshold
        return state

    def _save(self, state, change=None):
        """Store the state; `change` says what changed (`plumbing.state_changes`), if known."""
        if change is not None:  # `current` sets the threshold from the settings
            change = [state_changes.assign(("threshold",), state["threshold"]), *change]
        self.ports.state.set(documents.REFLECTION_STATE, state, change=change)

    def count(self, importance, entry_id):
        """
        Count one new journal entry toward the next reflection.

        Args:
            importance (int): The entry's importance.
            entry_id (int): The entry's id.

        Returns:
            dict: The updated state.
        """
        state = self.current()
        state["cumulative_importance"] = float(state["cumulative_importance"]) + importance
        # what changed, for a store that logs changes: not every id since the last reflection
        change = [state_changes.assign(("cumulative_importance",), state["cumulative_importance"])]
        if entry_id not in state["entries_since_reflection"]:
            state["entries_since_reflection"].append(entry_id)
            change.append(state_changes.append(("entries_since_reflection",), entry_id))
        self._save(state, change)
        return state

    def rescore(self, changes):
        """
        Follow new importance scores of entries that count toward the next reflection.

        Args:
            changes (dict): `{entry id: (old importance, new importance)}`; entries outside
                the current window are left out of the sum.

        Returns:
            dict: The updated state.
        """
        state = self.current()
        window = set(state["entries_since_reflection"])
        for entry_id, (old, new) in changes.items():
            if entry_id in window:
                state["cumulative_importance"] = max(
                    0.0, state["cumulative_importance"] + new - old)
        self._save(state)
        return state

    def due(self):
        """
        Returns:
            bool: True when the importance gathered since the last reflection reached the
            threshold (the specification's default: cumulative_importance >= 150).
        """
        state = self.current()
        return state["cumulative_importance"] >= state["threshold"]

    def reset(self, reflected_ids=None, reflected_importance=None):
        """
        Start a new reflection window after a reflection.

        The threshold is kept, the count goes up by one and the time is recorded. When the
        caller says which entries and how much importance the reflection covered, entries
        written while it was running stay counted toward the next one; otherwise the window is
        cleared, as the specification does.

        Args:
            reflected_ids (iterable, optional): Entry ids the reflection used.
            reflected_importance (float, optional): The cumulative importance it started from.

        Returns:
            dict: The new state.
        """
        state = self.current()
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
            "last_reflection_time": iso(self.ports.clock.now()),
            "reflection_count": int(state["reflection_count"]) + 1,
            "entries_since_reflection": remaining_ids,
        }
        self._save(new_state)
        return new_state
