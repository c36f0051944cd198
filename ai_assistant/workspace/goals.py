"""
Goals: hierarchical task tracking with automatic rollup.

State document `"current_goals"` is a flat list of goal dicts linked into a tree by
`parent_id` / `subtask_ids`::

    {
        "id": "goal_42_0",              # goal_{tick}_{index}
        "description": "Build a complete tavern",
        "priority": "high",              # high | medium | low
        "status": "active",              # active | completed | abandoned
        "progress": 33,                  # 0-100
        "created": "2025-12-06T10:00:00Z",
        "parent_id": None,
        "subtask_ids": ["goal_42_1", "goal_42_2", "goal_42_3"],
        "auto_generated": False,         # True for subtasks made by decompose_goal
    }

The tick in an id is the assistant's tick counter (`workspace.mode.Mode.ticks`, 0 when it has
none yet); the index is the next one free for that tick.

Rollup: whenever a goal changes, every ancestor is recomputed, bottom-up. A parent's progress is
the mean of its subtasks' progress and it completes when all of them are complete. Abandoned
subtasks are left out of both (they will never be done, so they must neither drag the mean down
nor block completion). A goal's own progress cannot be set while it has subtasks: it is theirs.

Every operation raises `GoalError` (a message meant for the model or an admin) when it cannot do
what was asked, and then has changed nothing.
"""

import re

from twisted.internet import defer

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import LLMError, iso
from ai_assistant.plumbing.replies import find_json
from ai_assistant.workspace.mode import Mode

PRIORITIES = ("high", "medium", "low")
STATUSES = ("active", "completed", "abandoned")
BAR_WIDTH = 10

DECOMPOSE_SYSTEM_PROMPT = (
    "You break one goal into concrete, actionable subtasks that together achieve it. "
    "Reply with ONLY a JSON array of {min} to {max} short strings, one per subtask, in the "
    "order they should be done. No commentary."
)


class GoalError(ValueError):
    """A goal operation was refused; the message says why. Nothing was changed."""


# ----------------------------------------------------------------------------------------------
# Goals as plain data


def next_goal_id(goals, tick):
    """
    Args:
        goals (list[dict]): The existing goals.
        tick (int): The current tick.

    Returns:
        str: `goal_{tick}_{index}` with the next index not used for that tick.
    """
    pattern = re.compile(rf"^goal_{tick}_(\d+)$")
    used = [int(match.group(1)) for goal in goals if (match := pattern.match(str(goal["id"])))]
    return f"goal_{tick}_{max(used) + 1 if used else 0}"


def _by_id(goals):
    return {goal["id"]: goal for goal in goals}


def _require_goal(goals, goal_id):
    goal = _by_id(goals).get(goal_id) if isinstance(goal_id, str) else None
    if goal is None:
        active = [g["id"] for g in goals if g.get("status") == "active"][:10]
        hint = f" Active goals: {', '.join(active)}" if active else " There are no active goals."
        raise GoalError(f"unknown goal id '{goal_id}'.{hint}")
    return goal


def _subtasks(goal, by_id):
    return [by_id[sub_id] for sub_id in goal.get("subtask_ids") or [] if sub_id in by_id]


def _counted_subtasks(goal, by_id):
    # abandoned subtasks will never be done: they neither count towards nor block the parent
    return [sub for sub in _subtasks(goal, by_id) if sub.get("status") != "abandoned"]


def _tidy(value):
    value = round(float(value), 1)
    return int(value) if value.is_integer() else value


def _clean_description(ports, description):
    if not isinstance(description, str) or not description.strip():
        raise GoalError("a goal needs a description")
    description = " ".join(description.split())
    limit = ports.settings.get("workspace.goals.max_description_chars")
    if len(description) > limit:
        raise GoalError(f"the description is too long ({len(description)} chars; limit {limit})")
    return description


