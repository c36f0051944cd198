"""The workspace's stores: `Goals`, `Projects` and `SessionMemory`, each over its own document."""

import pytest
from support import make_ports, result_of
from twisted.internet import defer

from ai_assistant.plumbing.ports import LLMReply, MemoryState
from ai_assistant.workspace.goals import GoalError, Goals
from ai_assistant.workspace.mode import Mode
from ai_assistant.workspace.projects import ProjectError, Projects
from ai_assistant.workspace.session_memory import SessionMemory, SessionMemoryError


class OneReply:
    """An LLM that answers once with `text`."""

    def __init__(self, text):
        self.text = text

    def complete(self, messages, **kwargs):
        return defer.succeed(LLMReply(content=self.text))


# ----------------------------------------------------------------------------------------------
# Goals


def test_goals_are_added_under_the_current_tick_and_rolled_up():
    ports = make_ports()
    Mode(ports).record_tick()
    Mode(ports).record_tick()
    goals = Goals(ports)
    root = goals.add("Build a tavern", priority="high")["goal"]
    assert root["id"] == "goal_2_0"
    sub = goals.add("Lay the foundation", parent_id=root["id"])["goal"]
    assert sub["id"] == "goal_2_1"
    done = goals.update(sub["id"], status="completed")
    assert done["rolled_up"] == [{"id": root["id"], "progress": 100, "status": "completed"}]
    assert [(goal["id"], goal["status"]) for goal in goals.all()] == [
        ("goal_2_0", "completed"), ("goal_2_1", "completed")]
    assert ports.state.get("current_goals")[0]["progress"] == 100


def test_a_refused_goal_changes_nothing():
    ports = make_ports()
    goals = Goals(ports)
    with pytest.raises(GoalError, match="invalid priority"):
        goals.add("x", priority="urgent")
    with pytest.raises(GoalError):
        goals.update("goal_9_9", status="completed")
    assert goals.all() == [] and ports.state.get("current_goals") is None


def test_damaged_goal_entries_are_not_goals():
    ports = make_ports(state=MemoryState({"current_goals": [{"id": "goal_0_0"}, "junk", {}]}))
    assert [goal["id"] for goal in Goals(ports).all()] == ["goal_0_0"]
    assert Goals(make_ports(state=MemoryState({"current_goals": "junk"}))).all() == []


def test_decompose_adds_the_models_subtasks_under_the_goal():
    ports = make_ports(llm=OneReply('["Buy wood", "Hire a mason", "Paint the sign"]'))
    goals = Goals(ports)
    root = goals.add("Build a tavern")["goal"]["id"]
    done = result_of(goals.decompose(root))
    assert [sub["description"] for sub in done["subtasks"]] == [
        "Buy wood", "Hire a mason", "Paint the sign"]
    assert [goal["parent_id"] for goal in goals.all()] == [None, root, root, root]


def test_decompose_needs_a_model():
    goals = Goals(make_ports())
    root = goals.add("Build a tavern")["goal"]["id"]
    failures = []
    goals.decompose(root).addErrback(failures.append)
    assert failures and failures[0].check(GoalError)
    assert len(goals.all()) == 1


# ----------------------------------------------------------------------------------------------
# Projects


def test_projects_are_created_listed_swapped_and_updated():
    ports = make_ports()
    projects = Projects(ports)
    assert projects.create("Build Tavern", "A tavern")["active"] is True
    assert projects.create("quest", "A quest")["active"] is False
    assert [(row["key"], row["active"]) for row in projects.all()] == [
        ("build_tavern", True), ("quest", False)]
    swapped = projects.swap("quest", current_project_update="walls half done")
    assert (swapped["key"], swapped["previous"]) == ("quest", "build_tavern")
    assert projects.document()["slots"]["build_tavern"]["context"] == "walls half done"
    projects.update(context="dragon found")
    assert projects.document()["slots"]["quest"]["context"] == "dragon found"
    assert ports.state.get("projects")["active"] == "quest"


def test_a_refused_project_change_changes_nothing():
    ports = make_ports()
    projects = Projects(ports)
    with pytest.raises(ProjectError):
        projects.update(context="x")  # no active project
    with pytest.raises(ProjectError):
        projects.create("!!!", "bad key")
    assert projects.all() == [] and ports.state.get("projects") is None


def test_a_damaged_projects_document_is_read_repaired():
    ports = make_ports(state=MemoryState({"projects": {"active": "gone", "slots": "junk"}}))
    assert Projects(ports).document() == {"active": None, "slots": {}}


# ----------------------------------------------------------------------------------------------
# Session memory


def test_session_memory_adds_and_compacts():
    ports = make_ports()
    session = SessionMemory(ports)
    assert session.add("Alice prefers formal address")["added"]
    assert not session.add("alice prefers formal address!")["added"]  # the same, told again
    assert session.add("Alice prefers a formal address")["added"]  # near, caught by compact
    session.add("Players explore before asking", memory_type="pattern")
    assert len(session.document()["key_facts"]) == 2
    compacted = session.compact()
    assert compacted["removed_count"] == 1
    assert compacted["counts"] == {"key_facts": 1, "learned_patterns": 1, "completed_tasks": 0}
    assert ports.state.get("session_memory")["last_compacted"] == "2025-01-01T12:00:00Z"


def test_session_memory_refuses_what_is_about_the_assistant_itself():
    ports = make_ports()
    with pytest.raises(SessionMemoryError):
        SessionMemory(ports).add("I am a helpful assistant")
    assert SessionMemory(ports).document()["key_facts"] == []
