"""
Running inspector work on the reactor thread, and waiting for it from a web worker thread.

Evennia serves its website through Twisted's WSGI resource, whose requests run in a thread
pool (`evennia.server.webserver`), while an assistant's state lives on the reactor thread:
its documents are cached in `ndb` and written behind (`adapters.AttributeState`), and its
stores answer with Deferreds. So every read and correction goes through `on_reactor`, which
hands the call to the reactor with `twisted.internet.threads.blockingCallFromThread` - what
`evennia.utils.utils.run_in_main_thread` does, except that Evennia's helper decides which
thread it is on once, when it is imported, and so would run a web thread's call in place.
"""

import threading

from twisted.internet import defer, reactor, threads
from twisted.python.failure import Failure


class WouldBlock(RuntimeError):
    """Work on the reactor thread itself whose Deferred has not fired: waiting would hang it."""


def on_reactor(func, *args, **kwargs):
    """
    Call `func` on the reactor thread and return its result, waiting for a Deferred.

    On the reactor (main) thread itself - a test's Django client - it is called in place, and a
    Deferred it returns must already have fired.

    Raises:
        Whatever `func` raised (or its Deferred failed with); `WouldBlock` as above.
    """
    if threading.current_thread() is not threading.main_thread():
        return threads.blockingCallFromThread(reactor, func, *args, **kwargs)
    result = func(*args, **kwargs)
    if not isinstance(result, defer.Deferred):
        return result
    outcome = []
    result.addBoth(outcome.append)
    if not outcome:
        raise WouldBlock(f"{getattr(func, '__name__', func)} has not finished")
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]
