"""
One argument policy for every tool (issue 34): unknown arguments are dropped and named, a
single stray argument fills a single missing required one, a former tool's arguments are mapped,
and what is still wrong reads as a sentence - never the schema validator's text.
"""

import pytest
from support import make_ports
from test_node_tools import embedder, memory_graph, run  # noqa: F401  (fixture)
from test_nodes import axis_vector

from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import REGISTRY

pytestmark = pytest.mark.core

load_all_tools()
SCHEMA_WORDS = ("is a required property", "is not of type", "Additional properties",
                "is too short", "is too long", "does not match", "is not one of")


def test_recall_memory_with_its_former_query_runs_the_scene_search(embedder):  # noqa: F811
    ports = make_ports()
    memory_graph(ports)
    embedder.table = {"bread": axis_vector(0)}
    result = run(ports, "recall_memory", {"query": "bread"})
    assert result["success"], result
    assert set(result["node_ids"]) == {"a", "b", "c"}
    assert "ran recall_scenes" in result["note"]
    # its own argument still opens a cluster
    opened = run(ports, "recall_memory", {"cluster_id": "Bread"})
    assert opened["success"] and opened["cluster"]["name"] == "Bread" and "note" not in opened


def test_every_tool_refuses_missing_arguments_in_a_sentence():
    ports = make_ports()
    checked = 0
    for tool in REGISTRY.all():
        required = tool.parameters.get("required") or []
        if not required:
            continue
        result = run(ports, tool.name, {})
        assert result["success"] is False, tool.name
        error = result["error"]
        assert error.startswith(f"{tool.name}: missing required argument '{required[0]}'")
        assert error.endswith(".") and not any(words in error for words in SCHEMA_WORDS)
        checked += 1
    assert checked >= 15


def test_every_tool_takes_a_lone_stray_text_for_its_lone_missing_text():
    ports = make_ports()
    fitted = 0
    for tool in REGISTRY.all():
        required = tool.parameters.get("required") or []
        properties = tool.parameters.get("properties") or {}
        if len(required) != 1 or properties[required[0]].get("type") != "string":
            continue
        result = run(ports, tool.name, {"zzz_stray": "bread"})
        if tool.strict_arguments:  # documented: never guessed at
            assert "refused" in result["error"] and "'zzz_stray'" in result["error"]
            continue
        assert f"took 'zzz_stray' as '{required[0]}'" in result.get("note", ""), (tool.name,
                                                                                 result)
        fitted += 1
    assert fitted >= 8


def test_a_stray_of_the_wrong_kind_is_dropped_not_taken():
    ports = make_ports()
    result = run(ports, "say", {"volume": 3})
    assert result["success"] is False
    assert result["error"] == ("say: missing required argument 'message'; it takes message "
                               "(text, required).")
    assert "ignored unknown arguments: volume" in result["note"]


def test_update_system_prompt_refuses_in_sentences_and_names_the_stray():
    ports = make_ports()
    result = run(ports, "update_system_prompt", {"text": "Be terse."})
    assert result["success"] is False
    assert result["error"].startswith("update_system_prompt: refused, it does not take 'text'")
    assert "new_prompt" in result["error"] and not any(w in result["error"] for w in SCHEMA_WORDS)
    result = run(ports, "update_system_prompt", {"new_prompt": "Be terse."})
    assert result["error"].startswith("update_system_prompt: missing required argument 'reason'")


def test_wrong_types_and_bounds_read_as_sentences():
    ports = make_ports()
    assert run(ports, "find_scenes_by_keyword", {"query": "x", "limit": "many"})["error"] == (
        "find_scenes_by_keyword: 'limit' must be a whole number, not 'many'.")
    assert run(ports, "find_scenes_by_keyword", {"query": "x", "limit": 99})["error"] == (
        "find_scenes_by_keyword: 'limit' must be at most 50.")
    assert run(ports, "find_scenes_by_keyword", {"query": "x", "mode": "xor"})["error"] == (
        "find_scenes_by_keyword: 'mode' must be one of: or, and; got 'xor'.")
