"""
Work spread over reactor turns: one piece per turn, with the network read in between.

Twisted runs every timed call that is due in one pass (`runUntilCurrent`) before it reads its
sockets again, so twenty `callLater(0, ...)` made by one ticker call (TICKER_HANDLER calls
every assistant on the same interval at once) run back to back, and a player's `look` that
arrives meanwhile waits for all twenty. A call scheduled while a pass runs is only taken at the
next pass: a queue that runs one piece and then schedules itself again gives each piece a
pass of its own, and the reactor reads its sockets before each.
"""

from collections import deque

from evennia.utils import logger
from twisted.internet import reactor


class TurnQueue:
    """
    Calls run one per reactor turn, in the order they were added.

    Each call runs on the reactor thread, as `callLater` would run it; one that raises is
    logged and the next still runs.
    """

    def __init__(self):
        self._waiting = deque()
        self._call = None  # the pending `callLater` that runs the next piece

    def add(self, func, *args):
        """Run `func(*args)` in a reactor turn of its own, after the calls added before it."""
        self._waiting.append((func, args))
        if self._call is None or not self._call.active():
            self._call = reactor.callLater(0, self._run_one)

    def clear(self):
        """Forget every call not run yet (a test's end: its objects are gone)."""
        self._waiting.clear()
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def __len__(self):
        return len(self._waiting)

    def _run_one(self):
        self._call = None
        if not self._waiting:
            return
        func, args = self._waiting.popleft()
        try:
            func(*args)
        except Exception:  # one failed piece must not stop the ones queued after it
            logger.log_trace(f"[ai_assistant] {getattr(func, '__qualname__', func)} failed")
        finally:
            if self._waiting and self._call is None:
                # taken at the next pass, after the network is read
                self._call = reactor.callLater(0, self._run_one)


# the assistants' tick work and flushes, in the Server process
ticks = TurnQueue()
# the lines assistants overheard, one listener's per turn (`heard_line.overhear`)
overheard = TurnQueue()
