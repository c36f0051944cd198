"""
Validated settings: one table of types and ranges, `validate`, bad stored values ignored and
reported, the environment variables the contrib reads itself, and the line the first LLM
request logs about where its endpoint came from (core, no Evennia).
"""

import pytest
import support
from scripted_llm import Reply, sync_runner
from twisted.internet import task

from ai_assistant.plumbing import llm as llm_module
from ai_assistant.plumbing.environment import setting_source
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.settings import (
    DEFAULTS,
    SETTINGS_BY_KEY,
    SettingError,
    Settings,
    deep_merge,
    leaf_keys,
    setting_type,
    settings_tree,
    validate,
)

pytest_plugins = ["scripted_llm"]


def test_every_number_and_every_choice_has_its_range_in_the_one_table():
    for key in leaf_keys():
        kind, limits = setting_type(key), SETTINGS_BY_KEY[key].range
        if kind in (int, float):
            assert limits is not None, f"{key} has no range"
            low, high = limits
            assert low <= high
            default = Settings(DEFAULTS).get(key)
            assert default is None or low <= default <= high, f"{key}'s default is out of range"
        elif limits:  # a string with choices: its default is one of them
            assert DEFAULTS_value(key) in limits
    assert not any(row.free_form and row.range for row in SETTINGS_BY_KEY.values())


def DEFAULTS_value(key):
    return Settings(DEFAULTS).get(key)


@pytest.mark.parametrize("key, value, message", [
    ("ticks.awake", "banana", "ticks.awake takes a whole number from 1 to 86400; got 'banana'"),
    ("ticks.awake", -5, "ticks.awake takes a whole number from 1 to 86400; got -5"),
    ("ticks.awake", 2.5, "a whole number from 1 to 86400"),
    ("llm.temperature", 99, "llm.temperature takes a number from 0.0 to 2.0; got 99"),
    ("journal.fusion", "best", "journal.fusion takes one of score, rrf; got 'best'"),
    ("sleep.enabled", "maybe", "sleep.enabled takes true or false; got 'maybe'"),
    ("memory.enabled", 1.5, "true or false"),
    ("llm.model", None, "llm.model takes text; got None"),
    ("llm.max_tokens", True, "a whole number"),
    ("llm.timeout", float("nan"), "llm.timeout takes a number"),
    ("no.such.key", 3, "unknown setting 'no.such.key'"),
])
def test_validate_refuses_with_the_accepted_range(key, value, message):
    with pytest.raises(SettingError) as raised:
        validate(key, value)
    assert message in str(raised.value)


@pytest.mark.parametrize("key, value, typed", [
    ("ticks.awake", "10", 10), ("ticks.awake", 10.0, 10), ("llm.temperature", 1, 1.0),
    ("sleep.enabled", "true", True), ("sleep.enabled", False, False),
    ("llm.base_url", None, None), ("llm.model", "llama3.1", "llama3.1"),
    ("journal.rerank_pool", None, None), ("llm.extra.top_p", 0.9, 0.9),
    ("memory.mem0", {"vector_store": {}}, {"vector_store": {}}),
])
def test_validate_returns_the_value_as_the_settings_type(key, value, typed):
    result = validate(key, value)
    assert result == typed and type(result) is type(typed)


def test_bad_stored_values_are_ignored_and_listed_never_raised():
    game = deep_merge(DEFAULTS, {"ticks": {"sleep": "soon"}, "llm": {"temperature": 0.3}})
    settings = Settings(game, overrides={"ticks.awake": "banana", "llm.temperature": 99,
                                         "journal.max_entries": 50, "ghost.key": 1})
    # the defaults (or the game's values) are used instead; good values still apply
    assert settings.get("ticks.awake") == 5 and settings.get("ticks.sleep") == 60
    assert settings.get("llm.temperature") == 0.3
    assert settings.get("llm")["temperature"] == 0.3
    assert settings.get("journal.max_entries") == 50
    problems = {(p["key"], p["source"]) for p in settings.problems}
    assert problems == {("ticks.awake", "per-NPC config"), ("llm.temperature", "per-NPC config"),
                        ("ghost.key", "per-NPC config"), ("ticks.sleep", "game settings")}
    assert all("takes" in p["error"] or "unknown" in p["error"] for p in settings.problems)
    assert game["ticks"]["sleep"] == "soon"  # the game's tree itself is left alone
    assert Settings(DEFAULTS).problems == []


