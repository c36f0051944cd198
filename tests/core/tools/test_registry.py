"""The tool registry and execute_tool, and the settings lookup."""

import json
from unittest.mock import patch

import jsonschema
import pytest
import support
from scripted_llm import FakeWorld
from twisted.internet import defer

from ai_assistant.plumbing.settings import DEFAULTS, Settings
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import (
    KITS,
    SLEEP_MODE_TOOLS,
    Tool,
    ToolCache,
    ToolCategory,
    ToolRegistry,
    execute_tool,
    lean_tools,
    unknown_tool_result,
)


class Echo(Tool):
    name = "echo"
    description = "Echo a word."
    parameters = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 5}},
                  "required": ["word"]}
    cacheable = True
    cache_ttl = 10

    def __init__(self):
        self.runs = 0

    def run(self, ports, word):
        self.runs += 1
        return {"success": True, "word": word}


class Danger(Tool):
    name = "danger"
    category = ToolCategory.DANGEROUS

    def run(self, ports):
        return {"success": True}


class Explodes(Tool):
    name = "explodes"

    def run(self, ports):
        raise RuntimeError("kaboom")


def ports():
    made = support.make_ports(key="k")
    return made, made.log


def result(deferred):
    out = []
    deferred.addBoth(out.append)
    return out[0]


def test_arguments_are_validated_with_clear_errors():
    p, _ = ports()
    tool = Echo()
    assert "not valid JSON" in result(execute_tool(tool, p, "{nope"))["error"]
    assert "JSON object" in result(execute_tool(tool, p, "[1, 2]"))["error"]
    assert "missing required argument 'word'" in result(execute_tool(tool, p, {}))["error"]
    assert "'word' is too long: at most 5" in result(
        execute_tool(tool, p, {"word": "toolong"}))["error"]
    assert tool.runs == 0
    assert result(execute_tool(tool, p, '{"word": "hi"}')) == {"success": True, "word": "hi"}


def test_a_tools_schema_is_checked_once_and_a_changed_one_again():
    p, _ = ports()
    tool = Echo()
    with patch.object(jsonschema.validators.Draft202012Validator, "check_schema",
                      wraps=jsonschema.validators.Draft202012Validator.check_schema) as check:
        for word in ("hi", "toolong", "yo"):
            execute_tool(tool, p, {"word": word})
        assert check.call_count == 1
        tool.parameters = {**Echo.parameters, "properties": {"word": {"type": "integer"}}}
        assert "'word' must be a whole number" in result(
                execute_tool(tool, p, {"word": "hi"}))["error"]
        assert check.call_count == 2
    assert tool.runs == 2


def test_reasoning_is_logged_and_never_passed_to_the_tool():
    p, logs = ports()
    out = result(execute_tool(Echo(), p, {"word": "hi", "reasoning": "to test"}))
    assert out["success"] and logs == ["Ada -> echo: to test"]


def test_unknown_tool_lists_the_known_ones():
    p, _ = ports()
    load_all_tools()
    out = result(execute_tool("fly", p, {}))
    assert "unknown tool 'fly'" in out["error"] and "say" in out["error"]


def test_dangerous_tools_need_permission():
    p, _ = ports()
    assert "disabled" in result(execute_tool(Danger(), p, {}))["error"]
    assert result(execute_tool(Danger(), p, {}, allow_dangerous=True))["success"]


def test_exceptions_become_results():
    p, logs = ports()
    out = result(execute_tool(Explodes(), p, {}))
    assert out == {"success": False, "error": "'explodes' failed: kaboom"}
    assert logs


def test_cache_reuses_results_and_writes_invalidate_it():
    p, _ = ports()
    now = [0.0]
    cache = ToolCache(clock=lambda: now[0])
    tool = Echo()
    result(execute_tool(tool, p, {"word": "a"}, cache=cache))
    assert result(execute_tool(tool, p, {"word": "a"}, cache=cache))["cached"] is True
    assert tool.runs == 1
    result(execute_tool(Danger(), p, {}, cache=cache, allow_dangerous=True))  # a write
    result(execute_tool(tool, p, {"word": "a"}, cache=cache))
    assert tool.runs == 2
    now[0] = 11.0  # past the ttl
    result(execute_tool(tool, p, {"word": "a"}, cache=cache))
    assert tool.runs == 3


