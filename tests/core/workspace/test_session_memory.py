"""Session memory: storing, persona protection, compaction."""

import copy

import pytest
import support

from ai_assistant.agent.blocks.workspace import session_memory_context_block
from ai_assistant.memory.persona import SELF_REFERENCE_ERROR, SELF_REFERENCE_SUGGESTION
from ai_assistant.plumbing.ports import MemoryState
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import execute_tool
from ai_assistant.workspace.session_memory import (
    format_session_memory,
    similarity,
)

load_all_tools()


def make_ports(initial=None, overrides=None):
    return support.make_ports(key="ada", state=MemoryState(initial), overrides=overrides)


def run_tool(ports, name, arguments=None):
    results = []
    execute_tool(name, ports, arguments or {}).addBoth(results.append)
    assert len(results) == 1
    assert isinstance(results[0], dict)
    return results[0]


def remember(ports, content, memory_type="fact"):
    return run_tool(ports, "add_session_memory", {"content": content, "memory_type": memory_type})


def test_each_memory_type_goes_to_its_list():
    ports = make_ports()
    assert remember(ports, "Player Alice prefers formal address")["added"] is True
    assert remember(ports, "Players tend to explore before asking for help", "pattern")["success"]
    ports.clock.advance(minutes=5)
    assert remember(ports, "The tavern roof was repaired", "completed_task")["success"]
    doc = ports.state.get("session_memory")
    assert doc["key_facts"] == ["Player Alice prefers formal address"]
    assert doc["learned_patterns"] == ["Players tend to explore before asking for help"]
    assert doc["completed_tasks"] == [
        {"description": "The tavern roof was repaired", "timestamp": "2025-01-01T12:05:00Z"}
    ]
    assert doc["last_compacted"] is None


@pytest.mark.parametrize(
    "content",
    ["I helped the player", "I should be more formal", "The assistant suggested a route"],
)
def test_self_referential_content_is_rejected_with_the_seeds_error(content):
    ports = make_ports()
    result = remember(ports, content)
    assert result == {
        "success": False,
        "error": "Content appears to reference assistant actions or identity",
        "suggestion": "Session memory should contain facts about the WORLD, PLAYERS, "
        "or EVENTS - not what you did. Rephrase in third-person.",
    }
    assert result["error"] == SELF_REFERENCE_ERROR
    assert result["suggestion"] == SELF_REFERENCE_SUGGESTION
    assert ports.state.get("session_memory") is None  # nothing written
    assert ports.state.saves == 0


