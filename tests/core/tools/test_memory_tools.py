"""
The memory tools through the registry (as the ReAct loop and the in-game commands run them).
"""

import json

import pytest
from support import make_ports, result_of, sync_runner
from twisted.internet import defer

from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.memory.persona import SELF_REFERENCE_ERROR
from ai_assistant.plumbing.settings import DEFAULTS, Settings
from ai_assistant.tools import memory as memory_tools
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import REGISTRY, SLEEP_MODE_TOOLS, ToolCategory, execute_tool

load_all_tools()  # the tools are in the registry once the catalogue is loaded


@pytest.fixture
def ports(tmp_path):
    store = make_semantic_store(Settings(DEFAULTS), str(tmp_path), "ada", runner=sync_runner)
    bundle = make_ports(key="ada", semantic=store)
    bundle.logs = bundle.log
    yield bundle
    store.close()


def run(ports, name, arguments):
    return result_of(execute_tool(name, ports, arguments))


def test_tools_are_registered_in_the_memory_family():
    store, recall = REGISTRY.get("store_memory"), REGISTRY.get("recall_memories")
    assert isinstance(store, memory_tools.StoreMemoryTool)
    assert isinstance(recall, memory_tools.SearchFactsTool)
    assert store.family == recall.family == "memory"
    assert store.category == ToolCategory.ASYNC_REQUIRED
    assert recall.category == ToolCategory.SAFE_CHAIN
    assert {"store_memory", "search_facts"} <= set(SLEEP_MODE_TOOLS)  # recall_memories, renamed


def test_store_then_recall(ports):
    stored = run(ports, "store_memory", json.dumps({
        "content": "Alice prefers tea over coffee.", "source_type": "direct",
        "source_entity": "Alice", "tags": ["drinks"], "importance": 6,
        "reasoning": "remember her taste",
    }))
    assert stored["success"] is True and stored["duplicate"] is False
    assert len(stored["memory_ids"]) == 1
    memory = result_of(ports.semantic.get(stored["memory_ids"][0]))
    assert memory["metadata"] == {
        "source": "tool", "tags": ["drinks"], "source_type": "direct", "source_trust": 0.9,
        "source_entity": "Alice", "importance": 6, "importance_method": "manual",
        "provenance": {"speaker_id": None, "speaker": "Alice", "channel": "told",
                       "trust": 0.9, "derived_from": []},
    }

    recalled = run(ports, "recall_memories", {"query": "What does Alice drink?"})
    assert recalled["success"] is True and recalled["count"] == 1
    assert recalled["memories"][0]["memory"] == "Alice prefers tea over coffee."
    assert recalled["memories"][0]["trust"] == 0.9

    again = run(ports, "store_memory", {"content": "Alice prefers tea over coffee."})
    assert again["duplicate"] is True and again["memory_ids"] == stored["memory_ids"]


def test_importance_is_scored_when_not_given(ports):
    stored = run(ports, "store_memory", {"content": "The well in the square is dry.",
                                         "source_type": "environmental"})
    metadata = result_of(ports.semantic.get(stored["memory_ids"][0]))["metadata"]
    assert metadata["importance_method"] == "heuristic"
    assert 1 <= metadata["importance"] <= 10 and metadata["source_trust"] == 0.3


def test_recall_respects_the_trust_floor(ports):
    run(ports, "store_memory", {"content": "The duke is a smuggler, says the gossip.",
                                "source_type": "environmental"})
    assert run(ports, "recall_memories", {"query": "Is the duke a smuggler?"})["count"] == 0
    lenient = run(ports, "recall_memories", {"query": "Is the duke a smuggler?",
                                             "min_source_trust": 0.2, "limit": 3})
    assert lenient["count"] == 1


@pytest.mark.parametrize("arguments, message", [
    ({"content": "   "}, "content is required"),
    ({"content": "x" * 5000}, "too long"),
    ({"content": "Fine.", "source_type": "rumour"}, "source_type"),
    ({"content": "Fine.", "importance": 11}, "importance"),
    ({"content": "Fine.", "source_trust": 2}, "source_trust"),
    ('{"content": ', "not valid JSON"),
])
def test_store_memory_rejects_bad_input(ports, arguments, message):
    result = run(ports, "store_memory", arguments)
    assert result["success"] is False and message in result["error"]
    assert result_of(ports.semantic.list()) == []


def test_store_memory_refuses_self_reference(ports):
    result = run(ports, "store_memory", {"content": "I helped the player find the inn."})
    assert result == {"success": False, "error": SELF_REFERENCE_ERROR,
                      "suggestion": memory_tools.SELF_REFERENCE_SUGGESTION}
    assert result_of(ports.semantic.list()) == []


def test_recall_memories_rejects_bad_input(ports):
    assert "query" in run(ports, "recall_memories", {})["error"]
    assert "query" in run(ports, "recall_memories", {"query": "  "})["error"]
    assert "limit" in run(ports, "recall_memories", {"query": "tea", "limit": 0})["error"]


def test_store_failure_is_a_result_not_a_traceback(ports):
    class Down:
        def add(self, *args, **kwargs):
            return defer.fail(ConnectionError("store down"))

        def search(self, *args, **kwargs):
            return defer.fail(ConnectionError("store down"))

    ports.semantic = Down()
    stored = run(ports, "store_memory", {"content": "Alice prefers tea."})
    assert stored == {"success": False, "error": "the memory store failed: store down"}
    recalled = run(ports, "recall_memories", {"query": "tea"})
    assert recalled["success"] is False and "store down" in recalled["error"]
    assert any("store down" in line for line in ports.logs)


def test_without_a_semantic_store_the_tools_say_so(ports):
    ports.semantic = None
    for name, arguments in (("store_memory", {"content": "Alice prefers tea."}),
                            ("recall_memories", {"query": "tea"})):
        result = run(ports, name, arguments)
        assert result["success"] is False and "not available" in result["error"]


def test_admin_formatter_renders_the_tool_result(ports):
    run(ports, "store_memory", {"content": "Alice prefers tea over coffee.",
                                "source_type": "direct", "source_entity": "Alice"})
    recalled = run(ports, "recall_memories", {"query": "What does Alice drink?"})
    text = memory_tools.format_memory_results("What does Alice drink?", recalled["memories"])
    assert text.splitlines()[0] == "Memories for 'What does Alice drink?' (1):"
    assert "trust 0.90 from Alice | Alice prefers tea over coffee." in text