def test_deferred_tools_time_out():
    from twisted.internet.task import Clock

    class Slow(Tool):
        name = "slow"
        timeout = 5

        def run(self, ports):
            return defer.Deferred()

    p, _ = ports()
    clock = Clock()
    d = execute_tool(Slow(), p, {}, reactor=clock)
    clock.advance(6)
    assert result(d) == {"success": False, "error": "'slow' timed out after 5s"}


def test_registry_offers_sleep_tools_and_hides_dangerous():
    registry = load_all_tools()
    asleep = {tool.name for tool in registry.available("sleep")}
    assert asleep == set(SLEEP_MODE_TOOLS)
    fresh = ToolRegistry()
    fresh.register(Danger)
    assert fresh.available() == []
    assert [t.name for t in fresh.available(dangerous_enabled=True)] == ["danger"]


def test_registering_a_tool_again_keeps_its_instance_and_its_checked_schema():
    """Every cycle loads the catalogue: a tool's validator (its schema checked, ~2 ms) must not
    be thrown away with a fresh instance each time. Another class of the same name still
    replaces it (a reloaded module's class)."""
    registry = ToolRegistry()
    registry.register(Echo)
    validator = registry.get("echo").validator()
    registry.register(Echo)
    assert registry.get("echo").validator() is validator

    class Echo2(Echo):  # the same qualified name, as a reloaded module's class has
        pass

    Echo2.__qualname__ = Echo.__qualname__
    registry.register(Echo2)
    assert type(registry.get("echo")) is Echo2


def test_every_tool_validates_reasoning_but_offers_a_compact_schema():
    for tool in load_all_tools().all():
        spec = tool.spec()["function"]
        assert spec["name"] == tool.name and spec["description"]
        # every tool takes `reasoning`; the system prompt says so once instead of 27 times
        assert "reasoning" in tool.schema()["properties"]
        assert "reasoning" not in spec["parameters"]["properties"]
        assert "additionalProperties" not in spec["parameters"]
        assert tool.kit in KITS


def test_unknown_arguments_are_dropped_and_named_never_a_crash():
    p, _ = ports()
    load_all_tools()
    world = FakeWorld()
    p = support.make_ports(key="k", world=world)
    out = result(execute_tool("say", p, {"message": "hi", "text": "hi", "volume": 3}))
    assert out["success"] and world.said == ["hi"]
    assert "ignored unknown arguments: text, volume" in out["note"]
    # journal tools forbid additional properties in their schema: dropped all the same
    out = result(execute_tool("add_journal_entry", p, {"content": "Bob likes tea.", "mood": 1}))
    assert out["success"] and "mood" in out["note"]


def test_a_lone_stray_argument_is_taken_for_the_missing_one():
    load_all_tools()
    world = FakeWorld()
    p = support.make_ports(key="k", world=world)
    out = result(execute_tool("say", p, {"text": "hello there"}))
    assert out["success"] and world.said == ["hello there"]
    assert "took 'text' as 'message'" in out["note"]


def test_numbers_and_booleans_sent_as_text_are_coerced():
    class Typed(Tool):
        name = "typed"
        parameters = {"type": "object", "properties": {
            "count": {"type": "integer", "minimum": 1}, "ratio": {"type": "number"},
            "flag": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
            "label": {"type": "string"}}}

        def run(self, ports, **params):
            return {"success": True, **params}

    p, _ = ports()
    out = result(execute_tool(Typed(), p, {"count": "3", "ratio": " 0.5", "flag": "false",
                                           "tags": '["a", "b"]', "label": "7"}))
    assert out == {"success": True, "count": 3, "ratio": 0.5, "flag": False,
                   "tags": ["a", "b"], "label": "7"}
    assert result(execute_tool(Typed(), p, {"count": 2.0}))["count"] == 2
    assert result(execute_tool(Typed(), p, {"flag": "yes"}))["flag"] is True
    # only text that reads as the type is converted: anything else is still refused
    assert not result(execute_tool(Typed(), p, {"tags": "solo"}))["success"]
    assert not result(execute_tool(Typed(), p, {"label": 7}))["success"]
    bad = result(execute_tool(Typed(), p, {"count": "many"}))
    assert not bad["success"] and "count" in bad["error"]


