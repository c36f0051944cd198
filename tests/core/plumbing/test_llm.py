"""
The LLM client against the scripted OpenAI-compatible server, through the real `openai` SDK.

The blocking SDK call runs through `sync_runner` (in the test's thread; the server answers from
its own), and backoff waits run on a `task.Clock` that `drive` advances, so no reactor runs.
"""

import logging
import time
import uuid

import pytest
from scripted_llm import Reply, drive, sync_runner
from twisted.internet import defer, task

from ai_assistant.plumbing import llm as llm_module
from ai_assistant.plumbing import tokens
from ai_assistant.plumbing.llm import (
    LLMClient,
    LLMRequestError,
    complete_text,
    make_llm_client,
    mask_secret,
)
from ai_assistant.plumbing.ports import LLMBadResponse, LLMTimeout, LLMUnavailable, MemoryState
from ai_assistant.plumbing.replies import parse_json_reply

MESSAGES = [{"role": "user", "content": "Hello there"}]


class Log(list):
    def __call__(self, message):
        self.append(message)


@pytest.fixture
def clock():
    return task.Clock()


@pytest.fixture
def make_client(llm_config, clock):
    def factory(state=None, log=None, **overrides):
        config = {**llm_config, **overrides}
        return LLMClient(
            config,
            npc_key=f"npc-{uuid.uuid4().hex}",
            npc_name="Ada",
            state=state if state is not None else MemoryState(),
            log=log if log is not None else Log(),
            runner=sync_runner,
            clock=clock,
        )

    return factory


def call(client, clock, messages=MESSAGES, **kwargs):
    return drive(client.complete(messages, **kwargs), clock)


def test_text_reply_and_token_accounting(llm_server, make_client, clock):
    state = MemoryState()
    client = make_client(state=state)
    llm_server.script(
        Reply.text("Hi!", usage=(40, 7)), Reply.tool("say", {"message": "yo"}, usage=(60, 9))
    )

    reply = call(client, clock, purpose="chat", temperature=0.1)
    assert reply.content == "Hi!"
    assert (reply.prompt_tokens, reply.completion_tokens) == (40, 7)
    request = llm_server.requests[0]
    assert request["model"] == "scripted"
    assert request["messages"] == MESSAGES
    assert request["temperature"] == 0.1
    assert llm_server.headers[0]["authorization"] == "Bearer test-key"

    call(client, clock, purpose="reflection")
    stats = state.data["llm_stats"]
    assert stats["calls"] == 2 and stats["failures"] == 0
    assert (stats["prompt_tokens"], stats["completion_tokens"]) == (100, 16)
    assert stats["by_purpose"] == {
        "chat": {"calls": 1, "prompt_tokens": 40, "completion_tokens": 7},
        "reflection": {"calls": 1, "prompt_tokens": 60, "completion_tokens": 9},
    }


def test_native_tool_calls_are_parsed(llm_server, make_client, clock):
    llm_server.script(
        Reply.tools(("inspect_location", {}), ("say", {"message": "hi", "reasoning": "greet"}))
    )
    tools = [{"type": "function", "function": {"name": "say", "parameters": {}}}]
    reply = call(make_client(), clock, tools=tools)
    assert [c.name for c in reply.tool_calls] == ["inspect_location", "say"]
    assert reply.tool_calls[1].arguments == '{"message": "hi", "reasoning": "greet"}'
    assert reply.tool_calls[0].id.startswith("call_")
    assert llm_server.requests[0]["tools"] == tools
    assert reply.finish_reason == "tool_calls"


def test_usage_missing_is_counted_locally(llm_server, make_client, clock):
    llm_server.script(Reply.text("Four score and seven", usage=None))
    reply = call(make_client(), clock)
    assert reply.completion_tokens == tokens.count_tokens("Four score and seven") == 4
    assert reply.prompt_tokens == tokens.count_message_tokens(MESSAGES) > 0


def test_assistants_on_one_endpoint_share_one_sdk_client_and_keep_their_own_stats(
        llm_server, make_client, clock):
    ada_state, bea_state = MemoryState(), MemoryState()
    ada, bea = make_client(state=ada_state), make_client(state=bea_state)
    slower = make_client(timeout=99.0)
    # one connection pool and certificate store for the endpoint, not one per assistant
    assert ada.sdk is bea.sdk and slower.sdk is not ada.sdk
    llm_server.script(Reply.text("Hi Ada.", usage=(10, 3)), Reply.text("Hi Bea.", usage=(20, 4)))
    assert call(ada, clock, purpose="chat").content == "Hi Ada."
    assert call(bea, clock, purpose="chat").content == "Hi Bea."
    assert ada.stats()["prompt_tokens"] == 10 and bea.stats()["prompt_tokens"] == 20
    assert ada.stats()["calls"] == bea.stats()["calls"] == 1


