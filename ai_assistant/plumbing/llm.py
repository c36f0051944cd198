"""
The LLM client: any OpenAI-compatible chat-completions endpoint through the `openai` SDK.

`LLMClient.complete(...)` returns a Deferred and never blocks the reactor: the SDK call runs in
the shared thread pool (`ai_assistant.plumbing.threads.run_blocking`), and everything around it -
retries, backoff, the circuit breaker, the emergency stop, concurrency caps and token
accounting - happens in Twisted on the reactor thread, so no thread ever sleeps and every state
write happens in a callback on the reactor.

Failure handling, from the inside out (the classification, the breakers and the process-wide
concurrency cap live in `plumbing.llm_resilience`):

- retries: 429, 5xx, timeouts and connection errors are retried `max_retries` times with
  exponential backoff and full jitter (`uniform(0, min(backoff_max, backoff_base * 2**n))`), or
  after the endpoint's `Retry-After` seconds when it sends one. Other 4xx are not retried.
- circuit breaker (one per endpoint, shared by every NPC using it): after `breaker_threshold`
  consecutive failed calls (a call counts once, after its retries) it opens and calls fail fast
  with `LLMUnavailable`; after `breaker_cooldown` seconds one trial call is let through
  (half-open) and its outcome closes or re-opens the breaker. Only failures that say the
  endpoint is unhealthy count (retryable ones and garbage answers), not a request it refused.
- emergency stop (per NPC, persisted in the `documents.LLM_STATS` state document so it survives a
  reload): after `max_consecutive_errors` consecutive failed calls the client refuses every
  call until an admin runs `clear_emergency_stop()`.
- deadline: a call may carry one (`complete(..., deadline=)`, in the client's clock seconds;
  `llm_resilience.with_deadline` gives every call of one reply the same). Each attempt's HTTP
  timeout is cut to the time left, and no attempt or backoff starts past it, so a hanging
  endpoint costs a player the deadline (`react.reply_deadline`), not `(max_retries + 1) x
  timeout`.
- HTTP client logs: httpx and openai log every request at INFO; they are kept at WARNING
  unless `llm.log_requests` is on (`quiet_http_logs`).
- the SDK client (`openai.OpenAI`) is one per endpoint, key and timeout for the process, like
  the breaker (`plumbing.llm_sdk.shared_sdk`).
"""

import random
import threading
import time

from twisted.internet import defer, task

from ai_assistant.plumbing import documents, tokens
from ai_assistant.plumbing.llm_resilience import (  # the errors are caught by callers from here
    AttemptFailed,
    LLMConnectionError,  # noqa: F401
    LLMRequestError,  # noqa: F401
    classify_failure,
    get_breaker,
    get_global_semaphore,
    quiet_http_logs,
)
from ai_assistant.plumbing.llm_sdk import shared_sdk
from ai_assistant.plumbing.ports import (
    LLMBadResponse,
    LLMReply,
    LLMTimeout,
    LLMUnavailable,
    ToolCall,
)

# Keyword arguments `chat.completions.create` takes directly; any other per-call parameter
# goes in the request body through `extra_body`.
_SDK_PARAMS = frozenset(
    {
        "model",
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "top_p",
        "stop",
        "seed",
        "response_format",
        "tool_choice",
        "parallel_tool_calls",
        "presence_penalty",
        "frequency_penalty",
        "user",
    }
)


def empty_stats():
    """A fresh `documents.LLM_STATS` document."""
    return {
        "calls": 0,
        "failures": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "consecutive_errors": 0,
        "emergency_stop": False,
        "last_error": None,
        "last_call_at": None,  # epoch seconds of the last call: how recently it was active
        "by_purpose": {},
    }


