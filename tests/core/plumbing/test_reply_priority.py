"""
Replies first (issue 34): background work not yet started waits while a reply is in flight.
"""

import pytest
from twisted.internet import defer, task

from ai_assistant.plumbing import reply_priority


@pytest.fixture(autouse=True)
def no_reply_in_flight(monkeypatch):
    monkeypatch.setattr(reply_priority, "_in_flight", [0])
    monkeypatch.setattr(reply_priority, "_held", [])


def test_background_work_runs_at_once_when_no_reply_is_in_flight():
    ran = []
    done = reply_priority.when_no_reply(lambda: ran.append("warm") or "warmed")
    assert ran == ["warm"] and done.result == "warmed"


def test_background_work_waits_for_every_reply_in_flight_then_runs_in_order():
    ran = []
    reply_priority.reply_started()
    reply_priority.reply_started()  # two players talking to two assistants
    first = reply_priority.when_no_reply(lambda: ran.append("Ada") or "Ada warmed")
    second = reply_priority.when_no_reply(ran.append, "Bea")
    assert ran == [] and not first.called and not second.called
    reply_priority.reply_finished()
    assert ran == []  # one reply is still in flight
    reply_priority.reply_finished()
    assert ran == ["Ada", "Bea"] and first.result == "Ada warmed"
    assert not reply_priority.replying()


def test_held_work_that_fails_fails_its_own_deferred_only():
    reply_priority.reply_started()
    failing = reply_priority.when_no_reply(lambda: 1 / 0)
    ran = []
    reply_priority.when_no_reply(ran.append, "next")
    reply_priority.reply_finished()
    assert ran == ["next"]
    failures = []
    failing.addErrback(failures.append)
    assert failures and failures[0].check(ZeroDivisionError)


def test_held_work_that_returns_a_deferred_is_followed():
    gate = defer.Deferred()
    reply_priority.reply_started()
    done = reply_priority.when_no_reply(lambda: gate)
    reply_priority.reply_finished()
    assert not done.called
    gate.callback("opened")
    assert done.result == "opened"


@pytest.fixture
def clock(monkeypatch):
    """A start just made: `when_settled` waits on this clock (as on a running reactor)."""
    lent = task.Clock()
    monkeypatch.setattr(reply_priority, "_clock", [lent])
    monkeypatch.setattr(reply_priority, "_last_activity", [None])
    return lent


def test_long_work_waits_for_a_quiet_moment_after_the_start(clock):
    ran = []
    done = reply_priority.when_settled(lambda: ran.append("open") or "opened")
    clock.advance(reply_priority.QUIET_SECONDS - 0.1)
    assert ran == []
    clock.advance(0.1)
    assert ran == ["open"] and done.result == "opened"
    # the start has settled: work asked later runs at once
    later = reply_priority.when_settled(ran.append, "Bea")
    assert ran == ["open", "Bea"] and later.called


def test_a_line_said_just_after_the_start_is_answered_before_the_long_work_starts(clock):
    """A player talks at once after a reload: the line, then the reply, each push the work
    back, and it starts only once the reply has been over for the quiet moment."""
    ran = []
    reply_priority.when_settled(ran.append, "open")
    clock.advance(0.5)
    reply_priority.line_heard()
    clock.advance(reply_priority.QUIET_SECONDS - 0.1)  # the turn starts late under load
    reply_priority.reply_started()
    clock.advance(5.0)  # a model that takes its time: nothing starts beside the reply
    assert ran == []
    reply_priority.reply_finished()
    clock.advance(reply_priority.QUIET_SECONDS - 0.1)
    assert ran == []
    clock.advance(0.1)
    assert ran == ["open"]


def test_a_game_that_never_falls_quiet_gets_the_long_work_done_between_replies(clock):
    """A busy room hears a line every second: the work waits at most MOST_WAIT_SECONDS, then
    for the reply in flight to end, never for a quiet moment that does not come."""
    ran = []
    reply_priority.when_settled(ran.append, "open")
    for _ in range(int(reply_priority.MOST_WAIT_SECONDS) - 1):
        reply_priority.line_heard()
        clock.advance(1.0)
    assert ran == []
    reply_priority.reply_started()
    clock.advance(1.5)
    reply_priority.line_heard()
    assert ran == []  # not beside the reply
    reply_priority.reply_finished()
    clock.advance(0)
    assert ran == ["open"]


def test_without_a_running_reactor_long_work_waits_only_for_the_replies(monkeypatch):
    monkeypatch.setattr(reply_priority, "_clock", [])
    monkeypatch.setattr(reply_priority, "_last_activity", [None])
    ran = []
    reply_priority.when_settled(ran.append, "now")
    assert ran == ["now"]
    reply_priority.reply_started()
    reply_priority.when_settled(ran.append, "after the reply")
    assert ran == ["now"]
    reply_priority.reply_finished()
    assert ran == ["now", "after the reply"]
