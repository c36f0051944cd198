"""Helpers shared by the tests: running Deferreds synchronously, and core ports."""

from twisted.internet import defer
from twisted.python.failure import Failure

from ai_assistant.conf import DEFAULTS, Settings
from ai_assistant.ports import AssistantPorts, FixedClock, MemoryState


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


def core_ports(*, key="ada", name="Ada", overrides=None, **ports):
    """
    `AssistantPorts` for core tests: in-memory state, a fixed clock, default settings plus
    `overrides`, and a `logs` list collecting what was logged.
    """
    logs = []
    bundle = AssistantPorts(
        key=key, name=name, state=ports.pop("state", None) or MemoryState(),
        clock=ports.pop("clock", None) or FixedClock(),
        settings=Settings(DEFAULTS, overrides or {}), log=logs.append, **ports,
    )
    bundle.logs = logs
    return bundle
