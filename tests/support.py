"""Helpers shared by the tests: running Deferreds synchronously."""

from twisted.internet import defer
from twisted.python.failure import Failure


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
