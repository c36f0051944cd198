"""
Replies first (issue 34): background work not yet started waits while a reply is in flight.
"""

import pytest
from twisted.internet import defer

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
