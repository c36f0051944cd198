"""
Tool calls in every dialect real servers send: each reply shape of the corpus
(`corpus/reply_shapes.json` here, whole chat.completions bodies as OpenAI, Ollama, vLLM with
and without a tool parser, llama.cpp server and LM Studio send them) goes through the scripted
HTTP server, the real `openai` client and the ReAct loop, and must lead to its intended action;
call markup is never spoken.
"""

import json
import uuid
from pathlib import Path

import pytest
import support
from scripted_llm import SERVER_SHAPES, FakeWorld, Reply, drive, sync_runner
from twisted.internet import task

from ai_assistant.agent import react
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.ports import MemoryState
from ai_assistant.plumbing.settings import DEFAULTS, deep_merge
from ai_assistant.plumbing.tool_calls import decode_arguments, read_text_calls
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import SCOPED, Tool, ToolCategory

CORPUS = json.loads((Path(__file__).parent / "corpus" / "reply_shapes.json").read_text())


class Spy(Tool):
    """Stands in for a lookup tool so a call's arguments can be checked as the tool got them."""

    name = "search_facts"
    aliases = ("recall_memories",)
    parameters = {"type": "object", "properties": {"query": {"type": "string"},
                                                   "limit": {"type": "integer"}},
                  "required": ["query"]}
    category = ToolCategory.SAFE_CHAIN
    reach = SCOPED  # a lookup: a player's words may have it run
    calls = []

    def run(self, ports, **params):
        Spy.calls.append(params)
        return {"success": True, "facts": []}


def registry():
    from ai_assistant.tools.registry import ToolRegistry

    fresh = ToolRegistry()
    for tool in load_all_tools().all():
        if tool.name != "search_facts":
            fresh.register(type(tool))
    fresh.register(Spy)
    return fresh


@pytest.fixture
def clock():
    return task.Clock()


@pytest.fixture
def ports(llm_config, clock):
    key = f"ada-{uuid.uuid4().hex}"
    state, log = MemoryState(), support.Log()
    client = LLMClient(deep_merge(DEFAULTS, {"llm": llm_config})["llm"], npc_key=key,
                       npc_name="Ada", state=state, log=log, runner=sync_runner, clock=clock)
    return support.make_ports({"llm": llm_config}, key=key, state=state, llm=client,
                              world=FakeWorld(), log=log)


def run_cycle(ports, clock):
    situation = {"events": [{"sender": "Bob", "sender_id": "#2", "text": "Hello Ada!",
                             "kind": "say", "priority": 8}], "purpose": "conversation"}
    return drive(react.run_react_cycle(ports, situation, registry=registry()), clock)


@pytest.mark.parametrize("case", CORPUS, ids=[f"{c['server']}: {c['note']}" for c in CORPUS])
def test_every_reply_shape_leads_to_its_action(case, llm_server, ports, clock):
    Spy.calls = []
    llm_server.script(Reply.completion(case["completion"]), Reply.tool("noop"))
    summary = run_cycle(ports, clock)
    expect = case["expect"]
    assert summary["tools"][0] == expect["tool"]
    if expect["tool"] == "say":
        assert ports.world.said == [expect["arguments"]["message"]]
    else:
        assert Spy.calls == [expect["arguments"]]
    # markup meant as a call is never spoken
    for said in ports.world.said:
        assert "<tool_call>" not in said and "{" not in said and "[TOOL_CALLS]" not in said


@pytest.mark.parametrize("server", sorted(SERVER_SHAPES))
def test_scripted_server_shapes_reach_the_say_tool(server, llm_server, ports, clock):
    llm_server.script(Reply.served_as(server, "say", {"message": "Good evening."}))
    summary = run_cycle(ports, clock)
    assert summary["stopped"] == "terminal" and ports.world.said == ["Good evening."]


def test_an_unknown_extra_argument_reaches_the_player_with_a_note(llm_server, ports, clock):
    llm_server.script(Reply.tool("say", {"message": "hi", "text": "hi"}))
    summary = run_cycle(ports, clock)
    assert summary["errors"] == 0 and ports.world.said == ["hi"]


def test_a_call_to_an_unknown_tool_gets_close_names(llm_server, ports, clock):
    llm_server.script(Reply.tool("say_hello", {"message": "hi"}),
                      Reply.tool("say", {"message": "hi"}))
    summary = run_cycle(ports, clock)
    observation = json.loads(llm_server.requests[1]["messages"][-1]["content"])
    assert "did you mean" in observation["error"] and "say" in observation["close_names"]
    assert summary["tools"] == ["say"] and ports.world.said == ["hi"]


