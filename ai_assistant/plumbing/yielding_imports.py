"""
Imports that step aside for a reply: a long import run in the background pauses between modules
while a player's reply is in flight.

Opening an assistant's long-term store is mostly importing (mem0 and its vector store's
client: some 420 modules, ~0.6 of its ~0.8 s of CPU here). Run in a worker thread it holds
the interpreter lock in turn with the reactor and a reply's own threads, so a reply that comes
while it runs takes several times as long, although neither waits for the other
(`plumbing.reply_priority`).
`stepping_aside(should_wait)` puts a finder at the front of `sys.meta_path` that, in the thread
that entered it only, waits before each module not imported yet while `should_wait()` is true:
the import goes on one module at a time, between replies. A module's own code still runs in
one piece (the longest here: qdrant's `http` package and its generated models).

The pauses are bounded, each by `max_pause` and all of them by `max_total`: the thread pauses in
the middle of an import, holding the import locks of the modules it is inside; a reply that
imported one of those would wait for it, and must not wait for ever. Other threads' imports
only pay for one identity check.
"""

import contextlib
import sys
import threading
import time

# How often a paused import looks again (it sleeps in between: the lock is free meanwhile).
POLL_SECONDS = 0.005


class _StepAside:
    """The meta-path finder: finds nothing (the usual finders do), only pauses first."""

    def __init__(self, should_wait, max_pause, max_total):
        self._thread = threading.get_ident()
        self._should_wait = should_wait
        self._max_pause = max_pause
        self._max_total = max_total
        self.paused = 0.0  # seconds paused so far
        self.pauses = 0  # how many times it paused

    def find_spec(self, name, path=None, target=None):
        if threading.get_ident() == self._thread and self.paused < self._max_total:
            self._pause()
        return None

    def _pause(self):
        started = now = time.monotonic()
        limit = min(self._max_pause, self._max_total - self.paused)
        while now - started < limit and self._should_wait():
            time.sleep(POLL_SECONDS)
            now = time.monotonic()
        if now > started:
            self.paused += now - started
            self.pauses += 1


@contextlib.contextmanager
def stepping_aside(should_wait, *, max_pause=0.5, max_total=10.0):
    """
    Within the block, the calling thread's imports pause before each new module while
    `should_wait()` is true (see the module doc).

    Args:
        should_wait (callable): `should_wait() -> bool`, asked from this thread (e.g.
            `reply_priority.replying`: a plain read).
        max_pause (float): The longest one pause lasts, in seconds.
        max_total (float): The longest all the pauses together last.

    Yields:
        The finder: its `paused` (seconds) and `pauses` say how much it stepped aside.
    """
    finder = _StepAside(should_wait, max_pause, max_total)
    sys.meta_path.insert(0, finder)
    try:
        yield finder
    finally:
        sys.meta_path.remove(finder)
