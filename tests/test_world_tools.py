"""The world tools, run the one way tools run: through `execute_tool`, against a fake body."""

import pytest
import support
from scripted_llm import FakeWorld, drive

from ai_assistant.tools import world as world_tools
from ai_assistant.tools.registry import REGISTRY, ToolCache, ToolCategory, execute_tool

pytestmark = pytest.mark.core


@pytest.fixture
def world():
    return FakeWorld()


@pytest.fixture
def ports(world):
    return support.make_ports(key="ada", world=world)


def run(ports, name, arguments, cache=None):
    return drive(execute_tool(name, ports, arguments, cache=cache))


def test_registered_with_sensible_categories():
    expected = {
        "say": ToolCategory.TERMINAL,
        "emote": ToolCategory.TERMINAL,
        "noop": ToolCategory.TERMINAL,
        "whisper": ToolCategory.SAFE_CHAIN,
        "page": ToolCategory.SAFE_CHAIN,
        "inspect_location": ToolCategory.SAFE_CHAIN,
    }
    for name, category in expected.items():
        tool = REGISTRY.get(name)
        assert tool is not None and tool.category == category and tool.family == "world"
    assert "noop" in {tool.name for tool in REGISTRY.available(mode="sleep")}


def test_say_speaks_and_logs_reasoning(ports, world):
    result = run(ports, "say", '{"message": "  Welcome, traveller. ", "reasoning": "greet"}')
    assert result == {"success": True, "said": "Welcome, traveller."}
    assert world.said == ["Welcome, traveller."]
    assert ports.log == ["Ada -> say: greet"]


@pytest.mark.parametrize(
    "arguments, error",
    [
        ({"message": "x" * (world_tools.MAX_MESSAGE_CHARS + 1)}, "too long (2001 characters"),
        ({"message": "   "}, "message is empty"),
        ({}, "missing required argument 'message'"),
        ({"message": 42}, "'message' must be text, not 42"),
        ('{"message": "unterminated', "not valid JSON"),
    ],
)
def test_say_rejects_bad_input_clearly(ports, world, arguments, error):
    result = run(ports, "say", arguments)
    assert result["success"] is False
    assert error in result["error"]
    assert len(result["error"]) < 200  # the oversized text is not echoed back
    assert world.said == []


def test_emote(ports, world):
    assert run(ports, "emote", {"action": "nods slowly."})["success"]
    assert world.emotes == ["nods slowly."]
    assert not run(ports, "emote", {"action": ""})["success"]
    assert world.emotes == ["nods slowly."]


@pytest.mark.parametrize("name", ["whisper", "page"])
def test_whisper_and_page_reach_someone_present(ports, world, name):
    result = run(ports, name, {"target": "Bob", "message": "psst"})
    assert result == {"success": True, "target": "Bob", "message": "psst"}
    assert world.whispers == [("Bob", "psst")]


@pytest.mark.parametrize("name", ["whisper", "page"])
def test_whisper_fails_clearly_when_target_absent(ports, world, name):
    result = run(ports, name, {"target": "Carol", "message": "psst"})
    assert result["success"] is False
    assert "Carol" in result["error"] and "nobody called" in result["error"]
    assert result["present"] == ["Bob"]
    assert world.whispers == []


def test_inspect_location_is_cached_per_tick(ports, world):
    cache = ToolCache()
    first = run(ports, "inspect_location", {}, cache)
    assert first["success"] and first["location"]["name"] == "The Tavern"
    assert first["present"] == [{"id": "#2", "name": "Bob", "is_player": True}]
    second = run(ports, "inspect_location", {"reasoning": "again"}, cache)
    assert second["cached"] is True and world.looks == 1
    cache.new_tick()
    run(ports, "inspect_location", {}, cache)
    assert world.looks == 2


def test_noop_does_nothing(ports, world):
    assert run(ports, "noop", {}) == {"success": True, "result": "nothing to do"}
    assert world.actions == [] and world.looks == 0


def test_without_a_body_tools_fail_clearly(ports):
    ports.world = None
    for name, arguments in [
        ("say", {"message": "hi"}),
        ("emote", {"action": "waves"}),
        ("whisper", {"target": "Bob", "message": "hi"}),
        ("inspect_location", {}),
    ]:
        result = run(ports, name, arguments)
        assert result == {"success": False, "error": "Ada has no body in the game right now"}