def test_a_view_with_overrides_takes_the_checked_tree_and_the_games_problems_along():
    game = Settings(deep_merge(DEFAULTS, {"ticks": {"sleep": "soon"}}))
    npc = game.with_overrides({"ticks.awake": 9, "llm.temperature": 99})
    # the game's tree is checked once: the view reads the same checked tree
    assert npc._tree is game._tree and npc.get("ticks.sleep") == 60
    assert npc.get("ticks.awake") == 9 and npc.get("llm.temperature") == game.get(
        "llm.temperature")
    assert {(p["key"], p["source"]) for p in npc.problems} == {
        ("ticks.sleep", "game settings"), ("llm.temperature", "per-NPC config")}
    # a view of a view keeps the overrides below its own, and not its per-NPC problems
    again = npc.with_overrides({"ticks.awake": 11})
    assert again.get("ticks.awake") == 11 and again.get("llm.temperature") == game.get(
        "llm.temperature")
    assert [p["key"] for p in again.problems] == ["ticks.sleep"]
    assert game.get("ticks.awake") == 5 and [p["key"] for p in game.problems] == ["ticks.sleep"]

def test_the_environment_is_read_by_the_contrib_itself_with_its_precedence():
    environ = {"AI_ASSISTANT_LLM_BASE_URL": "http://127.0.0.1:11434/v1",
               "OPENAI_BASE_URL": "https://elsewhere.example/v1",
               "AI_ASSISTANT_LLM_MODEL": "llama3.1", "OPENAI_API_KEY": "sk-from-the-shell-1234"}
    tree = settings_tree({}, environ=environ)
    assert tree["llm"]["base_url"] == "http://127.0.0.1:11434/v1"  # ours before OpenAI's
    assert tree["llm"]["model"] == "llama3.1"
    assert tree["llm"]["api_key"] == "sk-from-the-shell-1234"
    # the game's settings win over the environment; a per-NPC override over both
    game = {"llm": {"model": "qwen2.5", "base_url": None}}
    tree = settings_tree(game, environ=environ)
    assert tree["llm"]["model"] == "qwen2.5"
    assert tree["llm"]["base_url"] == "http://127.0.0.1:11434/v1"  # None: unset
    assert setting_source("llm.model", game, {}, environ) == "game settings (AI_ASSISTANT)"
    assert setting_source("llm.model", game, {"llm.model": "x"}, environ) == "per-NPC config"
    assert setting_source("llm.base_url", game, {}, environ) == (
        "environment (AI_ASSISTANT_LLM_BASE_URL)")
    assert setting_source("llm.api_key", {}, {}, environ) == "environment (OPENAI_API_KEY)"
    assert setting_source("llm.api_key", {}, {}, {}) == "default"
    # no environment: the documented defaults
    assert settings_tree({}, environ={})["llm"]["base_url"] is None
    assert settings_tree({}, environ={})["llm"]["model"] == "gpt-4o-mini"


def test_the_first_request_logs_once_where_endpoint_model_and_key_came_from(llm_server):
    llm_module.forget_announcements()
    llm_server.responder = lambda request: Reply.text("hello")
    config = dict(DEFAULTS["llm"], base_url=llm_server.base_url, api_key="sk-test-key-9876",
                  model="scripted")
    logs = support.Log()
    sources = {"base_url": "environment (AI_ASSISTANT_LLM_BASE_URL)", "model": "per-NPC config",
               "api_key": "environment (OPENAI_API_KEY)"}
    clients = [LLMClient(config, npc_name=name, log=logs, runner=sync_runner,
                         clock=task.Clock(), sources=sources) for name in ("Ada", "Bob")]
    for client in clients * 2:
        support.result_of(client.complete([{"role": "user", "content": "hi"}]))
    announced = [line for line in logs if "first LLM request" in line]
    assert announced == [
        f"Ada: first LLM request of this server process: endpoint {llm_server.base_url} (from "
        "environment (AI_ASSISTANT_LLM_BASE_URL)), model scripted (from per-NPC config), key "
        "sk-...9876 (from environment (OPENAI_API_KEY))"]
    assert "sk-test-key-9876" not in logs.text()


def test_clearing_an_emergency_stop_is_logged_only_when_one_was_active(llm_server):
    config = dict(DEFAULTS["llm"], base_url=llm_server.base_url, api_key="k")
    logs = support.Log()
    client = LLMClient(config, npc_name="Ada", log=logs, runner=sync_runner, clock=task.Clock())
    assert client.clear_emergency_stop() is False
    assert not any("emergency stop cleared" in line for line in logs)
    stats = client.stats()
    stats["emergency_stop"] = True
    client._save_stats(stats)
    assert client.clear_emergency_stop() is True
    assert sum("emergency stop cleared" in line for line in logs) == 1



def test_where_the_memories_live_is_a_game_wide_setting():
    assert Settings.game_wide("memory.store")
    assert not Settings.game_wide("ticks.awake") and not Settings.game_wide("no.such.key")