def test_double_encoded_arguments_are_unwrapped():
    p, _ = ports()
    twice = json.dumps(json.dumps({"word": "hi"}))
    assert result(execute_tool(Echo(), p, twice)) == {"success": True, "word": "hi"}


def test_unknown_tool_names_close_ones():
    p, _ = ports()
    load_all_tools()
    out = result(execute_tool("say_hello", p, {}))
    assert "unknown tool 'say_hello'" in out["error"] and "say" in out["close_names"]
    out = unknown_tool_result("search_memories", ["search_facts", "search_journal", "say"])
    assert set(out["close_names"]) >= {"search_facts", "search_journal"}


def test_unknown_arguments_are_dropped_for_create_project_but_refused_for_self_modification():
    load_all_tools()
    p = support.make_ports(key="k")
    out = result(execute_tool("create_project", p, {"key": "inn", "summary": "x", "colour": "red"}))
    assert out["success"] and "colour" in out["note"]
    out = result(execute_tool("update_system_prompt", p, {"new_prompt": "Be brief.", "reason": "x",
                                                          "target": "user_system_prompt"}))
    assert not out["success"] and "target" in out["error"]


def test_former_lookup_names_are_aliases():
    registry = load_all_tools()
    for old, new in (("recall", "recall_scenes"), ("recall_memory", "open_memory_cluster"),
                     ("recall_memories", "search_facts"),
                     ("search_memory", "find_scenes_by_keyword")):
        assert registry.get(old).name == new and registry.canonical(old) == new
        assert old in registry.get(new).aliases and old not in registry.names()


def test_lookup_tool_names_are_not_confusable():
    """No two offered lookup tools share a verb-and-object pattern a model could mix up."""
    names = load_all_tools().names()
    assert not {"recall", "recall_memory", "recall_memories", "search_memory"} & set(names)
    lookups = [name for name in names if name.split("_")[0] in ("recall", "search", "find")]
    assert len({name.split("_", 1)[1] for name in lookups}) == len(lookups)


def test_lean_tools_for_a_conversation_and_on_request():
    available = load_all_tools().available("awake")
    chat = {t.name for t in lean_tools(available, "conversation", "hello there")}
    assert chat == {"say", "emote", "whisper", "noop", "inspect_location", "search_journal",
                    "add_journal_entry", "recall_scenes"}
    asked = {t.name for t in lean_tools(available, "conversation", "Can you add a goal for me?")}
    assert {"add_goal", "update_goal", "create_project"} <= asked
    assert "note_scene" not in asked
    remembered = {t.name for t in lean_tools(available, "conversation", "Remember this: no onions")}
    assert {"search_facts", "note_scene", "add_session_memory"} <= remembered
    assert {t.name for t in lean_tools(available, "conversation", "Do you remember me?")} == chat
    assert {t.name for t in lean_tools(available, "autonomous")} == {t.name for t in available}


def test_settings_overrides_and_known_keys():
    settings = Settings(tree=DEFAULTS, overrides={"journal.max_entries": 7, "llm.extra.top_p": 1})
    assert settings.get("journal.max_entries") == 7
    assert settings.get("journal")["max_entries"] == 7
    assert settings.get("llm.extra") == {"top_p": 1}
    with pytest.raises(KeyError):
        settings.get("no.such")
    assert settings.known_key("ticks.awake") and settings.known_key("llm.extra.seed")
    assert not settings.known_key("ticks") and not settings.known_key("nope.nope")
