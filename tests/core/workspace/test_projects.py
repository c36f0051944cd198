"""Projects: slots, the context paging pattern, the prompt block and the admin view."""

import copy

import pytest
import support

from ai_assistant.agent.blocks.workspace import project_context_block
from ai_assistant.plumbing.ports import MemoryState, iso
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import ToolCache, execute_tool
from ai_assistant.workspace import projects
from ai_assistant.workspace.projects import (
    ProjectError,
    format_projects,
)

load_all_tools()


def make_ports(initial=None, overrides=None):
    return support.make_ports(key="ada", state=MemoryState(initial), overrides=overrides)


def run_tool(ports, name, arguments=None, cache=None):
    results = []
    execute_tool(name, ports, arguments or {}, cache=cache).addBoth(results.append)
    assert len(results) == 1, "the tool did not finish synchronously"
    assert isinstance(results[0], dict)
    return results[0]


def two_projects():
    """The seed's 'before swap' picture: build_tavern active, quest_design paused."""
    ports = make_ports()
    run_tool(
        ports,
        "create_project",
        {
            "key": "build_tavern",
            "summary": "Construct a tavern in the north district",
            "context": "Progress: foundation complete, walls 50%",
        },
    )
    ports.clock.advance(hours=1)
    run_tool(
        ports,
        "create_project",
        {"key": "quest_design", "summary": "Design the goblin quest", "context": "Draft: act 1"},
    )
    return ports


# ----------------------------------------------------------------------------------------------
# create / list


def test_first_project_becomes_active_later_ones_wait_paused():
    ports = two_projects()
    doc = ports.state.get("projects")
    assert doc["active"] == "build_tavern"
    assert doc["slots"]["build_tavern"]["status"] == "active"
    assert doc["slots"]["quest_design"]["status"] == "paused"
    assert doc["slots"]["build_tavern"]["created_at"] == "2025-01-01T12:00:00Z"
    assert doc["slots"]["quest_design"]["created_at"] == "2025-01-01T13:00:00Z"
    assert set(doc["slots"]["quest_design"]) == {
        "summary",
        "context",
        "status",
        "created_at",
        "last_active",
    }


def test_create_normalizes_the_key_and_rejects_bad_ones():
    ports = make_ports()
    result = run_tool(ports, "create_project", {"key": "Build Tavern", "summary": "A tavern"})
    assert result["success"] and result["key"] == "build_tavern"
    bad = run_tool(ports, "create_project", {"key": "!!!", "summary": "x"})
    assert bad["success"] is False and "invalid project key" in bad["error"]
    assert list(ports.state.get("projects")["slots"]) == ["build_tavern"]


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"key": "build_tavern", "summary": "again"}, "already exists"),
        ({"key": "other", "summary": "   "}, "summary must not be empty"),
        ({"key": "other"}, "summary"),
        ({"key": "", "summary": "x"}, "project key is required"),
    ],
)
def test_create_refusals_change_nothing(arguments, message):
    ports = two_projects()
    before, saves = copy.deepcopy(ports.state.get("projects")), ports.state.saves
    result = run_tool(ports, "create_project", arguments)
    assert result["success"] is False
    assert message in result["error"]
    assert ports.state.get("projects") == before
    assert ports.state.saves == saves


def test_project_limit_comes_from_settings():
    ports = make_ports(overrides={"workspace.projects.max_projects": 1})
    assert run_tool(ports, "create_project", {"key": "a", "summary": "A"})["success"]
    result = run_tool(ports, "create_project", {"key": "b", "summary": "B"})
    assert result["success"] is False and "limit is 1" in result["error"]


def test_list_projects_marks_the_active_one_first_and_is_cached():
    ports = two_projects()
    cache = ToolCache(clock=lambda: 0.0)
    listed = run_tool(ports, "list_projects", cache=cache)
    assert listed["active"] == "build_tavern"
    assert [row["key"] for row in listed["projects"]] == ["build_tavern", "quest_design"]
    assert listed["projects"][0]["active"] is True
    assert listed["projects"][1]["status"] == "paused"
    assert listed["projects"][1]["context_chars"] == len("Draft: act 1")
    again = run_tool(ports, "list_projects", cache=cache)
    assert again.get("cached") is True


# ----------------------------------------------------------------------------------------------
# swap: the paging pattern


