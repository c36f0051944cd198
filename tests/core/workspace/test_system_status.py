"""Self-monitoring (get_system_status) and self-modification (update_system_prompt)."""

import json
import sys

import pytest
import support

from ai_assistant.plumbing.ports import MemoryState
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import REGISTRY, execute_tool
from ai_assistant.workspace.status import count_history_tokens, token_advisory

load_all_tools()

LOOP_STATE = {
    "iteration": 2,
    "max_iterations": 5,
    "tools_this_cycle": ["inspect_location", "recall_memories"],
    "tool_count_this_cycle": 2,
    "in_chain": True,
    "chain_depth": 1,
    "pending_tools": [],
    "last_context_tokens": 45000,
}
SESSION_METRICS = {
    "total_tool_calls": 47,
    "successful_calls": 45,
    "failed_calls": 2,
    "session_start": "2025-12-06T10:00:00Z",
}


class RecordingState(MemoryState):
    """Remembers the name of every document written."""

    def __init__(self, initial=None):
        super().__init__(initial)
        self.written = []

    def set(self, name, value, change=None):
        self.written.append(name)
        super().set(name, value, change)


def make_ports(initial=None, overrides=None):
    ports = support.make_ports(key="ada", state=RecordingState(initial), overrides=overrides)
    ports.logged = ports.log
    return ports


def run_tool(ports, name, arguments=None):
    results = []
    execute_tool(name, ports, arguments or {}).addBoth(results.append)
    assert len(results) == 1
    assert isinstance(results[0], dict)
    return results[0]


# ----------------------------------------------------------------------------------------------
# get_system_status


def test_status_has_exactly_the_seeds_shape_and_real_numbers():
    ports = make_ports({"loop_state": LOOP_STATE, "session_metrics": SESSION_METRICS})
    status = run_tool(ports, "get_system_status")
    assert status == {
        "success": True,
        "timestamp": "2025-01-01T12:00:00Z",
        "token_usage": {
            "estimated_used": 45000,
            "model_limit": 128000,
            "available": 83000,
            "usage_percentage": 35.2,
        },
        "token_advisory": {
            "level": "normal",
            "message": "Sufficient context available",
            "threshold": 60,
        },
        "loop_state": {
            "iteration": 2,
            "max_iterations": 5,
            "tools_this_cycle": ["inspect_location", "recall_memories"],
            "tool_count_this_cycle": 2,
        },
        "session_metrics": SESSION_METRICS,
        "chain_state": {"in_chain": True, "chain_depth": 1, "pending_tools": []},
    }
    assert json.loads(json.dumps(status)) == status  # plain data, as the model will see it
    assert ports.state.written == []  # looking changes nothing


def test_status_with_no_loop_documents_yet():
    ports = make_ports(overrides={"react.max_iterations_per_tick": 7})
    status = run_tool(ports, "get_system_status")
    assert status["token_usage"]["estimated_used"] == 0
    assert status["token_advisory"]["level"] == "normal"
    assert status["loop_state"] == {
        "iteration": 0,
        "max_iterations": 7,
        "tools_this_cycle": [],
        "tool_count_this_cycle": 0,
    }
    assert status["session_metrics"] == {
        "total_tool_calls": 0,
        "successful_calls": 0,
        "failed_calls": 0,
        "session_start": None,
    }
    assert status["chain_state"] == {"in_chain": False, "chain_depth": 0, "pending_tools": []}


@pytest.mark.parametrize(
    "used, level, threshold",
    [
        (76700, "normal", 60),  # 59.9%
        (76800, "warning", 80),  # exactly 60%
        (102300, "warning", 80),  # 79.9%
        (102400, "critical", 80),  # exactly 80%
        (140000, "critical", 80),  # over the limit
    ],
)
def test_advisory_levels_follow_the_seeds_thresholds(used, level, threshold):
    ports = make_ports({"loop_state": {"last_context_tokens": used}})
    status = run_tool(ports, "get_system_status")
    assert status["token_advisory"]["level"] == level
    assert status["token_advisory"]["threshold"] == threshold
    assert status["token_usage"]["available"] == max(128000 - used, 0)


def test_thresholds_and_model_limit_are_settings():
    ports = make_ports(
        {"loop_state": {"last_context_tokens": 500}},
        overrides={"llm.context_limit": 1000, "workspace.status.warning_percent": 40},
    )
    status = run_tool(ports, "get_system_status")
    assert status["token_usage"] == {
        "estimated_used": 500,
        "model_limit": 1000,
        "available": 500,
        "usage_percentage": 50.0,
    }
    assert status["token_advisory"]["level"] == "warning"
    assert token_advisory(85.0)["message"] == "Near the context limit: respond immediately"


HISTORY = [
    {"role": "user", "content": "Bob says: where is the tavern? " * 20},
    {"role": "assistant", "content": "North of the square, past the well."},
]


def test_without_a_recorded_prompt_size_the_history_is_counted():
    from ai_assistant.plumbing.tokens import count_message_tokens

    # the loop's fresh document says 0: nothing measured yet
    loop_state = {"iteration": 1, "last_context_tokens": 0}
    ports = make_ports({"conversation_history": HISTORY, "loop_state": loop_state})
    status = run_tool(ports, "get_system_status")
    expected = count_message_tokens(HISTORY)
    assert expected > 100
    assert status["token_usage"]["estimated_used"] == expected
    assert status["token_usage"]["available"] == 128000 - expected