def _clean_progress(progress):
    if isinstance(progress, bool) or not isinstance(progress, int | float):
        raise GoalError(f"progress must be a number from 0 to 100, not {progress!r}")
    if not 0 <= progress <= 100:
        raise GoalError(f"progress must be between 0 and 100, not {progress}")
    return _tidy(progress)


def new_goal(goal_id, description, created, priority="medium", parent_id=None, auto=False):
    """A goal dict in the specification's shape."""
    return {
        "id": goal_id,
        "description": description,
        "priority": priority,
        "status": "active",
        "progress": 0,
        "created": created,
        "parent_id": parent_id,
        "subtask_ids": [],
        "auto_generated": auto,
    }


# ----------------------------------------------------------------------------------------------
# Rollup


def recompute_goal(goal, by_id, update_status=True):
    """
    Recompute one goal from its subtasks (no-op for a goal without counted subtasks).

    Args:
        goal (dict): The goal, changed in place.
        by_id (dict): Every goal by id.
        update_status (bool): Also complete (or reopen) it from its subtasks' statuses.

    Returns:
        bool: True if its progress or status changed.
    """
    subtasks = _counted_subtasks(goal, by_id)
    if not subtasks:
        return False
    before = (goal.get("progress"), goal.get("status"))
    goal["progress"] = _tidy(sum(sub.get("progress") or 0 for sub in subtasks) / len(subtasks))
    all_done = all(sub.get("status") == "completed" for sub in subtasks)
    if update_status and all_done and goal.get("status") == "active":
        goal["status"] = "completed"
    elif update_status and not all_done and goal.get("status") == "completed":
        # a subtask was reopened or added: the parent is no longer done
        goal["status"] = "active"
    return (goal.get("progress"), goal.get("status")) != before


def rollup(goals, goal_id):
    """
    Recompute every ancestor of `goal_id`, bottom-up (recursively up the tree).

    Args:
        goals (list[dict]): All goals (changed in place).
        goal_id (str): The goal that changed.

    Returns:
        list[dict]: `{"id", "progress", "status"}` of each ancestor that changed.
    """
    by_id = _by_id(goals)
    changed = []
    seen = {goal_id}
    parent_id = by_id[goal_id].get("parent_id") if goal_id in by_id else None
    while parent_id in by_id and parent_id not in seen:  # `seen` guards damaged cycles
        seen.add(parent_id)
        parent = by_id[parent_id]
        if recompute_goal(parent, by_id):
            changed.append(
                {"id": parent_id, "progress": parent["progress"], "status": parent["status"]}
            )
        parent_id = parent.get("parent_id")
    return changed


def _descendants(goal, by_id):
    found, stack, seen = [], list(goal.get("subtask_ids") or []), {goal["id"]}
    while stack:
        sub_id = stack.pop(0)
        if sub_id in seen or sub_id not in by_id:
            continue
        seen.add(sub_id)
        found.append(by_id[sub_id])
        stack.extend(by_id[sub_id].get("subtask_ids") or [])
    return found


# ----------------------------------------------------------------------------------------------
# Decomposition


def parse_subtasks(text, minimum=3, maximum=7, max_chars=500):
    """
    Read the LLM's decomposition: a JSON array of strings (or of `{"description": ...}`), or
    an object with a `"subtasks"` array, optionally inside a ```json fence.

    Args:
        text (str): The reply.
        minimum (int): Fewest subtasks accepted.
        maximum (int): Most subtasks accepted.
        max_chars (int): Longest subtask description accepted.

    Returns:
        list[str]: The subtask descriptions, in order, duplicates dropped.

    Raises:
        GoalError: The reply is not such a list, or has too few or too many subtasks.
    """
    garbage = GoalError(
        "the model's reply was not a JSON list of subtasks; nothing changed, try again"
    )
    if not isinstance(text, str) or not text.strip():
        raise garbage
    data = find_json(text)
    if isinstance(data, dict):
        data = data.get("subtasks")
    if not isinstance(data, list):
        raise garbage
    subtasks, seen = [], set()
    for item in data:
        if isinstance(item, dict):
            item = item.get("description") or item.get("task") or item.get("title")
        if not isinstance(item, str):
            raise garbage
        item = " ".join(item.split())
        if not item or item.lower() in seen:
            continue
        if len(item) > max_chars:
            raise GoalError(
                f"a proposed subtask is too long ({len(item)} chars; limit {max_chars})"
            )
        seen.add(item.lower())
        subtasks.append(item)
    if not minimum <= len(subtasks) <= maximum:
        raise GoalError(
            f"the model proposed {len(subtasks)} subtasks, but a goal is split into "
            f"{minimum} to {maximum}; nothing changed, try again"
        )
    return subtasks