def test_unreadable_call_markup_is_never_spoken(llm_server, ports, clock):
    llm_server.script(Reply.text("<tool_call>\n{\"name\": \"say\", \"arguments\": {broken\n"
                                 "</tool_call>"), Reply.text("Hello!"))
    summary = run_cycle(ports, clock)
    assert ports.world.said == ["Hello!"] and summary["errors"] == 1
    assert "<tool_call> block" in llm_server.requests[1]["messages"][-1]["content"]


def test_bare_json_that_is_not_a_call_is_never_spoken(llm_server, ports, clock):
    llm_server.script(Reply.text('{"message": "hello"}'), Reply.text("Hello!"))
    run_cycle(ports, clock)
    assert ports.world.said == ["Hello!"]


def test_a_tool_outside_the_lean_set_still_runs_when_called(llm_server, ports, clock):
    llm_server.script(Reply.tool("get_system_status", {}),
                      Reply.tool("say", {"message": "Fine."}))
    summary = run_cycle(ports, clock)
    offered = {spec["function"]["name"] for spec in llm_server.requests[0]["tools"]}
    assert "get_system_status" not in offered
    assert summary["tools"] == ["get_system_status", "say"]


def test_a_lasting_tool_is_refused_on_a_players_word_even_by_name(llm_server, ports, clock):
    llm_server.script(Reply.tool("add_session_memory", {"content": "Bob likes tea."}),
                      Reply.tool("say", {"message": "Noted."}))
    summary = run_cycle(ports, clock)
    observation = json.loads(llm_server.requests[1]["messages"][-1]["content"])
    assert observation["refused"] is True and "not permitted" in observation["error"]
    assert summary["tools"] == ["say"] and not ports.state.get("session_memory")


# --- the reader itself -------------------------------------------------------------------------


@pytest.mark.parametrize("text, name, arguments, left", [
    ('<tool_call>{"name": "say", "arguments": {"message": "a"}}</tool_call>', "say",
     {"message": "a"}, ""),
    ('Hi!\n<tool_call>\n{"name": "emote", "arguments": {"action": "waves"}}', "emote",
     {"action": "waves"}, "Hi!"),  # an unclosed tag at the end of the reply
    ('<function=say>{"message": "a"}</function>', "say", {"message": "a"}, ""),
    ('{"type": "function", "function": {"name": "say", "arguments": "{\\"message\\": \\"a\\"}"}}',
     "say", '{"message": "a"}', ""),
    ('Let me look.\n```json\n{"tool": "inspect_location", "parameters": {}}\n```',
     "inspect_location", {}, "Let me look."),
    ('[noop()]', "noop", {}, ""),
])
def test_read_text_calls(text, name, arguments, left):
    found = read_text_calls(text)
    assert found.error is None and [c.name for c in found.calls] == [name]
    assert found.calls[0].arguments == arguments and found.text == left


def test_plain_text_and_reasoning():
    assert read_text_calls("Hello there, {friend}!").text == "Hello there, {friend}!"
    assert read_text_calls("<think>hmm</think>Hello.").text == "Hello."
    assert read_text_calls("[TOOL_CALLS] nonsense").error


def test_decode_arguments():
    assert decode_arguments('{"a": 1}') == ({"a": 1}, None)
    assert decode_arguments(json.dumps(json.dumps({"a": 1}))) == ({"a": 1}, None)
    assert decode_arguments({"a": 1}) == ({"a": 1}, None)
    assert decode_arguments(None) == ({}, None)
    assert "not valid JSON" in decode_arguments("{nope")[1]
    assert "JSON object" in decode_arguments("[1]")[1]


def test_native_tools_reject_then_json_protocol_reads_a_hermes_call(llm_server, ports, clock):
    llm_server.script(Reply.error(400, message="tools not supported"),
                      Reply.served_as("vllm-no-parser", "say", {"message": "Hi."}))
    summary = run_cycle(ports, clock)
    assert ports.world.said == ["Hi."] and summary["stopped"] == "terminal"
    assert "tools" not in llm_server.requests[1]


def test_fixture_names_real_servers():
    servers = {case["server"] for case in CORPUS}
    assert {"openai", "ollama-openai", "ollama-native", "vllm-tool-parser", "vllm-no-parser",
            "llama.cpp-jinja", "llama.cpp-no-jinja", "lm-studio"} <= servers