def test_retries_429_then_500_then_success_honouring_retry_after(llm_server, make_client, clock):
    llm_server.script(Reply.error(429, retry_after=2), Reply.error(500), Reply.text("at last"))
    client = make_client(backoff_base=0.5, backoff_max=0.5)
    deferred = client.complete(MESSAGES)

    # the 429 came back at once; the retry waits exactly Retry-After, on the reactor clock
    assert len(llm_server.requests) == 1
    (wait,) = clock.getDelayedCalls()
    assert wait.getTime() == pytest.approx(2.0)
    clock.advance(1.9)
    assert len(llm_server.requests) == 1
    clock.advance(0.1)
    # the 500 has no Retry-After: full jitter within the backoff ceiling
    assert len(llm_server.requests) == 2
    (wait,) = clock.getDelayedCalls()
    assert 0 <= wait.getTime() - clock.seconds() <= 0.5

    reply = drive(deferred, clock)
    assert reply.content == "at last"
    assert len(llm_server.requests) == 3
    stats = client.stats()
    assert stats["calls"] == 1 and stats["failures"] == 0 and stats["consecutive_errors"] == 0
    # when it was last active (the warm-up at a start warms the most recent first)
    assert time.time() - 60 < stats["last_call_at"] <= time.time()


def test_other_4xx_are_not_retried(llm_server, make_client, clock):
    log = Log()
    llm_server.script(Reply.error(400, message="bad model"), Reply.text("never"))
    with pytest.raises(LLMRequestError) as info:
        call(make_client(log=log), clock)
    assert info.value.status_code == 400
    assert "bad model" in str(info.value)
    assert len(llm_server.requests) == 1
    failures = [line for line in log if "failed" in line]
    assert len(failures) == 1 and "Ada" in failures[0] and "HTTP 400" in failures[0]


def test_retries_exhausted_fail_once_and_are_logged_once(llm_server, make_client, clock):
    log = Log()
    state = MemoryState()
    llm_server.script(*[Reply.error(503) for _ in range(3)])
    with pytest.raises(LLMRequestError):
        call(make_client(state=state, log=log, max_retries=2), clock)
    assert len(llm_server.requests) == 3
    assert [line for line in log if "failed" in line] == [
        "Ada: LLM call (chat) failed: LLMRequestError: HTTP 503: scripted error 503"
    ]
    stats = state.data["llm_stats"]
    assert (stats["calls"], stats["failures"], stats["consecutive_errors"]) == (1, 1, 1)
    assert "503" in stats["last_error"]


def test_timeout_becomes_llm_timeout(llm_server, make_client, clock):
    llm_server.script(Reply.text("too late").after(1.0))
    with pytest.raises(LLMTimeout):
        call(make_client(timeout=0.2, max_retries=0), clock)


def test_garbage_and_missing_choices_are_bad_responses(llm_server, make_client, clock):
    client = make_client(max_retries=0)
    llm_server.script(
        Reply.garbage(),
        Reply.no_choices(),
        Reply.garbage(b"{half a json", content_type="application/json"),
    )
    for _ in range(3):
        with pytest.raises(LLMBadResponse):
            call(client, clock)
    assert client.stats()["failures"] == 3


def test_circuit_breaker_opens_fails_fast_and_recovers_half_open(llm_server, make_client, clock):
    log = Log()
    options = dict(max_retries=0, breaker_threshold=2, breaker_cooldown=10)
    client = make_client(log=log, **options)
    llm_server.script(Reply.error(500), Reply.error(500))
    for _ in range(2):
        with pytest.raises(LLMRequestError):
            call(client, clock)
    assert any("circuit breaker opened" in line for line in log)

    # open: no request leaves, for this NPC or any other on the same endpoint
    other = make_client(**options)
    for each in (client, other):
        with pytest.raises(LLMUnavailable, match="circuit breaker open"):
            call(each, clock)
    assert len(llm_server.requests) == 2

    # after the cooldown one trial goes through; it fails, so the breaker re-opens
    clock.advance(10)
    llm_server.script(Reply.error(500))
    with pytest.raises(LLMRequestError):
        call(client, clock)
    with pytest.raises(LLMUnavailable):
        call(client, clock)
    assert len(llm_server.requests) == 3

    # next cooldown: the trial succeeds and closes it for everyone
    clock.advance(10)
    llm_server.script(Reply.text("back"), Reply.text("again"))
    assert call(other, clock).content == "back"
    assert call(client, clock).content == "again"
    assert client.breaker.state == "closed"