def _check_decomposable(goals, goal_id):
    goal = _require_goal(goals, goal_id)
    if goal.get("status") != "active":
        raise GoalError(f"goal '{goal_id}' is {goal.get('status')}; only active goals decompose")
    if goal.get("subtask_ids"):
        # refusing a second split keeps a retried call from duplicating the subtasks
        raise GoalError(
            f"goal '{goal_id}' already has subtasks; add more with add_goal(parent_id=...)"
        )
    return goal


def decomposition_messages(goal, goals, minimum=3, maximum=7):
    """The chat messages asking the LLM to split `goal` (its ancestors given as context)."""
    by_id = _by_id(goals)
    chain, parent_id = [], goal.get("parent_id")
    while parent_id in by_id and len(chain) < 5:
        chain.append(by_id[parent_id]["description"])
        parent_id = by_id[parent_id].get("parent_id")
    user = f"Goal: {goal['description']}"
    if chain:
        user += "\nIt is part of: " + " <- ".join(chain)
    return [
        {"role": "system", "content": DECOMPOSE_SYSTEM_PROMPT.format(min=minimum, max=maximum)},
        {"role": "user", "content": user},
    ]


# ----------------------------------------------------------------------------------------------
# The store


class Goals:
    """
    The assistant's goals (`documents.CURRENT_GOALS`), read fresh from its state on every call:
    `goals.all()`, `goals.add(...)`, `goals.update(...)`, `goals.decompose(...)`.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    def all(self):
        """
        The goals (entries of the document that are not goal dicts are dropped).

        Returns:
            list[dict]: The goals, oldest first.
        """
        goals = self.ports.state.get(documents.CURRENT_GOALS, None)
        if not isinstance(goals, list):
            return []
        return [goal for goal in goals if isinstance(goal, dict) and goal.get("id")]

    def _save(self, goals):
        """Write the `"current_goals"` list back."""
        self.ports.state.set(documents.CURRENT_GOALS, goals)

    def _tick(self):
        """The assistant's tick counter (`workspace.mode`), 0 when unset or unusable."""
        tick = Mode(self.ports).ticks()
        return tick if isinstance(tick, int) and not isinstance(tick, bool) and tick >= 0 else 0

    def add(self, description, priority="medium", parent_id=None):
        """
        Add a goal, or a subtask of an active goal (whose progress is then rolled up again).

        Args:
            description (str): What is to be achieved.
            priority (str): "high", "medium" or "low".
            parent_id (str, optional): The goal this is a subtask of.

        Returns:
            dict: `{"goal": the new goal, "rolled_up": [changed ancestors]}`.

        Raises:
            GoalError: Bad description or priority, unknown or finished parent, too many goals.
        """
        description = _clean_description(self.ports, description)
        if priority not in PRIORITIES:
            raise GoalError(f"invalid priority '{priority}': use one of {', '.join(PRIORITIES)}")
        goals = self.all()
        parent = None
        if parent_id is not None:
            parent = _require_goal(goals, parent_id)
            if parent.get("status") != "active":
                raise GoalError(
                    f"goal '{parent_id}' is {parent.get('status')}; set it active again with "
                    "update_goal before adding subtasks"
                )
        limit = self.ports.settings.get("workspace.goals.max_goals")
        if len(goals) >= limit:
            raise GoalError(f"there are already {len(goals)} goals (the limit is {limit})")
        goal = new_goal(
            next_goal_id(goals, self._tick()),
            description,
            iso(self.ports.clock.now()),
            priority=priority,
            parent_id=parent_id,
        )
        goals.append(goal)
        if parent is not None:
            parent.setdefault("subtask_ids", []).append(goal["id"])
        changed = rollup(goals, goal["id"])
        self._save(goals)
        return {"goal": dict(goal), "rolled_up": changed}

    def update(self, goal_id, status=None, progress=None):
        """
        Change a goal's status and/or progress, then roll the change up its ancestors.

        Completing a goal sets its progress to 100 and completes its unfinished subtasks;
        abandoning it abandons them; a leaf goal that reaches 100% completes.

        Args:
            goal_id (str): The goal's id.
            status (str, optional): "active", "completed" or "abandoned".
            progress (int or float, optional): 0 to 100 (leaf goals only).

        Returns:
            dict: `{"goal", "rolled_up": [changed ancestors], "cascaded": [ids of subtasks]}`.

        Raises:
            GoalError: Unknown id, bad status/progress, progress on a goal that has subtasks,
                or nothing to change.
        """
        if status is None and progress is None:
            raise GoalError("nothing to update: give status and/or progress")
        if status is not None and status not in STATUSES:
            raise GoalError(f"invalid status '{status}': use one of {', '.join(STATUSES)}")
        if progress is not None:
            progress = _clean_progress(progress)
        goals = self.all()
        goal = _require_goal(goals, goal_id)
        by_id = _by_id(goals)
        if progress is not None and _counted_subtasks(goal, by_id):
            raise GoalError(
                f"the progress of '{goal_id}' is the mean of its subtasks' progress; "
                "update the subtasks instead"
            )

        cascaded = []
        if progress is not None:
            goal["progress"] = progress
        if status is not None:
            goal["status"] = status
            if status in ("completed", "abandoned"):
                for sub in _descendants(goal, by_id):
                    if sub.get("status") == "active":
                        sub["status"] = status
                        if status == "completed":
                            sub["progress"] = 100
                        cascaded.append(sub["id"])
            if status == "completed":
                goal["progress"] = 100
            elif status == "active":
                # reopened on purpose: take its subtasks' progress, but do not re-complete it
                recompute_goal(goal, by_id, update_status=False)
        elif progress == 100 and goal.get("status") == "active":
            goal["status"] = "completed"
        changed = rollup(goals, goal_id)
        self._save(goals)
        return {"goal": dict(goal), "rolled_up": changed, "cascaded": cascaded}

    @defer.inlineCallbacks
    def decompose(self, goal_id):
        """
        Ask the LLM to split an active goal without subtasks into 3-7 subtasks, and add them.

        The goal is re-read after the LLM answers, so a goal finished or split meanwhile is left
        alone. A failed call or an unusable reply changes nothing.

        Args:
            goal_id (str): The goal to split.

        Returns:
            Deferred[dict]: `{"goal", "subtasks": [new goals], "rolled_up"}`; errbacks with
            `GoalError` when refused.
        """
        if self.ports.llm is None:
            self.ports.log(f"{self.ports.name}: decompose_goal skipped (mechanical mode, no LLM)")
            raise GoalError(
                "decompose_goal needs an LLM and none is configured (mechanical mode); "
                "add subtasks one by one with add_goal(parent_id=...)"
            )
        minimum = self.ports.settings.get("workspace.goals.min_subtasks")
        maximum = self.ports.settings.get("workspace.goals.max_subtasks")
        max_chars = self.ports.settings.get("workspace.goals.max_description_chars")
        goals = self.all()
        goal = _check_decomposable(goals, goal_id)
        messages = decomposition_messages(goal, goals, minimum, maximum)
        try:
            reply = yield self.ports.llm.complete(messages, purpose="decompose_goal")
        except LLMError as err:
            raise GoalError(
                f"the LLM call failed ({err or type(err).__name__}); nothing changed, "
                "try again later") from err
        subtasks = parse_subtasks(getattr(reply, "content", reply), minimum, maximum, max_chars)

        # fresh read after the yield: the goal may have changed while the model was thinking
        goals = self.all()
        goal = _check_decomposable(goals, goal_id)
        limit = self.ports.settings.get("workspace.goals.max_goals")
        if len(goals) + len(subtasks) > limit:
            raise GoalError(
                f"adding {len(subtasks)} subtasks would pass the limit of {limit} goals")
        tick, created, new = self._tick(), iso(self.ports.clock.now()), []
        for description in subtasks:
            sub = new_goal(
                next_goal_id(goals, tick),
                description,
                created,
                priority=goal.get("priority", "medium"),
                parent_id=goal_id,
                auto=True,
            )
            goals.append(sub)
            goal.setdefault("subtask_ids", []).append(sub["id"])
            new.append(sub)
        recompute_goal(goal, _by_id(goals))
        changed = rollup(goals, goal_id)
        self._save(goals)
        return {"goal": dict(goal), "subtasks": [dict(sub) for sub in new], "rolled_up": changed}


