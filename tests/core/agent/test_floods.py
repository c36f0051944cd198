"""
Floods and bounded waits, in the core: one speaker's flood gets a few replies and loses nothing
from the journal; one reply has an overall deadline, and the speaker hears the fallback line
when it passes; a plain HTTP 400 is not taken for "tools unsupported" (told by the error body);
the HTTP client's per-request log lines stay at WARNING unless asked for.
"""

import logging
import time

import pytest
import support
from scripted_llm import FakeWorld, Reply, drive, sync_runner
from twisted.internet import defer, task

from ai_assistant.agent import awake, perception
from ai_assistant.agent.react import run_react_cycle
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.llm_resilience import (
    LLMRequestError,
    http_logger_names,
    says_tools_unsupported,
    with_deadline,
)
from ai_assistant.plumbing.ports import LLMTimeout, MemoryState, iso
from ai_assistant.plumbing.settings import DEFAULTS, deep_merge


@pytest.fixture
def clock():
    return task.Clock()


@pytest.fixture
def make(llm_config, clock):
    def factory(llm=None, **overrides):
        state, log = MemoryState(), support.Log()
        client = llm or LLMClient(deep_merge(DEFAULTS, {"llm": llm_config})["llm"],
                                  npc_key="ada-t", npc_name="Ada", state=state, log=log,
                                  runner=sync_runner, clock=clock)
        world = FakeWorld(present=[{"id": "#2", "name": "Bob", "is_player": True},
                                   {"id": "#3", "name": "Cara", "is_player": True}])
        return support.make_ports({"llm": llm_config}, key="ada-t", state=state, llm=client,
                                  world=world, log=log,
                                  overrides={"react.thinking_delay": 0, **overrides})
    return factory


def hear(ports, text, kind="talk", sender="Bob", sender_id="#2"):
    PerceptionQueue(ports).add(perception.make_event(
        kind=kind, text=text, sender=sender, sender_id=sender_id, time=iso(ports.clock.now()),
        classification=perception.classify(kind, text, names=["Ada"])))


def tick(ports, clock):
    return drive(awake.run_awake_tick(ports, run_cycle=run_react_cycle,
                                      call_later=clock.callLater), clock)


def flood(ports, clock, llm_server, lines=50, seconds=5.0):
    """
    `lines` talks from Bob over `seconds`, each followed by the tick the script would run at
    once (a talk is urgent), then the ticks of the next 15 s: what a flood costs.
    """
    llm_server.default = Reply.tool("say", {"message": "One thing at a time."})
    step = seconds / lines
    for number in range(lines):
        hear(ports, f"question number {number}")
        tick(ports, clock)
        clock.advance(step)
    for _ in range(3):  # the ticker keeps ticking every 5 s
        clock.advance(5.0)
        tick(ports, clock)
    heard = [e for e in Journal(ports).entries() if "question number" in e["content"]]
    return len(ports.world.said), len(llm_server.requests), len(heard)


# --- floods --------------------------------------------------------------------------------------


def test_a_flood_without_a_cooldown_costs_a_reply_and_a_call_per_line(llm_server, make, clock):
    ports = make(**{"perception.speaker_cooldown": 0})
    replies, calls, journaled = flood(ports, clock, llm_server)
    assert (replies, calls, journaled) == (50, 50, 50)


def test_a_flood_gets_a_few_replies_and_loses_nothing(llm_server, make, clock):
    ports = make()
    assert ports.settings.get("perception.speaker_cooldown") == 4.0
    replies, calls, journaled = flood(ports, clock, llm_server)
    assert 2 <= replies <= 4 and calls == replies
    assert journaled == 50  # every line is in the journal, once
    # the held lines came back and were answered together: the last turn saw many of them
    last_prompt = llm_server.requests[-1]["messages"][-1]["content"]
    assert "question number 49" in last_prompt and "question number 45" in last_prompt
    assert not ports.runtime.cache(perception.HELD, dict)


def test_other_speakers_are_not_held_by_one_speakers_cooldown(llm_server, make, clock):
    ports = make()
    llm_server.default = Reply.tool("say", {"message": "Yes?"})
    hear(ports, "first")
    tick(ports, clock)
    hear(ports, "again")
    hear(ports, "me too", sender="Cara", sender_id="#3")
    report = tick(ports, clock)
    assert [c.get("held", False) for c in report["cycles"]] == [True, False]
    assert len(llm_server.requests) == 2
    clock.advance(4.0)  # Bob's cooldown ends: his line is queued again, marked held
    queued = PerceptionQueue(ports).take_all()
    assert [(e["text"], e["held"]) for e in queued] == [("again", True)]


