"""Goals: ids, rollup over three levels, completion propagation, decomposition."""

import copy
import json

import pytest
import support
from twisted.internet import defer

from ai_assistant.agent.blocks.workspace import goals_context_block
from ai_assistant.plumbing.ports import (
    LLMReply,
    LLMTimeout,
    MemoryState,
)
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import execute_tool
from ai_assistant.workspace import goals
from ai_assistant.workspace.goals import (
    GoalError,
    format_goal_tree,
    parse_subtasks,
    progress_bar,
)

pytestmark = pytest.mark.core

load_all_tools()


class ScriptedLLM:
    """Answers each call with the next scripted reply (text, or an exception to fail with)."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []

    def complete(self, messages, *, tools=None, purpose="chat", **params):
        self.calls.append({"messages": messages, "purpose": purpose})
        reply = self.replies.pop(0)
        if isinstance(reply, defer.Deferred):
            return reply
        if isinstance(reply, Exception):
            return defer.fail(reply)
        return defer.succeed(LLMReply(content=reply))


def make_ports(initial=None, llm=None, overrides=None):
    ports = support.make_ports(key="ada", state=MemoryState(initial), llm=llm, overrides=overrides)
    ports.logged = ports.log
    return ports


def run_tool(ports, name, arguments=None):
    results = []
    execute_tool(name, ports, arguments or {}).addBoth(results.append)
    assert len(results) == 1, "the tool did not finish synchronously"
    assert isinstance(results[0], dict)
    return results[0]


def add(ports, description, parent_id=None, **extra):
    arguments = {"description": description, **extra}
    if parent_id:
        arguments["parent_id"] = parent_id
    result = run_tool(ports, "add_goal", arguments)
    assert result["success"], result
    return result["goal"]["id"]


def goal(ports, goal_id):
    return next(g for g in ports.state.get("current_goals") if g["id"] == goal_id)


def update(ports, goal_id, **changes):
    return run_tool(ports, "update_goal", {"goal_id": goal_id, **changes})


# ----------------------------------------------------------------------------------------------
# ids and adding


def test_goal_ids_follow_the_tick_and_the_next_free_index():
    ports = make_ports({"tick_count": 42})
    assert add(ports, "Build a complete tavern", priority="high") == "goal_42_0"
    assert add(ports, "Lay foundation", parent_id="goal_42_0") == "goal_42_1"
    ports.state.set("tick_count", 43)
    assert add(ports, "Hire a bartender") == "goal_43_0"
    first = goal(ports, "goal_42_0")
    assert first["priority"] == "high" and first["status"] == "active"
    assert first["subtask_ids"] == ["goal_42_1"]
    assert goal(ports, "goal_42_1")["parent_id"] == "goal_42_0"
    assert goal(ports, "goal_43_0")["priority"] == "medium"  # the default
    assert set(first) == {
        "id",
        "description",
        "priority",
        "status",
        "progress",
        "created",
        "parent_id",
        "subtask_ids",
        "auto_generated",
    }


def test_ids_without_a_tick_count_and_after_gaps():
    assert add(make_ports(), "anything") == "goal_0_0"
    gappy = [{"id": "goal_7_0"}, {"id": "goal_7_5"}, {"id": "goal_70_9"}]
    assert goals.next_goal_id(gappy, 7) == "goal_7_6"
    assert goals.next_goal_id(gappy, 8) == "goal_8_0"


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"description": ""}, "needs a description"),
        ({"description": "x", "priority": "urgent"}, "urgent"),
        ({"description": "x", "parent_id": "goal_9_9"}, "unknown goal id 'goal_9_9'"),
        ({"description": "x" * 501}, "too long"),
    ],
)
def test_add_goal_refusals_change_nothing(arguments, message):
    ports = make_ports()
    add(ports, "Existing goal")
    before, saves = copy.deepcopy(ports.state.get("current_goals")), ports.state.saves
    result = run_tool(ports, "add_goal", arguments)
    assert result["success"] is False and message in result["error"]
    assert ports.state.get("current_goals") == before
    assert ports.state.saves == saves


def test_subtasks_cannot_be_added_to_a_finished_goal():
    ports = make_ports()
    parent = add(ports, "Done already")
    update(ports, parent, status="completed")
    result = run_tool(ports, "add_goal", {"description": "more", "parent_id": parent})
    assert result["success"] is False and "completed" in result["error"]


# ----------------------------------------------------------------------------------------------
# rollup


@pytest.fixture
def tree():
    """grandparent G -> parents P1 (children C1, C2) and P2 (child C3)."""
    ports = make_ports({"tick_count": 1})
    g = add(ports, "Build a complete tavern")
    p1 = add(ports, "Build the structure", parent_id=g)
    p2 = add(ports, "Staff the tavern", parent_id=g)
    c1 = add(ports, "Lay foundation", parent_id=p1)
    c2 = add(ports, "Raise walls", parent_id=p1)
    c3 = add(ports, "Hire bartender", parent_id=p2)
    return ports, g, p1, p2, c1, c2, c3


def test_rollup_arithmetic_over_three_levels(tree):
    ports, g, p1, p2, c1, c2, c3 = tree
    result = update(ports, c1, progress=50)
    assert result["success"] is True
    assert goal(ports, p1)["progress"] == 25  # (50 + 0) / 2
    assert goal(ports, g)["progress"] == 12.5  # (25 + 0) / 2
    assert [row["id"] for row in result["rolled_up"]] == [p1, g]

    update(ports, c2, progress=30)
    assert goal(ports, p1)["progress"] == 40  # (50 + 30) / 2
    assert goal(ports, g)["progress"] == 20  # (40 + 0) / 2

    update(ports, c3, progress=45)
    assert goal(ports, p2)["progress"] == 45
    assert goal(ports, g)["progress"] == 42.5  # (40 + 45) / 2
    assert all(goal(ports, gid)["status"] == "active" for gid in (g, p1, p2, c1, c2, c3))


def test_completion_propagates_up_the_tree(tree):
    ports, g, p1, p2, c1, c2, c3 = tree
    update(ports, c3, status="completed")
    assert goal(ports, c3)["progress"] == 100
    assert goal(ports, p2)["status"] == "completed"  # its only subtask is done
    assert goal(ports, g)["status"] == "active"
    assert goal(ports, g)["progress"] == 50  # (0 + 100) / 2

    update(ports, c1, status="completed")
    assert goal(ports, p1)["status"] == "active"  # C2 still open
    assert goal(ports, p1)["progress"] == 50

    result = update(ports, c2, progress=100)  # a leaf reaching 100% is complete
    assert goal(ports, c2)["status"] == "completed"
    assert goal(ports, p1)["status"] == "completed"
    assert goal(ports, g)["status"] == "completed"
    assert goal(ports, g)["progress"] == 100
    assert {row["id"]: row["status"] for row in result["rolled_up"]} == {
        p1: "completed",
        g: "completed",
    }


def test_reopening_a_subtask_reopens_its_ancestors(tree):
    ports, g, p1, p2, c1, c2, c3 = tree
    for child in (c1, c2, c3):
        update(ports, child, status="completed")
    assert goal(ports, g)["status"] == "completed"
    update(ports, c2, status="active", progress=60)
    assert goal(ports, p1)["status"] == "active" and goal(ports, p1)["progress"] == 80
    assert goal(ports, g)["status"] == "active" and goal(ports, g)["progress"] == 90


def test_abandoned_subtasks_neither_count_nor_block(tree):
    ports, g, p1, p2, c1, c2, c3 = tree
    update(ports, c1, progress=80)
    assert goal(ports, p1)["progress"] == 40
    update(ports, c2, status="abandoned")
    assert goal(ports, p1)["progress"] == 80  # C2 no longer drags the mean down
    update(ports, c1, status="completed")
    assert goal(ports, p1)["status"] == "completed"


def test_completing_or_abandoning_a_parent_cascades_to_open_subtasks(tree):
    ports, g, p1, p2, c1, c2, c3 = tree
    update(ports, c2, status="abandoned")
    result = update(ports, p1, status="completed")
    assert result["cascaded"] == [c1]
    assert goal(ports, c1)["status"] == "completed" and goal(ports, c1)["progress"] == 100
    assert goal(ports, c2)["status"] == "abandoned"  # not resurrected
    assert goal(ports, g)["progress"] == 50

    result = update(ports, g, status="abandoned")
    assert result["cascaded"] == [p2, c3]
    assert goal(ports, c3)["status"] == "abandoned"
    assert goal(ports, p1)["status"] == "completed"


# ----------------------------------------------------------------------------------------------
# bad updates


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"progress": 150}, "'progress' must be at most 100."),
        ({"progress": -1}, "'progress' must be at least 0."),
        ({"status": "done"}, "done"),
        ({}, "nothing to update"),
    ],
)
def test_bad_updates_are_refused_and_change_nothing(tree, changes, message):
    ports, g, p1, p2, c1, c2, c3 = tree
    update(ports, c1, progress=20)
    before, saves = copy.deepcopy(ports.state.get("current_goals")), ports.state.saves
    result = update(ports, c1, **changes)
    assert result["success"] is False
    assert message in result["error"]
    assert ports.state.get("current_goals") == before
    assert ports.state.saves == saves


def test_core_rejects_out_of_range_progress_too():
    ports = make_ports()
    goal_id = add(ports, "A goal")
    for bad in (150, -5, True, "50"):
        with pytest.raises(GoalError, match="progress"):
            goals.Goals(ports).update(goal_id, progress=bad)
    assert goal(ports, goal_id)["progress"] == 0


def test_unknown_goal_id_is_a_clear_error(tree):
    ports = tree[0]
    result = update(ports, "goal_99_0", progress=10)
    assert result["success"] is False
    assert "unknown goal id 'goal_99_0'" in result["error"]
    assert "goal_1_0" in result["error"]  # it names goals that do exist


def test_progress_of_a_parent_is_its_subtasks_business(tree):
    ports, g, p1, *_ = tree
    result = update(ports, p1, progress=90)
    assert result["success"] is False and "mean of its subtasks" in result["error"]
    assert goal(ports, p1)["progress"] == 0


# ----------------------------------------------------------------------------------------------
# decomposition


def decomposable(llm):
    ports = make_ports({"tick_count": 42}, llm=llm)
    root = add(ports, "Build a complete tavern", priority="high")
    return ports, root


FIVE = [
    "Design floor plan and room layout",
    "Construct building structure",
    "Add furniture and decorations",
    "Create NPC bartender",
    "Write room descriptions",
]


def test_decompose_adds_the_llms_subtasks_under_the_goal():
    llm = ScriptedLLM(json.dumps(FIVE))
    ports, root = decomposable(llm)
    result = run_tool(ports, "decompose_goal", {"goal_id": root})
    assert result["success"] is True
    ids = [sub["id"] for sub in result["subtasks"]]
    assert ids == ["goal_42_1", "goal_42_2", "goal_42_3", "goal_42_4", "goal_42_5"]
    assert [goal(ports, i)["description"] for i in ids] == FIVE
    assert all(goal(ports, i)["auto_generated"] is True for i in ids)
    assert all(goal(ports, i)["priority"] == "high" for i in ids)  # inherited
    assert goal(ports, root)["subtask_ids"] == ids
    prompt = "\n".join(message["content"] for message in llm.calls[0]["messages"])
    assert "Build a complete tavern" in prompt and "3 to 7" in prompt
    assert llm.calls[0]["purpose"] == "decompose_goal"

    # the new subtasks roll up like hand-made ones
    update(ports, "goal_42_1", status="completed")
    assert goal(ports, root)["progress"] == 20


@pytest.mark.parametrize(
    "reply",
    [
        "```json\n" + json.dumps(FIVE[:3]) + "\n```",
        json.dumps({"subtasks": [{"description": text} for text in FIVE[:4]]}),
        "Here is the plan:\n" + json.dumps(FIVE) + "\nGood luck!",
    ],
)
def test_decompose_accepts_the_usual_reply_shapes(reply):
    ports, root = decomposable(ScriptedLLM(reply))
    result = run_tool(ports, "decompose_goal", {"goal_id": root})
    assert result["success"] is True
    assert 3 <= len(goal(ports, root)["subtask_ids"]) <= 5


@pytest.mark.parametrize(
    "reply, message",
    [
        (json.dumps(FIVE[:2]), "proposed 2 subtasks"),
        (json.dumps(FIVE + ["Stock the cellar", "Hang a sign", "Open the doors"]), "proposed 8"),
        ("Sure! First design it, then build it, then open it.", "not a JSON list"),
        (json.dumps({"plan": FIVE}), "not a JSON list"),
        (json.dumps([1, 2, 3]), "not a JSON list"),
        (json.dumps(["Same", "same", "SAME", "Other"]), "proposed 2"),  # duplicates collapse
        ("", "not a JSON list"),
    ],
)
def test_decompose_rejects_bad_counts_and_garbage_and_changes_nothing(reply, message):
    ports, root = decomposable(ScriptedLLM(reply))
    before, saves = copy.deepcopy(ports.state.get("current_goals")), ports.state.saves
    result = run_tool(ports, "decompose_goal", {"goal_id": root})
    assert result["success"] is False
    assert message in result["error"]
    assert "nothing changed" in result["error"]
    assert ports.state.get("current_goals") == before
    assert ports.state.saves == saves


def test_decompose_in_mechanical_mode_is_a_clear_error():
    ports, root = decomposable(None)
    result = run_tool(ports, "decompose_goal", {"goal_id": root})
    assert result["success"] is False
    assert "mechanical mode" in result["error"] and "add_goal" in result["error"]
    assert goal(ports, root)["subtask_ids"] == []
    assert sum("decompose_goal skipped" in line for line in ports.logged) == 1


def test_decompose_survives_a_failed_llm_call_and_can_be_retried():
    llm = ScriptedLLM(LLMTimeout("no answer"), json.dumps(FIVE[:3]))
    ports, root = decomposable(llm)
    failed = run_tool(ports, "decompose_goal", {"goal_id": root})
    assert failed["success"] is False and "LLM call failed" in failed["error"]
    assert goal(ports, root)["subtask_ids"] == []
    retried = run_tool(ports, "decompose_goal", {"goal_id": root})
    assert retried["success"] is True and len(goal(ports, root)["subtask_ids"]) == 3


def test_decompose_refuses_a_second_split_and_unknown_goals():
    ports, root = decomposable(ScriptedLLM(json.dumps(FIVE[:3]), json.dumps(FIVE[:3])))
    assert run_tool(ports, "decompose_goal", {"goal_id": root})["success"]
    again = run_tool(ports, "decompose_goal", {"goal_id": root})
    assert again["success"] is False and "already has subtasks" in again["error"]
    assert len(goal(ports, root)["subtask_ids"]) == 3
    missing = run_tool(ports, "decompose_goal", {"goal_id": "goal_1_1"})
    assert missing["success"] is False and "unknown goal id" in missing["error"]


def test_decompose_rechecks_the_goal_after_the_llm_answers():
    pending = defer.Deferred()
    ports, root = decomposable(ScriptedLLM(pending))
    results = []
    goals.Goals(ports).decompose(root).addBoth(results.append)
    assert results == []  # waiting on the model
    update(ports, root, status="completed")  # meanwhile the goal got finished
    pending.callback(LLMReply(content=json.dumps(FIVE[:3])))
    assert len(results) == 1
    assert isinstance(results[0].value, GoalError)
    assert "completed" in str(results[0].value)
    assert len(ports.state.get("current_goals")) == 1  # no subtasks were added


def test_parse_subtasks_limits_come_from_arguments():
    assert parse_subtasks('["a", "b"]', minimum=2, maximum=2) == ["a", "b"]
    with pytest.raises(GoalError, match="too long"):
        parse_subtasks(json.dumps(["x" * 20, "b", "c"]), max_chars=10)


# ----------------------------------------------------------------------------------------------
# presentation


def test_progress_bar_fills_by_tenths_and_only_full_at_100():
    assert progress_bar(0) == "[----------]"
    assert progress_bar(33.3) == "[###-------]"
    assert progress_bar(99) == "[#########-]"
    assert progress_bar(100) == "[##########]"
    assert progress_bar(150) == "[##########]"
    assert progress_bar("junk") == "[----------]"


def test_format_goal_tree_draws_the_hierarchy_with_progress(tree):
    ports, g, p1, p2, c1, c2, c3 = tree
    update(ports, c1, status="completed")
    update(ports, c3, progress=40)
    text = format_goal_tree(ports.state.get("current_goals"))
    lines = text.splitlines()
    assert lines[0] == "Goals: 5 active, 1 completed, 0 abandoned"
    assert lines[1] == f"{g} [####------]    45% Build a complete tavern (medium)"
    assert lines[2] == f"├─ {p1} [#####-----]    50% Build the structure (medium)"
    assert lines[3] == f"│  ├─ {c1} [##########]   100% Lay foundation (medium, completed)"
    assert lines[4] == f"│  └─ {c2} [----------]     0% Raise walls (medium)"
    assert lines[5] == f"└─ {p2} [####------]    40% Staff the tavern (medium)"
    assert lines[6] == f"   └─ {c3} [####------]    40% Hire bartender (medium)"
    assert format_goal_tree([]) == "No goals."


def test_format_goal_tree_survives_damaged_links():
    damaged = [
        {"id": "a", "description": "orphan", "parent_id": "gone", "progress": 10},
        {"id": "b", "description": "loop one", "parent_id": "c"},
        {"id": "c", "description": "loop two", "parent_id": "b"},
        "not a goal",
    ]
    text = format_goal_tree(damaged)
    assert "orphan" in text and "loop one" in text and "loop two" in text


def test_goals_context_block_lists_active_goals_high_priority_first():
    ports = make_ports()
    assert goals_context_block(ports) is None
    low = add(ports, "Tidy the cellar", priority="low")
    high = add(ports, "Defend the gate", priority="high")
    done = add(ports, "Old chore")
    update(ports, done, status="completed")
    block = goals_context_block(ports)
    assert block.index("Defend the gate") < block.index("Tidy the cellar")
    assert "Old chore" not in block
    assert high in block and low in block
    assert "update_goal" in block
