"""Helpers shared by the tests: the ports of a test assistant, running Deferreds synchronously."""

import copy
import json
import os
import uuid

from twisted.internet import defer
from twisted.python.failure import Failure

from ai_assistant.plumbing import state_changes
from ai_assistant.plumbing.ports import AssistantPorts, FixedClock, LLMReply, MemoryState
from ai_assistant.plumbing.settings import DEFAULTS, Settings, deep_merge


class Log(list):
    """A `log` port that keeps every message."""

    def __call__(self, message):
        self.append(message)

    def text(self):
        return "\n".join(self)


def make_ports(settings=None, *, overrides=None, key=None, name="Ada", state=None, clock=None,
               llm=None, semantic=None, world=None, log=None, run_cpu_bound=None):
    """
    The ports of a test assistant: in-memory state, a fixed clock, no LLM unless given.

    Args:
        settings (dict, optional): A partial settings tree merged over the defaults.
        overrides (dict, optional): Flat dotted-key overrides, as `@assistant/config` sets.
        key (str, optional): The assistant's key (default: a fresh unique one).
        log (callable, optional): The log port (default: a fresh `Log`).
        run_cpu_bound (callable, optional): Runs the computing work (default: `sync_runner`,
            in place: a test has no reactor to hand the worker pool's results back).
        Other arguments are the ports of the same names.
    """
    return AssistantPorts(
        key=key or f"ada-{uuid.uuid4().hex}",
        name=name,
        state=state if state is not None else MemoryState(),
        clock=clock or FixedClock(),
        settings=Settings(deep_merge(DEFAULTS, settings or {}), overrides),
        llm=llm,
        semantic=semantic,
        world=world,
        log=log if log is not None else Log(),
        run_cpu_bound=run_cpu_bound or sync_runner,
    )


class ChangeCheckingState(MemoryState):
    """
    An in-memory state store that holds every owner to its word: each `change` an owner
    describes (`plumbing.state_changes`) is applied to a copy of the document as the store
    last had it, as a replay of the game's write-ahead log would, and must give the value
    written. `described` counts the writes that came with a change.
    """

    def __init__(self, initial=None):
        super().__init__(initial)
        self.replayed = copy.deepcopy(self.data)
        self.described = 0

    def set(self, name, value, change=None):
        super().set(name, value, change)
        if change is None or name not in self.replayed:
            self.replayed[name] = copy.deepcopy(value)
            return
        self.described += 1
        self.replayed[name] = state_changes.apply(self.replayed[name], copy.deepcopy(change))
        assert self.replayed[name] == value, f"{name}: the change does not give the value"


class FakeLLM:
    """
    An LLM port that replies in order: a str becomes an `LLMReply`, an `LLMReply` is given as
    it is, an exception fails the Deferred. `calls` records each request's messages, tools,
    purpose and other parameters; `on_call(n)` (optional) runs at the n-th call, before it is
    answered.
    """

    def __init__(self, *replies, on_call=None):
        self.replies = list(replies)
        self.calls = []
        self.on_call = on_call

    def complete(self, messages, *, tools=None, purpose="chat", **params):
        self.calls.append({"messages": messages, "tools": tools, "purpose": purpose, **params})
        if self.on_call:
            self.on_call(len(self.calls))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            return defer.fail(reply)
        if isinstance(reply, LLMReply):
            return defer.succeed(reply)
        return defer.succeed(LLMReply(content=reply))


def sync_runner(func, *args, **kwargs):
    """A `runner` that does blocking work right here and returns a fired Deferred."""
    return defer.maybeDeferred(func, *args, **kwargs)


def result_of(deferred):
    """The result of a Deferred that has fired (raising its exception if it failed)."""
    results = []
    deferred.addBoth(results.append)
    assert results, "the Deferred did not fire"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


# The attack suites write their cases only when asked (`make security-report` names the file):
# a plain test run leaves the repository's files as they are.
SECURITY_REPORT = "AI_ASSISTANT_SECURITY_REPORT"


def record_security_cases(section, cases, *, key=None, sort=False):
    """
    Write the attack suites' cases under `section` of the report named by the environment
    variable `AI_ASSISTANT_SECURITY_REPORT` (`bench/results/security.json` under `make
    security-report`); nothing is written when it is not set.

    Args:
        section (str): The suite's section of the file.
        cases (list[dict]): Its cases.
        key (str, optional): Merge: the section's cases with the same `key` are replaced and
            the others kept. Without it, `cases` replace the whole section.
        sort (bool): Order the section by `key`.
    """
    path = os.environ.get(SECURITY_REPORT)
    if not path:
        return
    data = {}
    if os.path.exists(path):
        with open(path) as handle:
            try:
                data = json.load(handle)
            except json.JSONDecodeError:
                data = {}
    if key is not None:
        new = {case.get(key) for case in cases}
        cases = [case for case in data.get(section, []) if case.get(key) not in new] + cases
        if sort:
            cases.sort(key=lambda case: case[key])
    data[section] = cases
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