# --- the reply deadline --------------------------------------------------------------------------


def test_a_hanging_cycle_gets_the_fallback_line_at_the_deadline(make, clock):
    ports = make(**{"react.reply_deadline": 30.0})
    hanging = defer.Deferred()
    hear(ports, "hello?")
    done = awake.run_awake_tick(ports, run_cycle=lambda *a, **k: hanging,
                                call_later=clock.callLater)
    clock.advance(29.9)
    assert ports.world.said == []
    clock.advance(0.2)
    fallback = ports.settings.get("react.fallback_line")
    assert ports.world.said == [fallback]
    hanging.callback({"terminal": False, "stopped": "llm_error: timed out"})
    assert done.called and ports.world.said == [fallback]  # told once


@pytest.mark.parametrize("hangs", ["recall", "the model's reply"])
def test_a_turn_that_never_ends_is_abandoned_and_the_assistant_takes_its_next_line(
        make, clock, monkeypatch, hangs):
    """Before, a recall or a cycle that never fired held the assistant's tick for good."""
    ports = make(**{"react.reply_deadline": 30.0})
    never = defer.Deferred()
    recalled = never if hangs == "recall" else defer.succeed([])
    monkeypatch.setattr(awake, "_relevant_memories", lambda *a: recalled)
    cycles = []

    def run_cycle(cycle_ports, situation, cache=None):
        cycles.append(cycle_ports)
        return never if hangs == "the model's reply" else defer.succeed({"terminal": True})

    hear(ports, "hello?")
    done = awake.run_awake_tick(ports, run_cycle=run_cycle, call_later=clock.callLater)
    clock.advance(59.0)
    fallback = ports.settings.get("react.fallback_line")
    assert not done.called and ports.world.said == [fallback]  # told at the deadline
    clock.advance(1.5)
    report = support.result_of(done)
    assert report["answered"] == 1 and report["cycles"][0]["abandoned"] == hangs
    assert any(f"could not answer Bob: abandoned after 60 s, still waiting on {hangs}" in line
               for line in ports.log)
    # what the abandoned turn would still do says nothing: its world is closed
    if cycles:
        cycles[0].world.say("finally, an answer")
    never.callback({"terminal": True} if hangs == "the model's reply" else ["a memory"])
    assert ports.world.said == [fallback]
    # and the next line gets a turn of its own
    monkeypatch.setattr(awake, "_relevant_memories", lambda *a: defer.succeed([]))
    clock.advance(5.0)  # past the speaker's cooldown
    PerceptionQueue(ports).take_all()
    hear(ports, "are you there?")
    again = awake.run_awake_tick(ports, run_cycle=lambda *a, **k: defer.succeed(
        {"terminal": True}), call_later=clock.callLater)
    assert support.result_of(again)["cycles"][0]["terminal"] is True


class RealTimeClock(task.Clock):
    """Real seconds (the HTTP timeouts are real), plus what `advance` skips (backoff waits)."""

    def __init__(self):
        super().__init__()
        self._start = time.monotonic()

    def seconds(self):
        return time.monotonic() - self._start + self.rightNow


def test_one_deadline_bounds_every_retry_of_a_hanging_endpoint(llm_server, llm_config):
    """The wait a hanging endpoint costs, before (no deadline) and after (a 1.5 s deadline)."""
    config = deep_merge(DEFAULTS, {"llm": {**llm_config, "timeout": 1.0, "max_retries": 3}})
    llm_server.default = Reply.text("too late").after(3.0)
    clock = RealTimeClock()

    def timed(**kwargs):
        client = LLMClient(config["llm"], runner=sync_runner, clock=clock)
        started = time.monotonic()
        failure = []
        deferred = client.complete([{"role": "user", "content": "hi"}], **kwargs)
        deferred.addErrback(failure.append)
        drive_clock(clock, failure, step=0.01)  # backoff waits: skipped
        return time.monotonic() - started, failure[0].value

    before, error = timed()
    assert isinstance(error, LLMTimeout) and before >= 3.9  # 4 attempts x 1 s
    after, error = timed(deadline=clock.seconds() + 1.5)
    assert isinstance(error, LLMTimeout) and after < 2.5  # one attempt, cut to the deadline