class LLMStats:
    """
    One NPC's LLM statistics (`documents.LLM_STATS`): calls, tokens and errors per purpose,
    consecutive errors and the emergency stop. The client writes them; `@assistant` and the
    memory inspector read them (`LLMStats(ports.state).read()`), with or without a client.

    Args:
        state (StateStore, optional): Where they live; kept in memory when None.
    """

    def __init__(self, state=None):
        self.state = state
        self._memory = empty_stats()

    def read(self):
        """The statistics, every key present (the stored dict: `save` it back once changed)."""
        if self.state is None:
            return self._memory
        stats = self.state.get(documents.LLM_STATS, None)
        if not isinstance(stats, dict):
            stats = empty_stats()
        for key, value in empty_stats().items():
            stats.setdefault(key, value)
        return stats

    def save(self, stats):
        """Keep `stats` (from `read`, changed)."""
        if self.state is None:
            self._memory = stats
        else:
            self.state.set(documents.LLM_STATS, stats)


def mask_secret(key):
    """
    Show an API key safely: a short prefix and the last four characters.

    Args:
        key (str): The secret.

    Returns:
        str: E.g. "sk-...abcd"; "(not set)" for no key; "****" for keys too short to hint at.
    """
    if not key:
        return "(not set)"
    key = str(key)
    if len(key) < 12:
        return "****"
    prefix = key[:3] if key[:3].isascii() else ""
    return f"{prefix}...{key[-4:]}"


# ----------------------------------------------------------------------------------------------
# The client


