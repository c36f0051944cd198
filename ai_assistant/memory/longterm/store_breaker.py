"""
The breaker in front of a memory database: when PostgreSQL stops answering, fail fast.

A store in a database (`memory.store = "postgres"`) can go away under a running game. Without a
breaker every call would wait for the connection pool's timeout and fail on its own, each
logged: a tick that recalls, a consolidation that stores, every assistant, again and again.
One `StoreBreaker` per database (shared by every assistant of the process, as the database's
health is a fact about the database) uses the project's `CircuitBreaker` (the LLM endpoints'
own): the first call that finds the database unreachable opens it and logs ONE warning; while
it is open calls fail at once with `MemoryStoreUnavailable` (recall then answers from the
tiers in hand, consolidation keeps its entries for a later night); after `cooldown` seconds
one trial call goes through, and the first success closes it and logs ONE line that the
database is back.

Only failures that say the database is unreachable count (`is_unreachable`): a refused id or a
constraint is the call's own problem, not the database's.

The breaker is called from worker threads (the store runs off the reactor): a lock guards it.
"""

import threading
import time

from ai_assistant.plumbing.llm_resilience import CircuitBreaker

COOLDOWN = 5.0  # seconds open before a trial call finds out whether the database is back


class MemoryStoreUnavailable(RuntimeError):
    """The memory database is unreachable (the breaker is open): nothing was done."""


def is_unreachable(error):
    """True for an error that says the database could not be reached or went away."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg comes with the postgres store
        return False
    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)


class StoreBreaker:
    """
    One memory database's breaker.

    Args:
        name (str): What the log lines call the database.
        cooldown (float): Seconds open before a trial call.
        clock (callable): Monotonic seconds (tests pass their own).
        log (callable, optional): `log(message)` for the open and close lines (the first
            caller's, else Python's logging).
    """

    def __init__(self, name, cooldown=COOLDOWN, clock=time.monotonic, log=None):
        self.name = name
        self._breaker = CircuitBreaker(threshold=1, cooldown=cooldown)
        self._clock = clock
        self._lock = threading.Lock()
        self._log = log

    @property
    def is_open(self):
        """True while calls fail fast (open, or half-open with its trial out)."""
        with self._lock:
            return self._breaker.state != CircuitBreaker.CLOSED

    def call(self, func, *args, log=None):
        """
        Run `func(*args)` through the breaker (blocking; in a worker thread).

        Args:
            func (callable): The store call.
            log (callable, optional): `log(message)` of the caller, for the open and close
                lines.

        Returns:
            Whatever `func` returns.

        Raises:
            MemoryStoreUnavailable: The breaker is open (`func` was not called), or this call
                found the database unreachable.
            Exception: What `func` raised for any other reason.
        """
        with self._lock:
            allowed = self._breaker.allow(self._clock())
            retry_in = self._breaker.retry_in(self._clock())
        if not allowed:
            raise MemoryStoreUnavailable(
                f"the memory database ({self.name}) is unreachable; trying again in "
                f"{max(1, round(retry_in))} s")
        try:
            result = func(*args)
        except Exception as error:
            if not is_unreachable(error):
                with self._lock:
                    if self._breaker.state == CircuitBreaker.HALF_OPEN:
                        self._breaker.release_trial()  # no verdict on the database
                raise
            with self._lock:
                # a failed trial re-opens it quietly: one warning per outage, not per trial
                opened = self._breaker.state == CircuitBreaker.CLOSED
                self._breaker.record_failure(self._clock())
            if opened:
                self._say(log, f"the memory database ({self.name}) is unreachable: "
                               f"{_first_line(error)}; memory calls fail fast and recall "
                               "answers from what is in hand until it is back")
            raise MemoryStoreUnavailable(
                f"the memory database ({self.name}) is unreachable: {_first_line(error)}"
            ) from error
        with self._lock:
            was_closed = self._breaker.state == CircuitBreaker.CLOSED
            self._breaker.record_success()
        if not was_closed:
            self._say(log, f"the memory database ({self.name}) is back")
        return result

    def _say(self, log, message):
        chosen = log if log is not None else self._log
        if chosen is not None:
            chosen(message)
        else:
            import logging

            logging.getLogger(__name__).warning(message)


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
