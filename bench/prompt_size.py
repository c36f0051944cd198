"""
Request size of real turns: the tokens of the full request (messages + tool schemas) the model
is sent, for a handful of everyday scenarios run through the real awake tick and ReAct loop.

    .venv/bin/python -m bench.prompt_size

A capturing LLM port answers each request with `say` and keeps the request; tokens are counted
with `plumbing.tokens` (cl100k): the messages with their chat-format overhead plus the tool
schemas as the JSON text sent. Results go to `bench/results/prompt_size.json`.

Scenarios: a plain greeting (a stranger says hello), a known friend with some history, a
question in a busy room, a whisper, and an explicit request for a goal and a project (which
brings the workspace tools into the conversation).
"""

import argparse
import json
import math
from pathlib import Path

from twisted.internet import defer

from ai_assistant.agent import awake, perception
from ai_assistant.agent.react import run_react_cycle
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing.ports import LLMReply, ToolCall, iso
from ai_assistant.plumbing.tokens import count_message_tokens, count_tokens

RESULTS = Path(__file__).parent / "results" / "prompt_size.json"


class CapturingLLM:
    """An `LLMPort` that keeps every request and answers with one `say`."""

    def __init__(self, reply_text="Hello there."):
        self.requests = []
        self.reply_text = reply_text

    def complete(self, messages, *, tools=None, purpose="chat", **params):
        self.requests.append({"messages": json.loads(json.dumps(messages)), "tools": tools})
        call = ToolCall("say", json.dumps({"message": self.reply_text}), "call_1")
        return defer.succeed(LLMReply(content=None, tool_calls=[call]))


def request_tokens(request):
    """Tokens of one request: messages (format overhead included) + tool schemas as sent."""
    tools = request.get("tools")
    schema_tokens = count_tokens(json.dumps(tools)) if tools else 0
    return count_message_tokens(request["messages"]) + schema_tokens


class _World:
    """A small room with the given people (the assistant's body for the benchmark)."""

    def __init__(self, people):
        self.people = people
        self.said, self.emotes = [], []

    def say(self, text):
        self.said.append(text)

    def emote(self, text):
        self.emotes.append(text)

    def whisper(self, target, text):
        self.said.append(text)

    def describe_location(self):
        return {
            "name": "The Copper Kettle",
            "description": "A low-beamed tavern; a fire crackles under a copper kettle.",
            "exits": ["north", "out"],
            "objects": ["a long table", "a notice board"],
        }

    def present(self):
        return [dict(person) for person in self.people]


def _ports(people, make_ports):
    llm = CapturingLLM()
    ports = make_ports(llm=llm, world=_World(people))
    return ports, llm


def _hear(ports, kind, text, sender, sender_id, names=("Ada",)):
    classification = perception.classify(kind, text, names=list(names))
    PerceptionQueue(ports).add(perception.make_event(
        kind=kind, text=text, sender=sender, sender_id=sender_id,
        classification=classification, time=iso(ports.clock.now())))


def _tick(ports):
    results = []
    awake.run_awake_tick(ports, run_cycle=run_react_cycle).addBoth(results.append)
    return results[0]


BOB = {"id": "#2", "name": "Bob", "is_player": True}
CARA = {"id": "#3", "name": "Cara", "is_player": True}


def scenario_greeting(make_ports):
    ports, llm = _ports([BOB], make_ports)
    _hear(ports, "talk", "hello", "Bob", "#2")
    _tick(ports)
    return llm.requests


def scenario_known_friend(make_ports):
    ports, llm = _ports([BOB, CARA], make_ports)
    for number in range(12):
        People(ports).observe("#2", "Bob", f"thanks for the help with task {number}")
        Journal(ports).add(f"Bob asked me about the old mill, part {number}.",
                          source_type="direct", source_entity="Bob")
    for line in ("Ada, any news from the mill?", "Ada, and the miller, is he well?"):
        _hear(ports, "say", line, "Bob", "#2")
        _tick(ports)
    return llm.requests


def scenario_busy_room(make_ports):
    people = [BOB, CARA] + [{"id": f"#{n}", "name": f"Guest{n}", "is_player": True}
                            for n in range(4, 9)]
    ports, llm = _ports(people, make_ports)
    for person in people[1:]:
        _hear(ports, "say", "What a night it is!", person["name"], person["id"])
    _hear(ports, "say", "Ada, where can I find the blacksmith?", "Bob", "#2")
    _tick(ports)
    return llm.requests


def scenario_whisper(make_ports):
    ports, llm = _ports([BOB, CARA], make_ports)
    _hear(ports, "whisper", "Ada, keep this quiet: the key is under the mat.", "Bob", "#2")
    _tick(ports)
    return llm.requests


def scenario_explicit_request(make_ports):
    """A request that brings the workspace tools into the conversation."""
    ports, llm = _ports([BOB], make_ports)
    _hear(ports, "talk", "Could you add a goal for me: repair the mill, and track the project?",
          "Bob", "#2")
    _tick(ports)
    return llm.requests


SCENARIOS = {
    "greeting": scenario_greeting,
    "known_friend": scenario_known_friend,
    "busy_room": scenario_busy_room,
    "whisper": scenario_whisper,
    "explicit_request": scenario_explicit_request,
}


def measure(make_ports):
    """
    Run every scenario.

    Args:
        make_ports (callable): `make_ports(llm=..., world=...) -> AssistantPorts` (tests'
            `support.make_ports`).

    Returns:
        dict: `{scenario: [tokens of each request]}`, plus `"p95"` over all requests and
        `"greeting"` the plain greeting turn's first request.
    """
    figures = {name: [request_tokens(r) for r in run(make_ports)]
               for name, run in SCENARIOS.items()}
    every = sorted(t for tokens in figures.values() for t in tokens)
    p95 = every[max(0, math.ceil(0.95 * len(every)) - 1)]
    return {"scenarios": figures, "p95": p95, "greeting_turn": figures["greeting"][0]}


def main(argv=None):
    argparse.ArgumentParser(description=__doc__.splitlines()[1]).parse_args(argv)
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    import support

    result = measure(support.make_ports)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
