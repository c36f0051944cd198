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

Work that is long and can wait longer still - opening an assistant's long-term store, about a
second of interpreter-holding imports - is started through `when_settled` instead: once the
process has been quiet for `QUIET_SECONDS` (no reply in flight, none started or ended and no
line heard meanwhile), counted from the first such request (the start) at the earliest. A
reply is held here only from when its turn starts; the line before that - the player's
command through the Portal and the Server, the assistant hearing it - is not, and a store
opening in the seconds just after a start or a reload ran beside exactly that line.

Process-wide by nature (one interpreter lock per process); used on the reactor thread only.
"""

from twisted.internet import defer, task

# How long the process must be quiet before the work `when_settled` holds starts: a player who
# talks as soon as the server is back says the line within a second or two.
QUIET_SECONDS = 2.0
# ... but no longer than this after it was asked for: in a busy game (a room of assistants
# talking, a line every second) the quiet may never come, and a store left unopened would keep
# the long-term memories out of every reply
MOST_WAIT_SECONDS = 20.0

_in_flight = [0]  # replies in flight in this process
_held = []  # (Deferred, func, args, kwargs) waiting for no reply to be in flight
_last_activity = [None]  # clock seconds of the last reply start or end, line heard, or start
_clock = []  # the clock `when_settled` waits on (the reactor unless a test lends one)


def _time():
    if _clock:
        return _clock[0]
    from twisted.internet import reactor  # (not at module level: the shell installs it)

    return reactor


def _note_activity():
    _last_activity[0] = _time().seconds()


def line_heard():
    """Note that a line was heard (a reply may follow): `when_settled` waits again."""
    _note_activity()


def replying():
    """True while a reply is in flight in this process."""
    return _in_flight[0] > 0


def reply_started():
    """Mark a reply in flight (pair it with `reply_finished`, in a `finally`)."""
    _in_flight[0] += 1
    _note_activity()


def reply_finished():
    """Mark a reply over; when none is left in flight, start the work held meanwhile."""
    _in_flight[0] = max(0, _in_flight[0] - 1)
    _note_activity()
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


def when_settled(func, *args, **kwargs):
    """
    Run long background work `func(*args, **kwargs)` once the process has been quiet for
    `QUIET_SECONDS`: no reply in flight, and none started or ended and no line heard in that
    time, counted from the first call (the start) at the earliest. A process that stays busy
    runs it `MOST_WAIT_SECONDS` after it was asked for, as soon as no reply is in flight.
    Without a running reactor (a script, a test) nothing is waited for but the replies in
    flight (`when_no_reply`).

    Returns:
        Deferred: Fires with what `func` returns (or its Deferred's result, or its failure).
    """
    from twisted.internet import reactor

    if not _clock and not reactor.running:
        return when_no_reply(func, *args, **kwargs)
    if _last_activity[0] is None:
        _note_activity()  # the first request: the start the quiet is counted from
    return _quiet(_time()).addCallback(lambda _: func(*args, **kwargs))


@defer.inlineCallbacks
def _quiet(clock):
    latest = clock.seconds() + MOST_WAIT_SECONDS
    while True:
        if replying():
            yield when_no_reply(lambda: None)
            continue
        now = clock.seconds()
        left = min(_last_activity[0] + QUIET_SECONDS, latest) - now
        if left <= 0:
            return
        yield task.deferLater(clock, left, lambda: None)