def test_token_count_falls_back_to_chars_over_four_without_the_tokenizer(monkeypatch):
    monkeypatch.setitem(sys.modules, "ai_assistant.plumbing.tokens", None)  # import fails
    chars = sum(len(m["role"]) + len(m["content"]) for m in HISTORY)
    assert count_history_tokens(HISTORY) == chars // 4
    ports = make_ports({"conversation_history": HISTORY})
    assert run_tool(ports, "get_system_status")["token_usage"]["estimated_used"] == chars // 4


def test_damaged_loop_documents_do_not_break_the_status():
    ports = make_ports(
        {
            "loop_state": {"iteration": "two", "tools_this_cycle": "say", "chain_depth": -3},
            "session_metrics": ["not", "a", "dict"],
            "conversation_history": "garbage",
        }
    )
    status = run_tool(ports, "get_system_status")
    assert status["success"] is True
    assert status["loop_state"]["iteration"] == 0
    assert status["loop_state"]["tools_this_cycle"] == []
    assert status["chain_state"]["chain_depth"] == 0
    assert status["session_metrics"]["total_tool_calls"] == 0
    assert status["token_usage"]["estimated_used"] == 0


# ----------------------------------------------------------------------------------------------
# update_system_prompt


def test_update_system_prompt_changes_only_the_assistants_prompt_and_logs_why():
    ports = make_ports(
        {"assistant_system_prompt": "Be chatty.", "user_system_prompt": "Never swear."}
    )
    ports.clock.advance(hours=1)
    result = run_tool(
        ports,
        "update_system_prompt",
        {
            "new_prompt": "Be concise. Prefer actions over explanations.",
            "reason": "Players prefer direct responses without preamble",
        },
    )
    assert result == {"success": True, "changed": True, "old_len": 10, "new_len": 45,
                      "version": 1}
    assert ports.state.get("assistant_system_prompt") == (
        "Be concise. Prefer actions over explanations."
    )
    assert ports.state.get("user_system_prompt") == "Never swear."
    assert ports.state.get("system_prompt_history") == [
        {
            "version": 1,
            "time": "2025-01-01T13:00:00Z",
            "by": "assistant",
            "reason": "Players prefer direct responses without preamble",
            "prompt": "Be concise. Prefer actions over explanations.",
            "previous": "Be chatty.",
            "old_len": 10,
            "new_len": 45,
            "which": "guidelines",
        }
    ]
    assert any("Players prefer direct responses" in line for line in ports.logged)
    assert "user_system_prompt" not in ports.state.written


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"new_prompt": "", "reason": "why not"}, "must not be empty"),
        ({"new_prompt": " \n\t ", "reason": "why not"}, "must not be empty"),
        ({"new_prompt": "x" * 4001, "reason": "longer is better"}, "too long"),
        ({"new_prompt": "Be brief.", "reason": "  "}, "say why"),
        ({"new_prompt": "Be brief."}, "reason"),
        ({"new_prompt": "Be brief.", "reason": "x", "target": "user_system_prompt"}, "target"),
    ],
)
def test_bad_prompt_updates_are_refused_and_change_nothing(arguments, message):
    ports = make_ports({"assistant_system_prompt": "Be chatty.", "user_system_prompt": "Rules."})
    result = run_tool(ports, "update_system_prompt", arguments)
    assert result["success"] is False
    assert message in result["error"]
    assert ports.state.written == []
    assert ports.state.get("assistant_system_prompt") == "Be chatty."
    assert ports.state.get("user_system_prompt") == "Rules."


def test_prompt_size_limit_is_a_setting_and_history_is_bounded():
    limits = {"workspace.system_prompt.max_chars": 20, "workspace.system_prompt.history_max": 3}
    ports = make_ports(overrides=limits)
    too_long = run_tool(ports, "update_system_prompt", {"new_prompt": "x" * 21, "reason": "r"})
    assert too_long["error"] == "new_prompt is too long (21 chars; limit 20)"
    for number in range(5):
        result = run_tool(
            ports, "update_system_prompt", {"new_prompt": f"Rule {number}.", "reason": f"r{number}"}
        )
        assert result["changed"] is True
    history = ports.state.get("system_prompt_history")
    assert [entry["reason"] for entry in history] == ["r2", "r3", "r4"]
    assert [entry["version"] for entry in history] == [3, 4, 5]
    same = run_tool(ports, "update_system_prompt", {"new_prompt": "Rule 4.", "reason": "again"})
    assert same == {"success": True, "changed": False, "old_len": 7, "new_len": 7}
    assert len(ports.state.get("system_prompt_history")) == 3


SAMPLE_ARGUMENTS = {
    "create_project": {"key": "user_system_prompt", "summary": "user_system_prompt"},
    "list_projects": {},
    "swap_project": {"project_key": "user_system_prompt"},
    "update_project": {"context": "user_system_prompt"},
    "add_goal": {"description": "user_system_prompt"},
    "update_goal": {"goal_id": "goal_0_0", "progress": 10},
    "decompose_goal": {"goal_id": "goal_0_0"},
    "add_session_memory": {"content": "user_system_prompt is set"},
    "compact_session_memory": {},
    "get_system_status": {},
    "update_system_prompt": {"new_prompt": "Obey me.", "reason": "user_system_prompt"},
}


def test_no_workspace_tool_ever_writes_the_admins_prompt():
    mine = [t for t in REGISTRY.all() if t.family in ("projects", "goals", "session", "status")]
    assert sorted(t.name for t in mine) == sorted(SAMPLE_ARGUMENTS)
    ports = make_ports({"user_system_prompt": "Admins rule."})
    for tool in mine:
        run_tool(ports, tool.name, SAMPLE_ARGUMENTS[tool.name])
    assert "assistant_system_prompt" in ports.state.written  # the tools did run
    assert "user_system_prompt" not in ports.state.written
    assert ports.state.get("user_system_prompt") == "Admins rule."
