"""
The worker pools' threads run at a lower CPU priority than the reactor's thread
(`plumbing.threads`, `threads.nice`), so that on a machine with more runnable threads than
cores the reactor is given a core first.
"""

import os
import sys
import threading
from unittest.mock import patch

import pytest

from ai_assistant.plumbing import threads
from ai_assistant.plumbing.settings import Settings

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="a thread has a nice value of its own on Linux only")


def own_nice():
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def nice_in_pool(kind):
    """The nice value a thread of pool `kind` runs at."""
    found, done = [], threading.Event()

    def report():
        found.append(own_nice())
        done.set()

    threads.get_pool(kind).callInThread(report)
    assert done.wait(10)
    return found[0]


@linux_only
@pytest.mark.parametrize("kind", ["cpu", "io"])
def test_a_pool_thread_runs_at_a_lower_priority_than_the_reactor(kind):
    threads.stop_pool()
    threads.configure(Settings(overrides={"threads.nice": 7}))
    try:
        caller = own_nice()
        assert nice_in_pool(kind) == min(19, caller + 7)
        assert own_nice() == caller  # the reactor's thread keeps its own priority
    finally:
        threads.stop_pool()
        threads.configure(Settings())


@linux_only
def test_nice_zero_leaves_the_workers_at_the_reactor_s_priority():
    threads.stop_pool()
    threads.configure(Settings(overrides={"threads.nice": 0}))
    try:
        assert nice_in_pool("cpu") == own_nice()
    finally:
        threads.stop_pool()
        threads.configure(Settings())


def test_elsewhere_than_linux_nothing_is_lowered():
    # there the call would name the whole process, reactor included
    with patch.object(threads.sys, "platform", "darwin"), \
            patch.object(threads.os, "setpriority") as setpriority:
        assert threads.lower_priority(10) is False
    setpriority.assert_not_called()