class LLMClient:
    """
    An `LLMPort` over one OpenAI-compatible endpoint, for one NPC.

    Args:
        config (Mapping): The `llm` settings subtree (see `conf.DEFAULTS["llm"]`).
        npc_key (str): The NPC's unique key.
        npc_name (str): For log lines.
        state (StateStore, optional): Where `documents.LLM_STATS` lives; in memory when None.
        log (callable, optional): `log(message)`.
        runner (callable, optional): `runner(func, *args) -> Deferred`; the thread pool by
            default. Tests inject a synchronous one.
        clock (IReactorTime, optional): For backoff delays and the breaker; the reactor by
            default.
        rng (random.Random, optional): Jitter source.
        sdk_client (openai.OpenAI, optional): A prebuilt SDK client.
        sources (dict, optional): Where `base_url`, `model` and `api_key` came from, in words
            (`plumbing.environment.setting_source`), for the line the first request logs.
    """

    # it takes `complete(..., deadline=)` (`llm_resilience.DeadlineLLM` passes one)
    takes_deadline = True

    def __init__(
        self,
        config,
        *,
        npc_key="",
        npc_name="assistant",
        state=None,
        log=None,
        runner=None,
        clock=None,
        rng=None,
        sdk_client=None,
        sources=None,
    ):
        self.config = dict(config or {})
        self.sources = dict(sources or {})
        self.npc_key = npc_key or npc_name
        self.npc_name = npc_name
        self.state = state
        self.log = log if log is not None else (lambda message: None)
        self.base_url = self.config.get("base_url") or None
        self.model = self.config.get("model") or "gpt-4o-mini"
        self.max_retries = max(0, int(self.config.get("max_retries", 3)))
        self.timeout = float(self.config.get("timeout", 30.0))
        self.backoff_base = float(self.config.get("backoff_base", 0.5))
        self.backoff_max = float(self.config.get("backoff_max", 8.0))
        self.max_consecutive_errors = max(1, int(self.config.get("max_consecutive_errors", 5)))
        self._runner = runner
        self._clock = clock
        self._rng = rng or random.Random()
        self._sdk = sdk_client
        self._sdk_lock = threading.Lock()
        self._stats = LLMStats(state)
        self._refusal_logged = False
        self.breaker = get_breaker(
            self.base_url,
            self.config.get("breaker_threshold", 5),
            self.config.get("breaker_cooldown", 30.0),
        )
        self.global_semaphore = get_global_semaphore(self.config.get("global_concurrency", 4))
        # the client belongs to one assistant, so its per-assistant cap lives with it
        self.npc_semaphore = defer.DeferredSemaphore(
            max(1, int(self.config.get("per_npc_concurrency", 1)))
        )

    def __repr__(self):
        return (
            f"<LLMClient {self.npc_name} model={self.model} base_url={self.base_url} "
            f"key={mask_secret(self.config.get('api_key'))}>"
        )

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def clock(self):
        if self._clock is None:
            from twisted.internet import reactor

            self._clock = reactor
        return self._clock

    def _run(self, func, *args):
        if self._runner is not None:
            return self._runner(func, *args)
        from ai_assistant.plumbing.threads import run_blocking

        return run_blocking(func, *args)

    @property
    def sdk(self):
        """The `openai.OpenAI` client (built lazily; its own retries are off, ours apply)."""
        with self._sdk_lock:  # worker threads may ask for it at the same time
            if self._sdk is None:
                self._sdk = self._build_sdk()
        return self._sdk

    def _build_sdk(self):
        quiet_http_logs(bool(self.config.get("log_requests", False)))
        # local servers (Ollama, llama.cpp) need no key, but the SDK insists on one
        return shared_sdk(self.base_url, self.config.get("api_key") or "not-needed",
                          self.timeout)

    # -- stats document ------------------------------------------------------------------------

    def stats(self):
        """The current statistics (`LLMStats.read`)."""
        return self._stats.read()

    def _save_stats(self, stats):
        self._stats.save(stats)

    @property
    def emergency_stopped(self):
        return bool(self.stats().get("emergency_stop"))

    def clear_emergency_stop(self):
        """
        Lift the emergency stop and reset the consecutive-error count.

        Returns:
            bool: True if an emergency stop was in force (only then is a clearing logged).
        """
        stats = self.stats()
        was_stopped = bool(stats.get("emergency_stop"))
        stats["emergency_stop"] = False
        stats["consecutive_errors"] = 0
        self._save_stats(stats)
        self._refusal_logged = False
        if was_stopped:
            self.log(f"{self.npc_name}: LLM emergency stop cleared")
        return was_stopped

    def _record_success(self, reply, purpose):
        stats = self.stats()
        stats["calls"] += 1
        stats["prompt_tokens"] += reply.prompt_tokens
        stats["completion_tokens"] += reply.completion_tokens
        stats["consecutive_errors"] = 0
        stats["last_call_at"] = time.time()
        bucket = stats["by_purpose"].setdefault(
            purpose, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        bucket["calls"] += 1
        bucket["prompt_tokens"] += reply.prompt_tokens
        bucket["completion_tokens"] += reply.completion_tokens
        self._save_stats(stats)

    def _record_failure(self, error, purpose):
        stats = self.stats()
        stats["calls"] += 1
        stats["failures"] += 1
        stats["consecutive_errors"] += 1
        stats["last_error"] = f"{type(error).__name__}: {error}"[:300]
        stats["last_call_at"] = time.time()
        bucket = stats["by_purpose"].setdefault(
            purpose, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        bucket["calls"] += 1
        engaged = False
        if (
            stats["consecutive_errors"] >= self.max_consecutive_errors
            and not stats["emergency_stop"]
        ):
            stats["emergency_stop"] = True
            engaged = True
        self._save_stats(stats)
        return engaged

    # -- the call ------------------------------------------------------------------------------

    def complete(self, messages, *, tools=None, purpose="chat", deadline=None, **params):
        """
        Ask the model.

        Args:
            messages (list[dict]): OpenAI-style chat messages.
            tools (list[dict], optional): Native tool specs.
            purpose (str): What the call is for (counted per purpose, logged on failure).
            deadline (float, optional): When the answer is no use any more, in `clock`
                seconds: attempts are cut short to it, and none starts after it.
            **params: Per-call overrides (temperature, max_tokens, response_format, ...).

        Returns:
            Deferred[LLMReply]: Errbacks with an `LLMError` subclass (`LLMTimeout` when the
            deadline passed).
        """
        if self.emergency_stopped:
            return self._refuse(
                f"emergency stop after {self.max_consecutive_errors} consecutive errors "
                f"(clear it with @assistant/config or clear_emergency_stop())"
            )
        now = self.clock.seconds()
        if not self.breaker.allow(now):
            return self._refuse(
                f"circuit breaker open for {self.base_url or 'the default endpoint'} "
                f"(retry in {self.breaker.retry_in(now):.0f}s)"
            )
        request = self._build_request(messages, tools, params)
        self._announce()
        deferred = self.npc_semaphore.run(self._call_with_retries, request, deadline)
        deferred.addCallbacks(
            self._call_succeeded,
            self._call_failed,
            callbackArgs=(purpose,),
            errbackArgs=(purpose,),
        )
        return deferred

    def _announce(self):
        """
        Log, once per server process and endpoint, where requests go and why.

        Names the endpoint, the model and the key (masked), each with where it came from
        (per-NPC config, the game's settings, the environment, the default), so an
        `OPENAI_API_KEY` left in a shell does not start paid calls unnoticed.
        """
        endpoint = self.base_url or "https://api.openai.com/v1 (the SDK's default)"
        signature = (endpoint, self.model, mask_secret(self.config.get("api_key")))
        if signature in _announced:
            return
        _announced.add(signature)
        where = {name: self.sources.get(name, "default") for name in ("base_url", "model",
                                                                       "api_key")}
        self.log(f"{self.npc_name}: first LLM request of this server process: endpoint "
                 f"{endpoint} (from {where['base_url']}), model {self.model} (from "
                 f"{where['model']}), key {signature[2]} (from {where['api_key']})")

    def _refuse(self, reason):
        if not self._refusal_logged:
            self._refusal_logged = True
            self.log(f"{self.npc_name}: LLM call refused: {reason}")
        return defer.fail(LLMUnavailable(reason))

    def _build_request(self, messages, tools, params):
        request = {
            "model": params.pop("model", None) or self.model,
            "messages": list(messages),
        }
        for key in ("temperature", "max_tokens"):
            value = params.pop(key, self.config.get(key))
            if value is not None:
                request[key] = value
        if tools:
            request["tools"] = list(tools)
        extra_body = dict(self.config.get("extra") or {})
        for key, value in params.items():
            if key in _SDK_PARAMS:
                request[key] = value
            else:
                extra_body[key] = value
        if extra_body:
            request["extra_body"] = extra_body
        return request

    @defer.inlineCallbacks
    def _call_with_retries(self, request, deadline=None):
        attempt = 0
        while True:
            try:
                reply = yield self.global_semaphore.run(self._attempt, request, deadline)
                return reply
            except Exception as exc:
                failure = classify_failure(exc)
            if not failure.retryable or attempt >= self.max_retries:
                raise failure
            delay = failure.retry_after
            if delay is None:
                ceiling = min(self.backoff_max, self.backoff_base * (2**attempt))
                delay = self._rng.uniform(0, ceiling)
            if deadline is not None and self.clock.seconds() + delay >= deadline:
                raise failure  # no time left for another attempt
            attempt += 1
            yield task.deferLater(self.clock, delay, lambda: None)

    def _attempt(self, request, deadline):
        """One HTTP attempt (its slot taken), its timeout cut to the time the deadline leaves."""
        if deadline is not None:
            left = deadline - self.clock.seconds()
            if left <= 0:
                return defer.fail(AttemptFailed(LLMTimeout("the reply deadline passed")))
            request = {**request, "timeout": min(self.timeout, left)}
        return self._run(self._blocking_call, request)

    def _blocking_call(self, request):
        """Runs in a worker thread: the HTTP call and parsing. No state is touched here."""
        started = time.monotonic()
        completion = self.sdk.chat.completions.create(**request)
        reply = parse_completion(completion, request)
        reply.latency = time.monotonic() - started
        return reply

    def _call_succeeded(self, reply, purpose):
        self.breaker.record_success()
        self._refusal_logged = False
        self._record_success(reply, purpose)
        return reply

    def _call_failed(self, failure, purpose):
        attempt = failure.value if isinstance(failure.value, AttemptFailed) else None
        if attempt is None:
            attempt = classify_failure(failure.value)
        error = attempt.error
        if attempt.unhealthy:
            if self.breaker.record_failure(self.clock.seconds()):
                self.log(
                    f"{self.npc_name}: LLM circuit breaker opened for "
                    f"{self.base_url or 'the default endpoint'} "
                    f"({self.breaker.failures} consecutive failures)"
                )
        else:
            self.breaker.release_trial()
        engaged = self._record_failure(error, purpose)
        self.log(f"{self.npc_name}: LLM call ({purpose}) failed: {type(error).__name__}: {error}")
        if engaged:
            self.log(
                f"{self.npc_name}: LLM emergency stop engaged after "
                f"{self.max_consecutive_errors} consecutive errors"
            )
        raise error


def parse_completion(completion, request=None):
    """
    Turn an SDK chat completion into an `LLMReply`.

    Args:
        completion: What `chat.completions.create` returned (a `ChatCompletion`, or a plain
            string when the endpoint sent a non-JSON body).
        request (dict, optional): The request, to count prompt tokens when usage is missing.

    Raises:
        LLMBadResponse: When it is not a usable completion.
    """
    choices = getattr(completion, "choices", None)
    if not choices:
        snippet = str(completion)[:80] if isinstance(completion, str) else "no choices"
        raise LLMBadResponse(f"not a chat completion ({snippet!r})")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise LLMBadResponse("completion has no message")
    tool_calls = []
    for call in getattr(message, "tool_calls", None) or ():
        function = getattr(call, "function", None)
        if function is None or not getattr(function, "name", None):
            continue
        tool_calls.append(
            ToolCall(
                name=function.name,
                arguments=function.arguments or "{}",
                id=getattr(call, "id", "") or "",
            )
        )
    content = getattr(message, "content", None)
    usage = getattr(completion, "usage", None)
    prompt_tokens = getattr(usage, "prompt_tokens", None) if usage else None
    completion_tokens = getattr(usage, "completion_tokens", None) if usage else None
    if prompt_tokens is None:
        prompt_tokens = tokens.count_message_tokens((request or {}).get("messages", []))
    if completion_tokens is None:
        completion_tokens = tokens.count_tokens(content) + sum(
            tokens.count_tokens(call.name) + tokens.count_tokens(call.arguments)
            for call in tool_calls
        )
    return LLMReply(
        content=content,
        tool_calls=tool_calls,
        prompt_tokens=int(prompt_tokens),
        completion_tokens=int(completion_tokens),
        finish_reason=getattr(choices[0], "finish_reason", None),
        model=getattr(completion, "model", None),
    )


# process-wide: the (endpoint, model, key) of every first request already logged, so each is
# logged once per server start
_announced = set()


def forget_announcements():
    """Log the next first request again (tests; a new server process starts empty anyway)."""
    _announced.clear()


# ----------------------------------------------------------------------------------------------
# Helpers


def make_llm_client(config, **kwargs):
    """
    Build the client for an `llm` settings subtree, or None for mechanical mode.

    Args:
        config (Mapping): The `llm` subtree.
        **kwargs: Passed to `LLMClient` (npc_key, npc_name, state, log, runner...).

    Returns:
        LLMClient or None: None when neither `base_url` nor `api_key` is configured.
    """
    if not config or not (config.get("base_url") or config.get("api_key")):
        return None
    return LLMClient(config, **kwargs)


def complete_text(llm, prompt, *, system=None, purpose="text", **params):
    """
    One-shot text completion.

    Args:
        llm (LLMPort): The client.
        prompt (str): The user message.
        system (str, optional): A system message.
        purpose (str): For accounting.

    Returns:
        Deferred[str]: The reply text, stripped; errbacks with `LLMBadResponse` if empty.
    """
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})

    def _text(reply):
        text = (reply.content or "").strip()
        if not text:
            raise LLMBadResponse("the model returned no text")
        return text

    return llm.complete(messages, purpose=purpose, **params).addCallback(_text)