@pytest.mark.parametrize(
    "content",
    [
        "Player Alice completed the quest",
        "The tavern has 5 rooms",
        "Players prefer concise responses",
    ],
)
def test_world_facts_are_accepted(content):
    ports = make_ports()
    assert remember(ports, content)["success"] is True
    assert ports.state.get("session_memory")["key_facts"] == [content]


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"content": "   "}, "must not be empty"),
        ({"content": "x", "memory_type": "insight"}, "insight"),
        ({"content": "x" * 1001}, "too long"),
        ({"memory_type": "fact"}, "content"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(arguments, message):
    ports = make_ports()
    remember(ports, "The north gate closes at midnight")
    before, saves = copy.deepcopy(ports.state.get("session_memory")), ports.state.saves
    result = run_tool(ports, "add_session_memory", arguments)
    assert result["success"] is False and message in result["error"]
    assert "suggestion" not in result
    assert ports.state.get("session_memory") == before and ports.state.saves == saves


def test_the_same_fact_is_not_stored_twice():
    ports = make_ports()
    remember(ports, "The north gate closes at midnight")
    again = remember(ports, "  the north gate closes at MIDNIGHT. ")
    assert again["success"] is True and again["added"] is False
    assert "already remembered" in again["note"]
    assert ports.state.get("session_memory")["key_facts"] == ["The north gate closes at midnight"]


def test_a_full_list_asks_for_compaction():
    ports = make_ports(overrides={"workspace.session_memory.max_items": 2})
    remember(ports, "Fact one about the well")
    remember(ports, "Fact two about the mill")
    result = remember(ports, "Fact three about the bridge")
    assert result["success"] is False and "compact_session_memory" in result["error"]
    assert len(ports.state.get("session_memory")["key_facts"]) == 2


def test_similarity_is_token_set_overlap():
    assert similarity("Alice prefers formal address", "alice PREFERS formal address!") == 1.0
    assert similarity("Player Alice prefers formal address", "Alice prefers formal address") == 0.8
    assert similarity("The north gate closes", "A dragon sleeps") == 0.0


def test_compaction_removes_duplicates_and_near_duplicates_and_reports_them():
    ports = make_ports(
        {
            "session_memory": {
                "key_facts": [
                    "Alice prefers formal address",
                    "The north gate closes at midnight",
                    "the north gate closes at midnight.",
                    "Player Alice prefers formal address",
                    "The north gate opens at dawn",
                    "",
                ],
                "learned_patterns": [
                    "Players tend to explore before asking for help",
                    "Players tend to explore before asking help",
                    "Players  tend to explore before asking for help",
                ],
                "completed_tasks": [
                    {"description": "Tavern built", "timestamp": "2025-01-01T10:00:00Z"},
                    {"description": "tavern built", "timestamp": "2025-01-01T11:00:00Z"},
                    {"description": "Bridge repaired", "timestamp": "2025-01-01T11:30:00Z"},
                ],
                "last_compacted": None,
            }
        }
    )
    ports.clock.advance(days=1)
    result = run_tool(ports, "compact_session_memory")
    assert result["success"] is True
    doc = ports.state.get("session_memory")
    # the longer wording of a near-duplicate wins, in the first one's place
    assert doc["key_facts"] == [
        "Player Alice prefers formal address",
        "The north gate closes at midnight",
        "The north gate opens at dawn",  # similar words, different fact: kept
    ]
    assert doc["learned_patterns"] == ["Players tend to explore before asking for help"]
    assert doc["completed_tasks"] == [
        {"description": "Tavern built", "timestamp": "2025-01-01T10:00:00Z"},
        {"description": "Bridge repaired", "timestamp": "2025-01-01T11:30:00Z"},
    ]
    assert doc["last_compacted"] == "2025-01-02T12:00:00Z"
    assert result["last_compacted"] == "2025-01-02T12:00:00Z"
    assert sorted(result["removed"]["key_facts"]) == sorted(
        ["Alice prefers formal address", "the north gate closes at midnight.", ""]
    )
    assert len(result["removed"]["learned_patterns"]) == 2
    assert result["removed"]["completed_tasks"] == [
        {"description": "tavern built", "timestamp": "2025-01-01T11:00:00Z"}
    ]
    assert result["removed_count"] == 6
    assert result["counts"] == {"key_facts": 3, "learned_patterns": 1, "completed_tasks": 2}

    # compacting again finds nothing more
    second = run_tool(ports, "compact_session_memory")
    assert second["removed_count"] == 0
    assert ports.state.get("session_memory")["key_facts"] == doc["key_facts"]


def test_compaction_threshold_is_a_setting():
    facts = ["Player Alice prefers formal address", "Alice prefers formal address"]
    strict = make_ports(
        {"session_memory": {"key_facts": list(facts)}},
        overrides={"workspace.session_memory.near_duplicate": 0.9},
    )
    assert run_tool(strict, "compact_session_memory")["removed_count"] == 0
    loose = make_ports({"session_memory": {"key_facts": list(facts)}})
    assert run_tool(loose, "compact_session_memory")["removed_count"] == 1


def test_context_block_and_admin_view():
    ports = make_ports()
    assert session_memory_context_block(ports) is None
    remember(ports, "The north gate closes at midnight")
    remember(ports, "Players prefer concise responses", "pattern")
    remember(ports, "Tavern built", "completed_task")
    block = session_memory_context_block(ports)
    assert "Key facts:\n- The north gate closes at midnight" in block
    assert "Learned patterns:\n- Players prefer concise responses" in block
    assert "Tavern built" not in block
    text = format_session_memory(ports.state.get("session_memory"))
    assert "Completed tasks (1):" in text and "2025-01-01T12:00:00Z  Tavern built" in text
    assert text.endswith("Last compacted: never")
