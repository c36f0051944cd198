"""Helpers shared by the tests: the ports of a test assistant, running Deferreds synchronously."""

import uuid

from twisted.internet import defer
from twisted.python.failure import Failure

from ai_assistant.plumbing.ports import AssistantPorts, FixedClock, MemoryState
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
