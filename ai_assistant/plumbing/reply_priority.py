"""
Replies first: background work that a player's reply does not need waits while one is in flight.

Python threads share one interpreter lock with the reactor. A reply is many small steps -
reactor callbacks, a recall in the computing pool, the model request in the waiting pool - and
each step waits for the lock whenever another thread is busy computing, up to the interpreter's
switch interval each time. Background work that computes (an assistant's warm-up: opening its
long-term store, reading its memories into the recall mirror, building its index) therefore
slows a reply running beside it several times over, although neither queues behind the other.
Just after a start or a reload that is exactly when a player talks (issue 34).

So background work is started through `when_no_reply`: at once when no reply is in flight,
else as soon as the last one is over. A reply marks itself with `reply_started` and
`reply_finished` (the awake tick's answer does). Work already running is not interrupted;
only what has not started yet waits. A reply must never wait for work held here (it would
wait for itself): replies that need the long-term store open it directly, not through this.

Process-wide by nature (one interpreter lock per process); used on the reactor thread only.
"""

from twisted.internet import defer

_in_flight = [0]  # replies in flight in this process
_held = []  # (Deferred, func, args, kwargs) waiting for no reply to be in flight


def replying():
    """True while a reply is in flight in this process."""
    return _in_flight[0] > 0


def reply_started():
    """Mark a reply in flight (pair it with `reply_finished`, in a `finally`)."""
    _in_flight[0] += 1


def reply_finished():
    """Mark a reply over; when none is left in flight, start the work held meanwhile."""
    _in_flight[0] = max(0, _in_flight[0] - 1)
    if _in_flight[0]:
        return
    held, _held[:] = list(_held), []
    for waiter, func, args, kwargs in held:
        defer.maybeDeferred(func, *args, **kwargs).chainDeferred(waiter)


def when_no_reply(func, *args, **kwargs):
    """
    Run background work `func(*args, **kwargs)` now, or once no reply is in flight.

    Returns:
        Deferred: Fires with what `func` returns (or its Deferred's result, or its failure).
    """
    if not replying():
        return defer.maybeDeferred(func, *args, **kwargs)
    waiter = defer.Deferred()
    _held.append((waiter, func, args, kwargs))
    return waiter
