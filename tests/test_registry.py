"""The tool registry and execute_tool, and the settings lookup."""

import pytest
import support
from twisted.internet import defer

from ai_assistant.plumbing.settings import DEFAULTS, Settings
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import (
    SLEEP_MODE_TOOLS,
    Tool,
    ToolCache,
    ToolCategory,
    ToolRegistry,
    execute_tool,
)

pytestmark = pytest.mark.core


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
    assert "'word' is a required property" in result(execute_tool(tool, p, {}))["error"]
    assert "invalid argument word" in result(execute_tool(tool, p, {"word": "toolong"}))["error"]
    assert tool.runs == 0
    assert result(execute_tool(tool, p, '{"word": "hi"}')) == {"success": True, "word": "hi"}


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


def test_every_tool_has_a_schema_with_reasoning():
    for tool in load_all_tools().all():
        spec = tool.spec()["function"]
        assert spec["name"] == tool.name and spec["description"]
        assert "reasoning" in spec["parameters"]["properties"]


def test_settings_overrides_and_known_keys():
    settings = Settings(tree=DEFAULTS, overrides={"journal.max_entries": 7, "llm.extra.top_p": 1})
    assert settings.get("journal.max_entries") == 7
    assert settings.get("journal")["max_entries"] == 7
    assert settings.get("llm.extra") == {"top_p": 1}
    with pytest.raises(KeyError):
        settings.get("no.such")
    assert settings.known_key("ticks.awake") and settings.known_key("llm.extra.seed")
    assert not settings.known_key("ticks") and not settings.known_key("nope.nope")