def test_half_open_lets_only_one_trial_through(llm_server, make_client, clock):
    client = make_client(max_retries=0, breaker_threshold=1, breaker_cooldown=5)
    llm_server.script(Reply.error(500))
    with pytest.raises(LLMRequestError):
        call(client, clock)
    clock.advance(5)
    held = []

    def holding_runner(func, *args):
        held.append(defer.Deferred())
        return held[-1]

    client._runner = holding_runner
    first = client.complete(MESSAGES)
    second = client.complete(MESSAGES)
    assert len(held) == 1  # the trial is in flight
    errors = []
    second.addErrback(errors.append)
    assert errors and errors[0].check(LLMUnavailable)
    held[0].callback(llm_module.LLMReply(content="ok"))
    assert drive(first, clock).content == "ok"
    assert client.breaker.state == "closed"


def test_emergency_stop_after_five_errors_survives_reload_and_clears(
    llm_server, make_client, clock
):
    state = MemoryState()
    log = Log()
    options = dict(max_retries=0, breaker_threshold=100, max_consecutive_errors=5)
    client = make_client(state=state, log=log, **options)
    llm_server.script(*[Reply.error(500) for _ in range(5)])
    for _ in range(5):
        with pytest.raises(LLMRequestError):
            call(client, clock)
    assert state.data["llm_stats"]["emergency_stop"] is True
    assert any("emergency stop engaged" in line for line in log)

    # a new client on the same state (a server reload) is stopped too, and sends nothing
    reloaded = make_client(state=state, **options)
    with pytest.raises(LLMUnavailable, match="emergency stop"):
        call(reloaded, clock)
    assert len(llm_server.requests) == 5

    reloaded.clear_emergency_stop()
    assert state.data["llm_stats"]["emergency_stop"] is False
    assert state.data["llm_stats"]["consecutive_errors"] == 0
    llm_server.script(Reply.text("I'm back"))
    assert call(reloaded, clock).content == "I'm back"


def test_success_resets_consecutive_errors(llm_server, make_client, clock):
    client = make_client(max_retries=0, breaker_threshold=100)
    llm_server.script(Reply.error(500), Reply.error(500), Reply.text("fine"))
    for _ in range(2):
        with pytest.raises(LLMRequestError):
            call(client, clock)
    assert client.stats()["consecutive_errors"] == 2
    call(client, clock)
    assert client.stats()["consecutive_errors"] == 0
    assert client.stats()["emergency_stop"] is False


def test_per_npc_and_global_concurrency_caps(llm_config, clock):
    held = []

    def holding_runner(func, *args):
        held.append(defer.Deferred())
        return held[-1]

    def client(key):
        return LLMClient(llm_config, npc_key=key, runner=holding_runner, clock=clock)

    npc = client(f"npc-{uuid.uuid4().hex}")
    first, second = npc.complete(MESSAGES), npc.complete(MESSAGES)
    assert len(held) == 1  # per-NPC cap of 1: the second call waits
    held[0].callback(llm_module.LLMReply(content="one"))
    assert drive(first, clock).content == "one"
    assert len(held) == 2
    held[1].callback(llm_module.LLMReply(content="two"))
    assert drive(second, clock).content == "two"

    held.clear()
    limit = npc.global_semaphore.limit
    others = [client(f"npc-{uuid.uuid4().hex}").complete(MESSAGES) for _ in range(limit + 2)]
    assert len(held) == limit  # the global cap holds the rest back
    for index in range(limit + 2):
        held[index].callback(llm_module.LLMReply(content=str(index)))
    assert [drive(d, clock).content for d in others] == [str(i) for i in range(limit + 2)]


def test_make_llm_client_mechanical_mode_and_masking():
    assert make_llm_client({"base_url": None, "api_key": None, "model": "x"}) is None
    assert make_llm_client({}) is None
    local = make_llm_client({"base_url": "http://127.0.0.1:1/v1"}, npc_name="Ada")
    assert isinstance(local, LLMClient)
    secret = "sk-proj-0123456789abcdefWXYZ"
    keyed = make_llm_client({"api_key": secret}, npc_name="Ada")
    assert secret not in repr(keyed) and "sk-...WXYZ" in repr(keyed)
    assert mask_secret(secret) == "sk-...WXYZ"
    assert mask_secret("short") == "****"
    assert mask_secret(None) == "(not set)"
    for key in (secret, "abcdefghijklmnop", "x" * 12):
        assert key not in mask_secret(key)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"tool": "say"}', {"tool": "say"}),
        ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        ('Sure! Here it is:\n{"a": {"b": "}"}}\nHope that helps.', {"a": {"b": "}"}}),
        ('Questions: ["why?", "how?"] done', ["why?", "how?"]),
        ("```\n[1, 2]\n```", [1, 2]),
    ],
)
def test_parse_json_reply_finds_json(text, expected):
    assert parse_json_reply(text) == expected