# ----------------------------------------------------------------------------------------------
# Presentation


def progress_bar(progress, width=BAR_WIDTH):
    """`[###-------]` for 33%; a bar is full only at 100%."""
    try:
        value = min(max(float(progress or 0), 0.0), 100.0)
    except (TypeError, ValueError):
        value = 0.0
    filled = int(value * width // 100)
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def _percent(progress):
    try:
        return f"{_tidy(progress or 0)}%"
    except (TypeError, ValueError):
        return "?%"


def format_goal_tree(goals):
    """
    Draw the goals as a tree with progress bars (`@assistant/goals <npc>`).

    Args:
        goals (list[dict]): A `"current_goals"` list.

    Returns:
        str: One line per goal, subtasks indented under their parent.
    """
    goals = [goal for goal in goals or [] if isinstance(goal, dict) and goal.get("id")]
    if not goals:
        return "No goals."
    by_id = _by_id(goals)
    order = {goal["id"]: index for index, goal in enumerate(goals)}
    children = {}
    for goal in goals:
        parent_id = goal.get("parent_id")
        if parent_id in by_id and parent_id != goal["id"]:
            children.setdefault(parent_id, []).append(goal)
    for parent_id, kids in children.items():
        listed = by_id[parent_id].get("subtask_ids") or []
        kids.sort(
            key=lambda kid: (
                listed.index(kid["id"]) if kid["id"] in listed else len(listed),
                order[kid["id"]],
            )
        )

    counts = {status: sum(1 for g in goals if g.get("status") == status) for status in STATUSES}
    lines = [
        f"Goals: {counts['active']} active, {counts['completed']} completed, "
        f"{counts['abandoned']} abandoned"
    ]
    drawn = set()

    def draw(goal, prefix, connector):
        drawn.add(goal["id"])
        extra = goal.get("priority", "medium")
        if goal.get("status") != "active":
            extra += f", {goal.get('status')}"
        lines.append(
            f"{prefix}{connector}{goal['id']} {progress_bar(goal.get('progress'))} "
            f"{_percent(goal.get('progress')):>6} {goal.get('description', '')} ({extra})"
        )
        kids = [kid for kid in children.get(goal["id"], []) if kid["id"] not in drawn]
        child_prefix = prefix + ("" if not connector else ("   " if connector == "└─ " else "│  "))
        for index, kid in enumerate(kids):
            draw(kid, child_prefix, "└─ " if index == len(kids) - 1 else "├─ ")

    for goal in goals:
        if goal.get("parent_id") not in by_id and goal["id"] not in drawn:
            draw(goal, "", "")
    for goal in goals:  # only goals caught in a damaged parent cycle are left
        if goal["id"] not in drawn:
            draw(goal, "", "")
    return "\n".join(lines)
