"""
`reactor_turns.TurnQueue`: the assistants' flushes and tick work run one per reactor pass, so
the reactor reads its sockets (a player's command) between them.
"""

from unittest.mock import patch

from twisted.internet import reactor

from ai_assistant.reactor_turns import TurnQueue


def one_pass():
    reactor.runUntilCurrent()  # what a running reactor does once per turn, before its sockets


def test_each_call_runs_in_a_pass_of_its_own_in_order():
    queue, ran = TurnQueue(), []
    for name in ("Ada", "Bob", "Cy"):
        queue.add(ran.append, name)
    assert ran == []  # nothing inside the caller's turn
    one_pass()
    assert ran == ["Ada"]
    one_pass()
    one_pass()
    assert ran == ["Ada", "Bob", "Cy"] and len(queue) == 0
    one_pass()
    assert ran == ["Ada", "Bob", "Cy"]


def test_a_call_that_raises_is_logged_and_the_next_still_runs():
    queue, ran = TurnQueue(), []

    def fails():
        raise RuntimeError("disk full")

    queue.add(fails)
    queue.add(ran.append, "after")
    with patch("ai_assistant.reactor_turns.logger.log_trace") as logged:
        one_pass()
    assert "fails" in logged.call_args.args[0]
    one_pass()
    assert ran == ["after"]


def test_a_queue_whose_pending_call_was_cancelled_runs_again():
    queue, ran = TurnQueue(), []
    queue.add(ran.append, "lost")
    queue.clear()  # a test's end cancels what is pending
    one_pass()
    assert ran == []
    queue.add(ran.append, "next")
    one_pass()
    assert ran == ["next"]