def test_parse_json_reply_rejects_prose():
    for text in ("", "no json here", "{broken", "[1, 2"):
        with pytest.raises(LLMBadResponse):
            parse_json_reply(text)
    with pytest.raises(LLMBadResponse):
        parse_json_reply("[1, 2]", expect=dict)


def test_complete_text(llm_server, make_client, clock):
    llm_server.script(Reply.text("  A summary.  "), Reply.text(""))
    client = make_client()
    text = drive(complete_text(client, "Summarise", system="Be brief", purpose="summary"), clock)
    assert text == "A summary."
    assert [m["role"] for m in llm_server.requests[0]["messages"]] == ["system", "user"]
    assert client.stats()["by_purpose"]["summary"]["calls"] == 1
    with pytest.raises(LLMBadResponse):
        drive(complete_text(client, "Again"), clock)


def test_token_counting_and_fallback(monkeypatch, caplog):
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("") == 0
    assert tokens.estimate_tokens_fallback("abcde") == 2
    with_tool_call = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "say", "arguments": '{"message": "hi"}'}}],
        }
    ]
    assert tokens.count_message_tokens(with_tool_call) > tokens.count_message_tokens(
        [{"role": "assistant", "content": None}]
    )

    import tiktoken

    def broken(name):
        raise ValueError(f"no encoding {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", broken)
    monkeypatch.setattr(tokens, "_encoding", None)
    monkeypatch.setattr(tokens, "_load_failed", False)
    with caplog.at_level(logging.WARNING, logger=tokens.__name__):
        assert tokens.count_tokens("a" * 9) == 3
        assert tokens.count_tokens("b" * 4) == 1
    assert len([r for r in caplog.records if "estimating" in r.getMessage()]) == 1


def test_default_runner_uses_the_thread_pool_and_never_blocks(llm_server, llm_config):
    """
    The one test on the real pool: the reactor is pumped with `iterate()` (bounded by a
    deadline) instead of `reactor.run()`, so it cannot hang CI.
    """
    import threading
    import time

    from twisted.internet import reactor

    from ai_assistant.plumbing import threads

    llm_server.default = Reply.text("from a worker").after(0.3)
    client = LLMClient(llm_config, npc_key=f"npc-{uuid.uuid4().hex}", npc_name="Ada")
    callers, blocking_call = [], client._blocking_call

    def recording_call(request):
        callers.append(threading.current_thread())
        return blocking_call(request)

    client._blocking_call = recording_call
    try:
        deferred = client.complete(MESSAGES)
        results = []
        deferred.addBoth(results.append)
        assert not results  # returned at once: the answer comes through the reactor later
        deadline = time.monotonic() + 10
        while not results and time.monotonic() < deadline:
            reactor.iterate(0.02)
        assert results and results[0].content == "from a worker"
        assert client.stats()["calls"] == 1
        assert callers and callers[0] is not threading.current_thread()
        assert "ai_assistant" in callers[0].name  # our pool, not Twisted's shared one
    finally:
        threads.stop_pool()


def test_reactor_keeps_turning_while_the_llm_takes_two_seconds(llm_server, llm_config):
    """While a reply takes 2 s, a LoopingCall on the reactor keeps firing every 50 ms."""
    import time

    from twisted.internet import reactor, task

    from ai_assistant.plumbing import threads

    llm_server.default = Reply.text("slow answer").after(2.0)
    client = LLMClient(llm_config, npc_key=f"npc-{uuid.uuid4().hex}", npc_name="Ada")
    beats = []
    heartbeat = task.LoopingCall(lambda: beats.append(time.monotonic()))
    heartbeat.clock = reactor
    try:
        heartbeat.start(0.05, now=True)
        started = time.monotonic()
        results = []
        client.complete(MESSAGES).addBoth(results.append)
        deadline = started + 10
        while not results and time.monotonic() < deadline:
            reactor.iterate(0.01)
        elapsed = time.monotonic() - started
        assert results and results[0].content == "slow answer"
        assert elapsed >= 1.9
        # the reactor was free the whole time: it kept beating, and no gap came near the
        # 2 s a call on the reactor would have held it (a loaded machine may pause it briefly)
        assert len(beats) >= 0.3 * elapsed / 0.05
        gaps = [later - earlier for earlier, later in zip(beats, beats[1:], strict=False)]
        assert max(gaps) < 1.5
    finally:
        heartbeat.stop()
        threads.stop_pool()