def test_a_call_past_its_deadline_is_not_made(llm_server, llm_config, clock):
    client = LLMClient(deep_merge(DEFAULTS, {"llm": llm_config})["llm"], runner=sync_runner,
                       clock=clock)
    llm = with_deadline(client, 10.0)
    clock.advance(11.0)
    failures = []
    llm.complete([{"role": "user", "content": "hi"}]).addErrback(failures.append)
    assert isinstance(failures[0].value, LLMTimeout) and llm_server.requests == []
    # a port that takes no deadline is called as it is
    assert with_deadline(None, 5) is None

    class Plain:
        def complete(self, messages, **kwargs):
            return defer.succeed(kwargs)

    assert support.result_of(with_deadline(Plain(), 5).complete([])) == {}


# --- "tools unsupported" is told by the body -----------------------------------------------------

# What real servers answer when they cannot take `tools` (see llm_resilience._TOOLS_UNSUPPORTED).
TOOLS_UNSUPPORTED_BODIES = [
    (400, "registry.ollama.ai/library/gemma3:4b does not support tools"),
    (400, "tools is not supported in this model. For a list of supported models, refer to "
          "https://platform.openai.com/docs/guides/function-calling"),
    (404, "Unrecognized request argument supplied: tools"),
    (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be '
          "set"),
    (500, "tools param requires --jinja flag"),
    (500, "Unsupported param: tools"),
]
OTHER_400_BODIES = [
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens",
    "Invalid schema for function 'say': 'message' is not of type 'object'",
    "Additional properties are not allowed ('foo' was unexpected)",
    "scripted error 400",
]


@pytest.mark.parametrize("status, body", TOOLS_UNSUPPORTED_BODIES)
def test_real_servers_tools_refusals_are_recognised_and_not_retried(
        llm_server, llm_config, clock, status, body):
    assert says_tools_unsupported(body)
    client = LLMClient(deep_merge(DEFAULTS, {"llm": llm_config})["llm"], runner=sync_runner,
                       clock=clock)
    llm_server.script(Reply.error(status, message=body), Reply.text("never"))
    failures = []
    client.complete([{"role": "user", "content": "hi"}], tools=[]).addErrback(failures.append)
    drive_clock(clock, failures)
    error = failures[0].value
    assert isinstance(error, LLMRequestError) and error.tools_unsupported
    assert len(llm_server.requests) == 1  # a 500 that says so is not retried either
    assert not client.breaker.failures  # and says nothing about the endpoint's health


@pytest.mark.parametrize("body", OTHER_400_BODIES)
def test_other_400s_are_plain_refusals(llm_server, llm_config, clock, body):
    assert not says_tools_unsupported(body)
    client = LLMClient(deep_merge(DEFAULTS, {"llm": llm_config})["llm"], runner=sync_runner,
                       clock=clock)
    llm_server.script(Reply.error(400, message=body))
    failures = []
    client.complete([{"role": "user", "content": "hi"}]).addErrback(failures.append)
    error = failures[0].value
    assert isinstance(error, LLMRequestError) and not error.tools_unsupported
    assert error.status_code == 400 and len(llm_server.requests) == 1


def test_a_plain_400_in_a_turn_neither_doubles_the_call_nor_switches_protocol(
        llm_server, make, clock):
    ports = make()
    llm_server.script(Reply.error(400, message=OTHER_400_BODIES[0]))
    hear(ports, "hello")
    tick(ports, clock)
    assert len(llm_server.requests) == 1 and "tools" in llm_server.requests[0]
    assert not ports.runtime.native_tools_rejected
    assert ports.world.said == [ports.settings.get("react.fallback_line")]


def drive_clock(clock, results, limit=1000, step=1.0):
    for _ in range(limit):
        if results:
            return
        clock.advance(step)


# --- HTTP client logs ----------------------------------------------------------------------------


def test_http_client_logs_stay_at_warning_unless_asked(llm_server, llm_config, clock):
    for name in http_logger_names():
        logging.getLogger(name).setLevel(logging.NOTSET)
    config = deep_merge(DEFAULTS, {"llm": llm_config})["llm"]
    llm_server.script(Reply.text("hi"), Reply.text("hi"))
    client = LLMClient(config, runner=sync_runner, clock=clock)
    support.result_of(client.complete([{"role": "user", "content": "hi"}]))
    assert {logging.getLogger(name).level for name in http_logger_names()} == {logging.WARNING}
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    debugging = LLMClient({**config, "log_requests": True}, runner=sync_runner, clock=clock)
    support.result_of(debugging.complete([{"role": "user", "content": "hi"}]))
    assert logging.getLogger("httpx").isEnabledFor(logging.INFO)
    logging.getLogger("httpx").setLevel(logging.WARNING)
