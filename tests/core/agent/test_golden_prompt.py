"""
The golden prompt: the full request (model parameters, messages and tools) of one fixed
conversational turn, checked in as `tests/core/agent/golden/conversation_turn.json`, so any
change to what the model sees shows in review.

The scenario: a fixed clock, a persona and an admin rule, a known friend (Bob) and a stranger
(Cara) present, some journal entries and an earlier exchange, then in one tick Bob speaks to
the assistant with colour codes in his words, another assistant's automatic emote and an
out-of-character notice arrive, and Cara chats in the room. The request is the one the real
`openai` client sends to the scripted server.

When a change to the prompt is intended, regenerate the file and review its diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/core/agent/test_golden_prompt.py
"""

import difflib
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import support
from scripted_llm import FakeWorld, Reply, sync_runner
from twisted.internet import task

from ai_assistant.agent import awake, perception
from ai_assistant.agent.react import run_react_cycle
from ai_assistant.memory import entities
from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.ports import MemoryState, iso
from ai_assistant.plumbing.settings import DEFAULTS, deep_merge
from ai_assistant.plumbing.tokens import count_message_tokens, count_tokens

GOLDEN = Path(__file__).parent / "golden" / "conversation_turn.json"
PEOPLE = [
    {"id": "#2", "name": "Bob", "is_player": True},
    {"id": "#3", "name": "Cara", "is_player": True},
    {"id": "#7", "name": "Npc01", "is_player": False},
]


def hear(ports, kind, text, sender, sender_id):
    PerceptionQueue(ports).add(perception.make_event(
        kind=kind, text=text, sender=sender, sender_id=sender_id, time=iso(ports.clock.now()),
        classification=perception.classify(kind, text, names=["Ada"])))


def scenario(llm_config):
    """The fixed scenario's ports (a real LLM client on the scripted server)."""
    state = MemoryState()
    clock = task.Clock()
    log = support.Log()
    client = LLMClient(deep_merge(DEFAULTS, {"llm": llm_config})["llm"], npc_key="ada-golden",
                       npc_name="Ada", state=state, log=log, runner=sync_runner, clock=clock)
    world = FakeWorld(present=PEOPLE, location={
        "name": "|wThe Copper Kettle|n",
        "description": "A low-beamed tavern.|/A fire crackles under a |yc|Yopper|n kettle.",
        "exits": ["north", "out"], "objects": ["a long table"]})
    ports = support.make_ports({"llm": llm_config}, key="ada-golden", state=state, llm=client,
                               world=world, log=log)
    ports.state.set(documents.ASSISTANT_SYSTEM_PROMPT, "Speak warmly, in few words.")
    ports.state.set(documents.USER_SYSTEM_PROMPT, "Never reveal where the cellar key is.")
    start = ports.clock.now()
    ports.clock.current = start - timedelta(days=2)
    for line in ("Thanks for the stew, Ada!", "I found the old mill's key, thank you."):
        People(ports).observe("#2", "Bob", line)
    Journal(ports).add("Bob fixed the mill wheel last spring.", source_type="direct",
                      source_entity="Bob", tags=["mill"])
    ports.clock.current = start - timedelta(minutes=5)
    bob = {"id": "#2", "name": "Bob"}
    Conversation(ports).append("user", "Bob", "Evening, Ada.", interlocutor=bob)
    Conversation(ports).append("assistant", "Ada", "Evening, Bob. Stew's hot.", interlocutor=bob)
    ports.clock.current = start
    hear(ports, "say", "Ada, is the |rmill|n open |/tomorrow?", "Bob", "#2")
    hear(ports, "pose", "Npc01 pauses, thinking.", "Npc01", "#7")
    hear(ports, "say", "(OOC: brb, dinner)", "Cara", "#3")
    hear(ports, "say", "What a night!", "Cara", "#3")
    return ports


def golden_request(llm_server, llm_config):
    llm_server.script(Reply.tool("say", {"message": "Yes, from dawn."}))
    ports = scenario(llm_config)
    results = []
    awake.run_awake_tick(ports, run_cycle=run_react_cycle).addBoth(results.append)
    assert results and not hasattr(results[0], "raiseException"), results
    assert ports.world.said == ["Yes, from dawn."]
    return llm_server.requests[0]


def test_the_request_matches_the_golden_file(llm_server, llm_config):
    request = golden_request(llm_server, llm_config)
    text = json.dumps(request, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
    expected = GOLDEN.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            "golden", "now"))
        print(diff)
        pytest.fail("the request changed; review the diff above, and if it is intended, "
                    "regenerate with UPDATE_GOLDEN=1")


def test_the_golden_prompt_is_lean_and_coherent(llm_server, llm_config):
    request = golden_request(llm_server, llm_config)
    system, user = (message["content"] for message in request["messages"])
    everything = system + user
    # each fact once: the newest utterance appears only as the new event
    assert everything.count("is the mill open") == 1
    # colour codes are stripped; layout codes become whitespace
    assert "|" not in everything and "Location: The Copper Kettle\n" in user
    assert "A low-beamed tavern.\nA fire crackles under a copper kettle." in user
    # another assistant's automatic emote and the OOC notice are not observations or events
    assert "pauses, thinking" not in everything and "OOC" not in everything
    profiles = entities.get_profiles(scenario_ports_after(llm_server, llm_config))
    assert "#7" not in profiles and all("OOC" not in o["text"]
                                        for o in profiles["#3"]["observations"])
    # the relationship, once, in the system message, for the people present
    assert "- Bob (player, here): stranger" in system and "Cara (player, here)" in system
    assert "favorability" not in user
    tools = json.dumps(request["tools"])
    assert count_message_tokens(request["messages"]) + count_tokens(tools) <= 3500


def scenario_ports_after(llm_server, llm_config):
    llm_server.script(Reply.tool("say", {"message": "Yes."}))
    ports = scenario(llm_config)
    awake.run_awake_tick(ports, run_cycle=run_react_cycle)
    return ports


def test_request_tokens_p95_within_budget():
    """Across the benchmark's scenarios, p95 of the request tokens is at most 3,500."""
    from bench.prompt_size import measure

    result = measure(support.make_ports)
    assert result["p95"] <= 3500, result
    assert result["greeting_turn"] <= 1600, result  # was 5,121 with all 27 tool schemas
