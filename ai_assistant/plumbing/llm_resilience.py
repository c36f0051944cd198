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
- "tools unsupported" is told apart from any other refused request by what the error body
  says (`says_tools_unsupported`), never by the status alone: a plain 400 (a bad argument, a
  prompt too long) must not switch an assistant to the JSON protocol nor double its calls.
  Such a refusal is never retried, whatever its status (llama.cpp answers it with a 500).
"""

import functools
import json
import logging
import re
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
        tools_unsupported (bool): The body says the endpoint or model takes no native tools
            (`says_tools_unsupported`): the caller may retry without them.
    """

    def __init__(self, message, status_code=None, retryable=False, tools_unsupported=False):
        super().__init__(message)
        self.status_code = status_code
        self.retryable = retryable
        self.tools_unsupported = tools_unsupported


# What real servers answer when a request carries `tools` they cannot take, each verbatim:
# - Ollama (400): "registry.ollama.ai/library/gemma3:4b does not support tools", in
#   {"error": {"message": ..., "type": "api_error"}} on /v1 and {"error": "..."} natively;
# - OpenAI (400, "param": "tools"): "tools is not supported in this model. For a list of
#   supported models, refer to ..."; Azure OpenAI (404): "Unrecognized request argument
#   supplied: tools";
# - vLLM without a tool parser (400): "\"auto\" tool choice requires
#   --enable-auto-tool-choice and --tool-call-parser to be set";
# - llama.cpp without --jinja (500): "tools param requires --jinja flag"; older servers (500):
#   "Unsupported param: tools";
# - others word it "tools are not supported", "tool calling is not supported", "function
#   calling not supported".
_TOOLS_UNSUPPORTED = re.compile(
    r"does not support tools"
    r"|\btools? (?:is |are )?not supported"
    r"|\b(?:tool|function)[ _-]?(?:calling|calls?|use) (?:is |are )?not supported"
    r"|tool choice requires --enable-auto-tool-choice"
    r"|tools param requires --jinja"
    r"|unsupported param(?:eter)?:? ['\"]?tools\b"
    r"|unrecognized request argument supplied: tools\b",
    re.IGNORECASE,
)


def says_tools_unsupported(text):
    """
    Whether an error body says the request's native `tools` cannot be taken.

    Args:
        text (str): The error message or body.

    Returns:
        bool: True for the known wordings (see `_TOOLS_UNSUPPORTED`).
    """
    return bool(_TOOLS_UNSUPPORTED.search(str(text or "")))


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
# Deadlines and logs

# The client library whose HTTP stack logs each request at INFO. Which HTTP library it uses
# changes between releases (openai 1.x: httpx/httpcore; 3.x: httpx2/httpcore2), so the stack's
# loggers are found from the installed packages: the client and everything it depends on.
HTTP_CLIENT = "openai"
# HTTP libraries that may log requests although the client does not depend on them directly.
HTTP_LOGGER_PREFIXES = ("http", "urllib3", "requests")


@functools.cache
def _dependency_modules(distribution):
    """
    Top-level import names of `distribution` and of all it requires (extras left out).

    Only the distributions of that closure are read (a dozen for openai): scanning every
    installed package (`metadata.packages_distributions`) costs about 0.3 s of CPU, paid by
    the first reply after every start.
    """
    from importlib import metadata

    seen, todo, modules = set(), [_normal(distribution)], {distribution}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            found = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        modules |= _top_level_modules(found)
        for requirement in found.requires or []:
            if "extra ==" not in requirement:
                todo.append(_normal(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0]))
    return frozenset(modules)


def _top_level_modules(found):
    """The import names an installed distribution provides (its top_level.txt, else its
    RECORD's first path parts: read as text, not as thousands of path objects)."""
    listed = found.read_text("top_level.txt")
    if listed:
        return {line.strip() for line in listed.splitlines() if line.strip()}
    names = set()
    for line in (found.read_text("RECORD") or "").splitlines():
        path = line.split(",", 1)[0]
        top, _, rest = path.partition("/")
        if not rest:
            top = top.removesuffix(".py") if top.endswith(".py") else ""
        if top.isidentifier() and top != "__pycache__":
            names.add(top)
    return names


def _normal(distribution):
    return re.sub(r"[-_.]+", "-", distribution).lower()


def http_logger_names():
    """
    The loggers that may write a line per HTTP request: the client's, its dependencies' (as
    installed), and any registered logger of a known HTTP library.

    Returns:
        list[str]: Logger names, sorted.
    """
    names = set(_dependency_modules(HTTP_CLIENT))
    for name in list(logging.root.manager.loggerDict):
        top = name.split(".", 1)[0]
        if top in names or top.startswith(HTTP_LOGGER_PREFIXES):
            names.add(top)
    return sorted(names)


def quiet_http_logs(verbose=False):
    """
    Keep the HTTP stack's per-request INFO lines out of the server log (process-wide: the
    loggers are the libraries' own). Call it after the client is imported, so its loggers
    exist; a logger below one of these (`httpx2._client`) follows its parent.

    Args:
        verbose (bool): True (`llm.log_requests`, for debugging) lets them through at INFO.
    """
    level = logging.INFO if verbose else logging.WARNING
    for name in http_logger_names():
        logging.getLogger(name).setLevel(level)


class DeadlineLLM:
    """
    An `LLMPort` whose every call shares one deadline: all the calls of one reply.

    Args:
        llm (LLMPort): The client; only one that `takes_deadline` (`LLMClient`) gets it, any
            other port is called as it is.
        seconds (float): The time the reply may take, from now.
    """

    def __init__(self, llm, seconds):
        self._llm = llm
        self.deadline = (llm.clock.seconds() + float(seconds)
                         if getattr(llm, "takes_deadline", False) is True else None)

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def complete(self, messages, **kwargs):
        if self.deadline is not None:
            kwargs.setdefault("deadline", self.deadline)
        return self._llm.complete(messages, **kwargs)


def with_deadline(llm, seconds):
    """`llm` with one deadline, `seconds` from now, for every call (None stays None)."""
    return None if llm is None else DeadlineLLM(llm, seconds)


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
        detail = _error_detail(exc)
        tools_unsupported = says_tools_unsupported(
            f"{detail} {getattr(exc, 'message', '')} {getattr(exc, 'body', '')}")
        # a refusal of the tools says nothing about the endpoint's health: never retried
        retryable = not tools_unsupported and (status in (408, 409, 429) or status >= 500)
        error = LLMRequestError(f"HTTP {status}: {detail}", status_code=status,
                                retryable=retryable, tools_unsupported=tools_unsupported)
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