def test_swap_pages_the_current_project_out_and_the_other_in():
    ports = two_projects()
    ports.clock.advance(hours=1)
    result = run_tool(
        ports,
        "swap_project",
        {"project_key": "quest_design", "current_project_update": "Walls 60% done"},
    )
    assert result["success"] is True
    assert result["key"] == "quest_design"
    assert result["context"] == "Draft: act 1"  # restored
    assert result["previous"] == "build_tavern"
    doc = ports.state.get("projects")
    assert doc["active"] == "quest_design"
    assert doc["slots"]["quest_design"]["status"] == "active"
    assert doc["slots"]["build_tavern"]["status"] == "paused"
    assert doc["slots"]["build_tavern"]["context"] == "Walls 60% done"  # paged out
    assert doc["slots"]["build_tavern"]["last_active"] == iso(ports.clock.now())
    assert doc["slots"]["quest_design"]["last_active"] == iso(ports.clock.now())

    # and back again: the saved progress comes back untouched
    back = run_tool(ports, "swap_project", {"project_key": "build_tavern"})
    assert back["context"] == "Walls 60% done"
    assert ports.state.get("projects")["slots"]["quest_design"]["context"] == "Draft: act 1"


def test_swap_to_a_missing_project_is_an_error_and_changes_nothing():
    ports = two_projects()
    before, saves = copy.deepcopy(ports.state.get("projects")), ports.state.saves
    result = run_tool(
        ports, "swap_project", {"project_key": "castle", "current_project_update": "lost?"}
    )
    assert result["success"] is False
    assert "no project 'castle'" in result["error"]
    assert "build_tavern" in result["error"] and "quest_design" in result["error"]
    assert ports.state.get("projects") == before
    assert ports.state.saves == saves


def test_swap_to_the_active_project_is_refused():
    ports = two_projects()
    result = run_tool(ports, "swap_project", {"project_key": "build_tavern"})
    assert result["success"] is False and "already the active project" in result["error"]


def test_swap_without_update_keeps_the_old_context_and_reopens_completed_targets():
    ports = two_projects()
    doc = ports.state.get("projects")
    doc["slots"]["quest_design"]["status"] = "completed"
    ports.state.set("projects", doc)
    result = run_tool(ports, "swap_project", {"project_key": "quest_design"})
    assert result["reopened"] is True
    doc = ports.state.get("projects")
    assert doc["slots"]["build_tavern"]["context"] == "Progress: foundation complete, walls 50%"
    assert doc["slots"]["quest_design"]["status"] == "active"


def test_swap_with_no_active_project_says_the_update_was_not_stored():
    ports = two_projects()
    run_tool(ports, "update_project", {"status": "paused"})
    result = run_tool(
        ports, "swap_project", {"project_key": "quest_design", "current_project_update": "notes"}
    )
    assert result["success"] is True
    assert "not stored" in result["note"]
    assert all(slot["context"] != "notes" for slot in ports.state.get("projects")["slots"].values())


# ----------------------------------------------------------------------------------------------
# update


def test_update_project_replaces_context_and_completing_unloads_it():
    ports = two_projects()
    result = run_tool(ports, "update_project", {"context": "Roof on"})
    assert result["success"] and result["key"] == "build_tavern" and not result["unloaded"]
    assert ports.state.get("projects")["slots"]["build_tavern"]["context"] == "Roof on"

    done = run_tool(ports, "update_project", {"status": "completed"})
    assert done["unloaded"] is True
    doc = ports.state.get("projects")
    assert doc["active"] is None
    assert doc["slots"]["build_tavern"]["status"] == "completed"
    assert doc["slots"]["build_tavern"]["context"] == "Roof on"


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({}, "nothing to update"),
        ({"status": "finished"}, "status"),
        ({"context": "x" * 8001}, "too long"),
    ],
)
def test_update_project_refusals(arguments, message):
    ports = two_projects()
    before = copy.deepcopy(ports.state.get("projects"))
    result = run_tool(ports, "update_project", arguments)
    assert result["success"] is False and message in result["error"]
    assert ports.state.get("projects") == before


def test_update_project_needs_an_active_project():
    ports = make_ports()
    with pytest.raises(ProjectError, match="no project is active"):
        projects.Projects(ports).update(context="x")


# ----------------------------------------------------------------------------------------------
# prompt block and admin view


def test_project_context_block_shows_the_active_project_only():
    ports = make_ports()
    assert project_context_block(ports) is None
    ports = two_projects()
    block = project_context_block(ports)
    assert "build_tavern" in block
    assert "Construct a tavern in the north district" in block
    assert "foundation complete, walls 50%" in block
    assert "Draft: act 1" not in block  # paged out
    assert "1 paused project" in block


def test_format_projects_lists_every_slot_active_first():
    assert format_projects(None) == "No projects."
    assert format_projects({"active": None, "slots": {}}) == "No projects."
    ports = two_projects()
    doc = ports.state.get("projects")
    doc["slots"]["quest_design"]["context"] = "word " * 100
    text = format_projects(doc, context_chars=50)
    lines = text.splitlines()
    assert lines[0] == "Projects (2), active: build_tavern"
    assert lines[1].startswith("* build_tavern [active] - Construct a tavern")
    quest = next(i for i, line in enumerate(lines) if "quest_design" in line)
    assert lines[quest].startswith("  quest_design [paused]")
    assert lines[quest + 1].strip().endswith("...")
    assert len(lines[quest + 1].strip()) == 50
