"""
How the LLM client survives a failing endpoint: failure classification for retries with
backoff, the circuit breaker of each endpoint, and the process-wide concurrency cap.

- retries: 429, 5xx, timeouts and connection errors are retryable (`classify_failure`); the
  client retries them with exponential backoff and full jitter, or after the endpoint's
  `Retry-After` seconds (`parse_retry_after`, at most `MAX_RETRY_AFTER`). Other 4xx are not.
- circuit breaker (one per endpoint, shared by every NPC using it): after `breaker_threshold`
  consecutive failed calls it opens and calls fail fast; after `breaker_cooldown` seconds one
  trial call is let through (half-open) and its outcome closes or re-opens it. Only failures
  that say the endpoint is unhealthy count (retryable ones and garbage answers).
"""

import json
import threading

from twisted.internet import defer

from ai_assistant.plumbing.ports import LLMBadResponse, LLMError, LLMTimeout

# Retry-After values larger than this are treated as this (a misconfigured proxy must not
# park an NPC for hours).
MAX_RETRY_AFTER = 60.0


class LLMRequestError(LLMError):
    """
    The endpoint answered with an HTTP error (after retries, if it was retryable).

    Attributes:
        status_code (int): The HTTP status.
        retryable (bool): Whether it was a transient kind (429/5xx).
    """

    def __init__(self, message, status_code=None, retryable=False):
        super().__init__(message)
        self.status_code = status_code
        self.retryable = retryable


class LLMConnectionError(LLMError):
    """The endpoint could not be reached (after retries)."""


# ----------------------------------------------------------------------------------------------
# Circuit breaker


class CircuitBreaker:
    """
    Consecutive-failure breaker for one endpoint. Times are passed in (reactor seconds), so
    tests drive it with a fake clock.

    Args:
        threshold (int): Consecutive failed calls that open it.
        cooldown (float): Seconds open before one trial call is let through.
    """

    CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"

    def __init__(self, threshold=5, cooldown=30.0):
        self.threshold = max(1, int(threshold))
        self.cooldown = float(cooldown)
        self.state = self.CLOSED
        self.failures = 0
        self.opened_at = 0.0
        self._trial_in_flight = False

    def allow(self, now):
        """
        Whether a call may go out now. In half-open state only one trial call is let through.

        Returns:
            bool: True to proceed.
        """
        if self.state == self.CLOSED:
            return True
        if self.state == self.OPEN and now - self.opened_at >= self.cooldown:
            self.state = self.HALF_OPEN
            self._trial_in_flight = False
        if self.state == self.HALF_OPEN and not self._trial_in_flight:
            self._trial_in_flight = True
            return True
        return False

    def retry_in(self, now):
        """Seconds until a trial call will be allowed (0 when not open)."""
        if self.state != self.OPEN:
            return 0.0
        return max(0.0, self.cooldown - (now - self.opened_at))

    def record_success(self):
        self.state = self.CLOSED
        self.failures = 0
        self._trial_in_flight = False

    def record_failure(self, now):
        """Count a failed call. Returns True if this failure opened the breaker."""
        self.failures += 1
        was_open = self.state == self.OPEN
        if self.state == self.HALF_OPEN or self.failures >= self.threshold:
            self.state = self.OPEN
            self.opened_at = now
            self._trial_in_flight = False
        return self.state == self.OPEN and not was_open

    def release_trial(self):
        """A trial call ended without a verdict on the endpoint (e.g. a refused request)."""
        self._trial_in_flight = False


# One breaker per endpoint, shared by every assistant that calls it: the health of an endpoint
# is a fact about the endpoint, not about one assistant, so this registry is process-wide.
_breakers = {}
_breakers_lock = threading.Lock()


def get_breaker(base_url, threshold=5, cooldown=30.0):
    """The shared breaker of one endpoint (created on first use)."""
    key = (base_url or "https://api.openai.com/v1").rstrip("/")
    with _breakers_lock:
        breaker = _breakers.get(key)
        if breaker is None:
            breaker = _breakers[key] = CircuitBreaker(threshold, cooldown)
        else:  # the latest configuration wins (an admin may have tuned it)
            breaker.threshold = max(1, int(threshold))
            breaker.cooldown = float(cooldown)
        return breaker


def reset_breakers():
    """Forget every breaker (tests; an admin after fixing an endpoint)."""
    with _breakers_lock:
        _breakers.clear()


# ----------------------------------------------------------------------------------------------
# Concurrency caps

# The cap on calls in flight across every assistant of the process (`llm.global_concurrency`):
# it protects the server and its thread pool, so it is process-wide by nature. Each client
# holds its own per-assistant cap (`llm.per_npc_concurrency`).
_global_semaphore = None


def get_global_semaphore(limit):
    """The process-wide cap on LLM calls in flight (created on first use)."""
    global _global_semaphore
    if _global_semaphore is None:
        _global_semaphore = defer.DeferredSemaphore(max(1, int(limit)))
    return _global_semaphore


# ----------------------------------------------------------------------------------------------
# Failure classification


class AttemptFailed(Exception):
    """One HTTP attempt failed; carries what the retry logic needs."""

    def __init__(self, error, retryable=False, retry_after=None, unhealthy=False):
        super().__init__(str(error))
        self.error = error
        self.retryable = retryable
        self.retry_after = retry_after
        # whether this failure says the endpoint is unhealthy (counts for the breaker)
        self.unhealthy = unhealthy or retryable


def parse_retry_after(headers):
    """Seconds the endpoint asks us to wait (`Retry-After`), capped; None when it says none."""
    if headers is None:
        return None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(value)))
    except (TypeError, ValueError):  # an HTTP date: not worth parsing, use our backoff
        return None


def classify_failure(exc):
    """Turn an exception from the SDK call into an `AttemptFailed`."""
    import openai

    if isinstance(exc, AttemptFailed):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return AttemptFailed(LLMTimeout("request timed out"), retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return AttemptFailed(LLMConnectionError(f"connection failed: {exc}"), retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in (408, 409, 429) or status >= 500
        detail = _error_detail(exc)
        error = LLMRequestError(f"HTTP {status}: {detail}", status_code=status, retryable=retryable)
        return AttemptFailed(
            error,
            retryable=retryable,
            retry_after=parse_retry_after(getattr(exc.response, "headers", None)),
        )
    if isinstance(exc, LLMBadResponse):
        return AttemptFailed(exc, unhealthy=True)
    if isinstance(exc, (openai.APIResponseValidationError, json.JSONDecodeError, ValueError)):
        return AttemptFailed(LLMBadResponse(f"unreadable response: {exc}"), unhealthy=True)
    if isinstance(exc, LLMError):
        return AttemptFailed(exc)
    return AttemptFailed(LLMError(f"{type(exc).__name__}: {exc}"))


def _error_detail(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        message = body.get("message") or body.get("error", {})
        if isinstance(message, dict):
            message = message.get("message")
        if message:
            return str(message)[:200]
    return str(getattr(exc, "message", "") or exc)[:200]
