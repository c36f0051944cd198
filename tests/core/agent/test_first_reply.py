"""
A first reply as fast as a warm one (issue 34): what a reply needs is made ready in the
background (`agent.warmup`), and the "thinking" emote counts from when the line was heard.
"""

import json
import os
import sys
import time

import pytest
import support
from scripted_llm import FakeWorld, sync_runner
from twisted.internet import defer, task

from ai_assistant.agent import awake, perception, warmup
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing import tokens
from ai_assistant.plumbing.llm import LLMClient, LLMStats
from ai_assistant.plumbing.ports import iso

pytest_plugins = ["scripted_llm"]


class ListingStore:
    """A long-term store that only lists (what the mirror reads at the first recall); like the
    game's, it is open once first used."""

    def __init__(self):
        self.listed = 0
        self.is_open = False

    def list(self, *, limit=100, filters=None):
        self.listed += 1
        self.is_open = True
        return defer.succeed([{"id": "m1", "memory": "Bob keeps the lighthouse.",
                               "metadata": {}, "created_at": "2025-01-01T10:00:00Z"}])


def heard(ports, text, seconds_ago=0.0):
    event = perception.make_event(kind="talk", text=text, sender="Bob", sender_id="#2",
                                  classification="direct_message",
                                  time=iso(ports.clock.now()))
    event["heard_at"] = ports.clock.now().timestamp() - seconds_ago
    return event


def test_the_warm_up_opens_the_client_the_store_and_the_models(llm_config):
    store = ListingStore()
    llm = LLMClient(llm_config, runner=sync_runner, clock=task.Clock())
    ports = support.make_ports(llm=llm, semantic=store)
    Journal(ports).add("Bob said the lighthouse lamp is out.", source_type="direct",
                      source_entity="Bob")
    assert llm._sdk is None
    done = support.result_of(warmup.warm_up(ports, cpu_runner=sync_runner,
                                            io_runner=sync_runner))
    assert done == {"models": True, "client": True, "recall": True}
    assert llm._sdk is not None and tokens._encoding is not None
    assert store.listed == 1
    # the next recall (the first real reply's) finds the store read already
    support.result_of(warmup.warm_up(ports, cpu_runner=sync_runner, io_runner=sync_runner))
    assert store.listed == 1


def test_a_mechanical_assistant_warms_nothing():
    store = ListingStore()
    ports = support.make_ports(semantic=store)
    assert support.result_of(warmup.warm_up(ports)) == {
        "models": False, "client": False, "recall": False}
    assert store.listed == 0


def gated_warm_ups(monkeypatch):
    """Each warm-up started is recorded by name and lasts until its gate (a Deferred) fires."""
    started, gates = [], []

    def slow_warm_up(ports):
        started.append(ports.name)
        gates.append(defer.Deferred())
        return gates[-1]

    monkeypatch.setattr(warmup, "warm_up", slow_warm_up)
    return started, gates


def test_warm_ups_run_one_assistant_at_a_time(monkeypatch):
    started, gates = gated_warm_ups(monkeypatch)
    first = warmup.warm_up_in_turn(support.make_ports(name="Ada"))
    second = warmup.warm_up_in_turn(support.make_ports(name="Bea"))
    assert started == ["Ada"]
    gates[0].callback({"recall": True})
    assert started == ["Ada", "Bea"] and first.called and not second.called
    gates[1].callback({"recall": True})
    assert second.called and not warmup._busy and not warmup._queue


def test_a_start_warms_only_the_resident_bound_most_recently_active_first(monkeypatch):
    """Beyond `memory.resident_assistants`, a warm-up would only push the ones warmed before
    out of memory: the rest are answered at once, and warm on first use."""
    log = support.Log()
    started, gates = gated_warm_ups(monkeypatch)

    def assistant(name, last_call_at, thinking=True):
        ports = support.make_ports(name=name, log=log,
                                   settings={"memory": {"resident_assistants": 3}})
        ports.llm = object() if thinking else None
        stats = LLMStats(ports.state)
        stats.save(dict(stats.read(), last_call_at=last_call_at))
        return ports

    asked = [("Ada", 50.0), ("Bea", 10.0), ("Cid", 90.0), ("Dan", None), ("Eve", 70.0)]
    waiters = [warmup.warm_up_in_turn(assistant(name, when)) for name, when in asked]
    # a mechanical assistant warms nothing, so it takes none of the bound's places
    waiters.append(warmup.warm_up_in_turn(assistant("Max", 95.0, thinking=False)))
    for _ in range(4):
        gates[-1].callback({"recall": True})
    # the first asked starts at once; then the most recently active, up to the bound
    assert started == ["Ada", "Max", "Cid", "Eve"]
    assert [waiter.called for waiter in waiters] == [True] * 6
    assert support.result_of(waiters[1]) == {"models": False, "client": False, "recall": False}
    assert "2 assistants warm on first use" in log.text()
    assert not warmup._queue and not warmup._busy and not warmup._warmed_in_batch
    # a later start counts afresh
    warmup.warm_up_in_turn(assistant("Fay", None))
    assert started[-1] == "Fay"
    gates[-1].callback({"recall": True})


def test_once_the_starts_warm_ups_are_over_what_is_held_is_frozen_once(monkeypatch):
    from ai_assistant.plumbing import threads

    log, frozen = support.Log(), []
    monkeypatch.setattr(warmup, "_settled", [])
    monkeypatch.setattr(threads, "freeze_held_objects",
                        lambda settings: frozen.append(settings.get("threads.gc_freeze")) or 1234)
    started, gates = gated_warm_ups(monkeypatch)
    game = {"threads": {"gc_freeze": True}}
    for name in ("Ada", "Bea"):
        warmup.warm_up_in_turn(support.make_ports(name=name, log=log, settings=game))
    gates[0].callback({"recall": True})
    assert frozen == []  # Bea's warm-up is still under way: the start has not settled
    gates[1].callback({"recall": True})
    assert frozen == [True]
    assert "1234 objects left out of the garbage collector's full passes" in log.text()
    # an assistant made later warms alone: nothing more is frozen
    warmup.warm_up_in_turn(support.make_ports(name="Cid", log=log, settings=game))
    gates[2].callback({"recall": True})
    assert frozen == [True] and started == ["Ada", "Bea", "Cid"]


@pytest.fixture
def no_reply_in_flight(monkeypatch):
    from ai_assistant.plumbing import reply_priority

    monkeypatch.setattr(reply_priority, "_in_flight", [0])
    monkeypatch.setattr(reply_priority, "_held", [])
    monkeypatch.setattr(reply_priority, "_last_activity", [None])
    return reply_priority


def test_no_warm_up_starts_while_a_reply_is_in_flight(monkeypatch, no_reply_in_flight):
    """A player who talks just after a reload: the assistants' warm-ups queued then wait for
    the reply instead of computing beside it."""
    started, gates = gated_warm_ups(monkeypatch)
    monkeypatch.setattr(warmup, "_queue", [])
    monkeypatch.setattr(warmup, "_busy", [])
    no_reply_in_flight.reply_started()
    warmup.warm_up_in_turn(support.make_ports(name="Ada"))
    warmup.warm_up_in_turn(support.make_ports(name="Bea"))
    assert started == []
    no_reply_in_flight.reply_finished()
    assert started == ["Ada"]
    no_reply_in_flight.reply_started()  # Bob talks while Ada warms: Bea waits for his reply
    gates[0].callback({"recall": True})
    assert started == ["Ada"]
    no_reply_in_flight.reply_finished()
    assert started == ["Ada", "Bea"]


def test_a_warm_up_under_way_goes_on_to_its_recall_only_after_the_reply(
        llm_config, no_reply_in_flight):
    """The recall opens the store and reads its memories: the warm-up holds it back while a
    reply is in flight, and does it when the reply is over."""
    store = ListingStore()
    llm = LLMClient(llm_config, runner=sync_runner, clock=task.Clock())
    ports = support.make_ports(llm=llm, semantic=store)
    no_reply_in_flight.reply_started()
    warmed = []
    warmup.warm_up(ports, cpu_runner=sync_runner, io_runner=sync_runner).addCallback(
        warmed.append)
    assert llm._sdk is not None and store.listed == 0 and warmed == []
    no_reply_in_flight.reply_finished()
    assert store.listed == 1
    assert warmed == [{"models": True, "client": True, "recall": True}]


def test_the_warm_up_opens_the_store_only_once_the_start_has_settled(
        llm_config, no_reply_in_flight, monkeypatch):
    """Just after a start (a running reactor): the store's opening waits for a quiet moment,
    and a player's line and reply in that moment push it back; nothing warmed is lost, and a
    recall that needs the store meanwhile (a tool's) opens it itself."""
    import dataclasses

    from ai_assistant.memory.recall.pipeline import RecallQuery, recall

    clock = task.Clock()
    monkeypatch.setattr(no_reply_in_flight, "_clock", [clock])
    monkeypatch.setattr(no_reply_in_flight, "_last_activity", [None])
    store = ListingStore()
    llm = LLMClient(llm_config, runner=sync_runner, clock=task.Clock())
    ports = support.make_ports(llm=llm, semantic=store)
    Journal(ports).add("Bob said the lighthouse lamp is out.", source_type="direct",
                      source_entity="Bob")
    warmed = []
    warmup.warm_up(ports, cpu_runner=sync_runner, io_runner=sync_runner).addCallback(
        warmed.append)
    assert llm._sdk is not None and store.listed == 0  # what a reply needs: at once
    clock.advance(0.5)
    no_reply_in_flight.line_heard()  # Bob talks as soon as the server is back
    no_reply_in_flight.reply_started()
    query = RecallQuery(text="the lighthouse lamp", wait_for_store=False)
    recalled, _ = support.result_of(recall(ports, query))  # the reply: from the journal
    assert [each.item["content"] for each in recalled] == ["Bob said the lighthouse lamp is out."]
    no_reply_in_flight.reply_finished()
    clock.advance(no_reply_in_flight.QUIET_SECONDS - 0.1)
    assert store.listed == 0 and warmed == []
    other = support.make_ports(name="Bea", semantic=ListingStore())  # a tool's recall
    support.result_of(recall(other, dataclasses.replace(query, wait_for_store=True)))
    assert other.semantic.listed == 1
    clock.advance(0.1)
    # the warm-up's recall and the reply's left-over read: one opening, one listing
    assert store.listed == 1
    assert warmed == [{"models": True, "client": True, "recall": True}]
    recalled, _ = support.result_of(recall(ports, query))
    assert "Bob keeps the lighthouse." in [each.item["content"] for each in recalled]


def test_a_reply_does_not_read_the_store_beside_itself_but_right_after(no_reply_in_flight):
    """A reply's recall that does not wait for the store does not start its first read (the
    store's opening) while the reply is in flight; a recall that waits for it reads at once."""
    import dataclasses

    from ai_assistant.memory.recall.pipeline import RecallQuery, recall

    store = ListingStore()
    ports = support.make_ports(semantic=store)
    Journal(ports).add("Bob said the lighthouse lamp is out.", source_type="direct",
                      source_entity="Bob")
    query = RecallQuery(text="the lighthouse lamp", wait_for_store=False)
    no_reply_in_flight.reply_started()
    recalled, _ = support.result_of(recall(ports, query))
    assert store.listed == 0
    assert [each.item["content"] for each in recalled] == ["Bob said the lighthouse lamp is out."]
    no_reply_in_flight.reply_finished()
    assert store.listed == 1
    # the next reply finds the memories read
    no_reply_in_flight.reply_started()
    recalled, _ = support.result_of(recall(ports, query))
    assert "Bob keeps the lighthouse." in [each.item["content"] for each in recalled]
    # a recall that needs the store (a tool's) is never held behind the reply
    other = support.make_ports(name="Bea", semantic=ListingStore())
    support.result_of(recall(other, dataclasses.replace(query, wait_for_store=True)))
    assert other.semantic.listed == 1
    no_reply_in_flight.reply_finished()


@pytest.mark.parametrize("fails", [False, True])
def test_an_answer_is_a_reply_in_flight_until_it_is_over(no_reply_in_flight, fails):
    world = FakeWorld()
    ports = support.make_ports(world=world)
    ports.llm = object()
    seen = []

    def run_cycle(ports_, situation, cache=None):
        seen.append(no_reply_in_flight.replying())
        if fails:
            return defer.fail(RuntimeError("the model fell over"))
        return defer.succeed({"tools": [], "terminal": True})

    PerceptionQueue(ports).add(heard(ports, "Ada, where is the lamp?"))
    tick = awake.run_awake_tick(ports, call_later=task.Clock().callLater, run_cycle=run_cycle)
    tick.addErrback(lambda failure: None)
    assert seen == [True] and not no_reply_in_flight.replying()


@pytest.mark.parametrize("seconds_ago, delay", [(0.0, 2.0), (1.5, 0.5), (5.0, 0.0)])
def test_the_thinking_emote_counts_from_when_the_line_was_heard(seconds_ago, delay):
    clock = task.Clock()
    world = FakeWorld()
    ports = support.make_ports(world=world)
    ports.llm = object()
    recall_done = defer.Deferred()
    ports_recall = []

    def slow_recall(ports_, situation):
        ports_recall.append(situation)
        return recall_done

    original = awake._relevant_memories
    awake._relevant_memories = slow_recall
    try:
        PerceptionQueue(ports).add(heard(ports, "Ada, where is the lamp?", seconds_ago))
        tick = awake.run_awake_tick(
            ports, call_later=clock.callLater,
            run_cycle=lambda p, s, cache=None: defer.succeed({"tools": [], "terminal": True}))
        # recall is still running: the emote is already on its way, counted from hearing
        assert ports_recall and not tick.called
        clock.advance(max(0.0, delay - 0.01))
        assert perception.THINKING_EMOTE not in world.emotes or delay == 0.0
        clock.advance(0.02)
        assert world.emotes == [perception.THINKING_EMOTE]
        recall_done.callback([])
        assert tick.called
    finally:
        awake._relevant_memories = original


def test_a_quick_turn_shows_no_thinking_emote():
    clock = task.Clock()
    world = FakeWorld()
    ports = support.make_ports(world=world, clock=None)
    ports.llm = object()
    PerceptionQueue(ports).add(heard(ports, "Ada, hello"))
    support.result_of(awake.run_awake_tick(
        ports, call_later=clock.callLater,
        run_cycle=lambda p, s, cache=None: defer.succeed({"tools": [], "terminal": True})))
    clock.advance(10)
    assert perception.THINKING_EMOTE not in world.emotes


class OpeningStore:
    """A long-term store still opening: its first listing has not come back yet."""

    def __init__(self):
        self.pending = defer.Deferred()

    def list(self, *, limit=100, filters=None):
        return self.pending


def test_a_reply_does_not_wait_for_a_store_still_opening_but_the_warm_up_does():
    from ai_assistant.agent.blocks.remembered import recall_lines
    from ai_assistant.memory.longterm.mirror import mirror_of

    store = OpeningStore()
    ports = support.make_ports(semantic=store)
    Journal(ports).add("Bob said the lighthouse lamp is out.", source_type="direct",
                      source_entity="Bob")
    situation = {"events": [{"text": "what about the lighthouse lamp?"}],
                 "interlocutor": {"id": "#2"}, "history": []}
    lines = support.result_of(recall_lines(ports, situation))
    assert any("lighthouse lamp is out" in line for line in lines)  # from the journal, now
    ports.llm = object()
    warmed = []
    warmup.warm_up(ports, cpu_runner=sync_runner, io_runner=sync_runner).addCallback(
        warmed.append)
    assert warmed == []  # the warm-up waits for the store's first read
    store.pending.callback([])
    assert warmed == [{"models": True, "client": False, "recall": True}]
    assert mirror_of(ports).loaded


def test_the_process_warm_up_sizes_the_pools_first_and_runs_once(monkeypatch):
    from ai_assistant.plumbing import threads
    from ai_assistant.plumbing.settings import Settings

    calls = []
    monkeypatch.setattr(warmup, "_started", [])
    monkeypatch.setattr(warmup, "_finished", [])
    monkeypatch.setattr(threads, "configure", lambda settings: calls.append("configure"))
    monkeypatch.setattr(threads, "run_blocking",
                        lambda func, *args: calls.append(func.__name__) or defer.succeed(None))
    monkeypatch.setattr(threads, "run_cpu_bound",
                        lambda func, *args: calls.append(func.__name__) or defer.succeed(True))
    assert support.result_of(warmup.warm_up_process(Settings())) is True
    assert calls == ["configure", "_import_client_library", "_load_models"]
    assert warmup.warm_up_process(Settings()) is None and len(calls) == 3


def test_work_a_reply_does_not_need_waits_for_the_process_warm_up(monkeypatch):
    """The long-term store's opening (mostly importing mem0) is held until what a reply needs
    is loaded, so that a first reply right after a start does not compete with it."""
    from twisted.internet import reactor

    from ai_assistant.plumbing import threads
    from ai_assistant.plumbing.settings import Settings

    loading = {"client": defer.Deferred(), "models": defer.Deferred()}
    monkeypatch.setattr(warmup, "_started", [])
    monkeypatch.setattr(warmup, "_finished", [])
    monkeypatch.setattr(warmup, "_held", [])
    monkeypatch.setattr(reactor, "running", True)
    monkeypatch.setattr(threads, "configure", lambda settings: None)
    monkeypatch.setattr(threads, "run_blocking", lambda func, *args: loading["client"])
    monkeypatch.setattr(threads, "run_cpu_bound", lambda func, *args: loading["models"])
    process = warmup.warm_up_process(Settings())
    opened = []
    held = warmup.after_process_warm_up(lambda name: opened.append(name) or name, "store")
    loading["models"].callback(True)
    assert opened == [] and not held.called  # the client library is still loading
    loading["client"].errback(RuntimeError("no client library"))  # a failure releases too
    assert opened == ["store"] and support.result_of(held) == "store"
    assert support.result_of(process) is True
    # once it is over, such work runs at once
    assert support.result_of(warmup.after_process_warm_up(lambda: "now")) == "now"


def test_without_a_running_reactor_nothing_is_held(monkeypatch):
    """A test or a script that imported the shell (its warm-up can never report back)."""
    monkeypatch.setattr(warmup, "_started", [True])
    monkeypatch.setattr(warmup, "_finished", [])
    assert support.result_of(warmup.after_process_warm_up(lambda: "at once")) == "at once"


def test_the_client_library_is_imported_whole_before_openai():
    """openai reads `sys.modules["httpx"]` when it builds a client: a half-imported one (mem0
    importing it in another thread) failed a first reply."""
    import importlib.util
    import sys

    warmup._import_client_library()
    assert "openai" in sys.modules
    if importlib.util.find_spec("httpx") is not None:
        assert hasattr(sys.modules["httpx"], "URL")


def test_the_warm_up_writes_nothing_and_asks_no_model(llm_server, llm_config):
    """A warm-up reads what a reply reads and runs the SDK's first request in-process: the
    assistant's state is left as it was, and the model server hears nothing."""
    store = ListingStore()
    llm = LLMClient(llm_config, runner=sync_runner, clock=task.Clock())
    ports = support.make_ports(llm=llm, semantic=store)
    Journal(ports).add("Bob said the lighthouse lamp is out.", source_type="direct",
                      source_entity="Bob")
    saves, before = ports.state.saves, json.dumps(ports.state.data, sort_keys=True,
                                                   default=str)
    warmup._import_client_library()
    done = support.result_of(warmup.warm_up(ports, cpu_runner=sync_runner,
                                            io_runner=sync_runner))
    assert done == {"models": True, "client": True, "recall": True}
    assert llm_server.requests == []
    assert ports.state.saves == saves
    assert json.dumps(ports.state.data, sort_keys=True, default=str) == before
    # the client's chat resources, which its first request would load, are read already
    assert "chat" in vars(llm.sdk) and "completions" in vars(llm.sdk.chat)


def test_the_process_warm_up_imports_the_tick_modules_and_checks_every_tool_schema(
        tmp_path, monkeypatch):
    from ai_assistant.tools.catalogue import load_all_tools
    from ai_assistant.tools.registry import REGISTRY

    prepared = []
    for tool in load_all_tools().all():
        vars(tool).pop("_validator", None)
    warmup._prepare_turn_code(lambda: prepared.append("the shell's tick imports"))
    assert prepared == ["the shell's tick imports"]
    tools = load_all_tools().all()  # what a cycle loads: the same tools, checked already
    assert tools and all("_validator" in vars(tool) for tool in tools)
    assert tools == REGISTRY.all()


def test_the_sdk_rehearsal_is_answered_in_process_and_logs_no_request(caplog):
    """The rehearsal of the SDK's first request: parsed like a real reply, sent nowhere, and
    never a request line in the log, even with `llm.log_requests` on."""
    import logging

    from ai_assistant.plumbing.llm_rehearsal import REHEARSAL_URL, rehearse_completion
    from ai_assistant.plumbing.llm_resilience import http_logger_names, quiet_http_logs
    from ai_assistant.tools.registry import REGISTRY

    assert ".invalid/" in REHEARSAL_URL  # a reserved name: nothing could answer it
    quiet_http_logs(verbose=True)
    try:
        with caplog.at_level(logging.DEBUG):
            reply = rehearse_completion([REGISTRY.get("say").spec()])
            rehearsal_lines = [record for record in caplog.records
                               if record.name.split(".")[0] in http_logger_names()]
            logging.getLogger("httpx2").info("after the rehearsal")
    finally:
        quiet_http_logs(verbose=False)
    assert [(call.name, call.arguments) for call in reply.tool_calls] == [
        ("say", '{"message": "Hello."}')]
    assert (reply.prompt_tokens, reply.completion_tokens) == (12, 5)
    assert rehearsal_lines == []
    # the loggers are left as they were: only the rehearsal's own lines were dropped
    assert caplog.records[-1].getMessage() == "after the rehearsal"


def test_after_the_rehearsal_a_real_client_imports_nothing_more():
    """The rehearsal's in-process transport must not leave out the default transport's imports
    (the HTTP library's connection pool): an assistant's first client, built beside a first
    reply after a start, would import them then. A fresh interpreter: the imports are real."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import sys
        import httpx, openai
        from ai_assistant.plumbing.llm_rehearsal import rehearse_completion
        rehearse_completion()
        before = set(sys.modules)
        client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
        client.close()
        print(sorted(set(sys.modules) - before))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "[]", done.stderr


@pytest.fixture
def fresh_process_warm_up(monkeypatch):
    """The process-wide warm-up's bookkeeping, as in a process that has not started it (an
    early thread a test left waiting for its fork is let go at the end)."""
    for name in ("_started", "_finished", "_held", "_early", "_past_fork", "_watched"):
        monkeypatch.setattr(warmup, name, [])
    yield
    warmup._release_early_thread()


def test_the_early_warm_up_runs_in_its_own_thread_and_the_later_start_follows_it(
        monkeypatch, fresh_process_warm_up):
    """Started before the reactor exists (the inspector app's `ready()`), in a plain thread;
    the typeclasses' later call only follows it, and the store waits for it as before."""
    import threading

    from twisted.internet import reactor

    from ai_assistant.plumbing import threads
    from ai_assistant.plumbing.settings import Settings

    gate, ran, lines = threading.Event(), [], []
    monkeypatch.setattr(warmup, "_import_client_library",
                        lambda prepare: ran.append((threading.current_thread().name, prepare)))
    monkeypatch.setattr(warmup, "_load_models", lambda settings: gate.wait(5) and ran.append(
        "models"))
    thread = warmup.start_early(Settings(), print, log=lines.append)
    assert warmup.start_early(Settings()) is None  # once per process
    # the later start sizes the pools and follows the thread (waited for in the waiting pool)
    followed = []
    monkeypatch.setattr(reactor, "running", True)
    monkeypatch.setattr(threads, "configure", lambda settings: followed.append("configure"))
    monkeypatch.setattr(threads, "run_blocking",
                        lambda func, *args: followed.append(func) or defer.Deferred())
    process = warmup.warm_up_process(Settings(), prepare=print)
    assert followed[0] == "configure" and followed[1] == warmup._early[0].wait
    held = warmup.after_process_warm_up(lambda: "store opened")
    assert not held.called
    gate.set()
    thread.join(5)
    assert ran == [("ai_assistant-warm-up", print), "models"]
    assert lines and "warm-up done" in lines[0]
    # the pool's wait returns; on the reactor, what was held goes on
    process.callback(None)
    assert support.result_of(held) == "store opened" and warmup._finished
    assert warmup.warm_up_process(Settings()) is None


def test_a_failed_early_warm_up_is_logged_and_holds_nothing(monkeypatch, fresh_process_warm_up):
    from twisted.internet import reactor

    from ai_assistant.plumbing.settings import Settings

    def broken(prepare):
        raise ImportError("no openai here")

    lines = []
    monkeypatch.setattr(warmup, "_import_client_library", broken)
    warmup.start_early(Settings(), log=lines.append)
    assert warmup._early[0].wait(5)
    assert "failed" in lines[0] and "no openai here" in lines[0]
    monkeypatch.setattr(reactor, "running", True)
    # its thread is over: the store's opening does not wait, even before the reactor noticed
    assert support.result_of(warmup.after_process_warm_up(lambda: "at once")) == "at once"


def test_a_process_that_forks_waits_for_the_early_warm_up_first(monkeypatch,
                                                                  fresh_process_warm_up):
    """twistd daemonizes the Server (a fork) right after loading it: the child has none of the
    parent's threads, so the warm-up must be over by then, or the child would inherit it half
    done, with its locks held."""
    import warnings

    from ai_assistant.plumbing.settings import Settings

    monkeypatch.setattr(warmup, "_import_client_library", lambda prepare: time.sleep(0.3))
    monkeypatch.setattr(warmup, "_load_models", lambda settings: None)
    lines = []
    thread = warmup.start_early(Settings(), log=lines.append)
    assert thread.is_alive()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multi-threaded process forks": other tests' pools
        child = os.fork()
        if child == 0:  # the child: the warm-up is over and its thread gone
            os._exit(0 if warmup._early[0].is_set() and not thread.is_alive() else 1)
    _, status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(status) == 0
    assert any("fork waited" in line for line in lines)


def test_the_early_thread_outlives_its_work_until_the_reactor_runs(monkeypatch,
                                                                      fresh_process_warm_up):
    """A thread that ends runs its C libraries' exit handlers after Python has let it go, and
    OpenSSL's takes a process-wide lock there: a fork in that instant (the fork waits for the
    warm-up, then goes on at once) handed the child that lock held for good, and the child's
    store never opened. So the thread stays, idle, until the reactor runs (past the fork)."""
    from twisted.internet import reactor

    from ai_assistant.plumbing import threads
    from ai_assistant.plumbing.settings import Settings

    monkeypatch.setattr(warmup, "_import_client_library", lambda prepare: None)
    monkeypatch.setattr(warmup, "_load_models", lambda settings: None)
    lines = []
    thread = warmup.start_early(Settings(), log=lines.append)
    assert warmup._early[0].wait(5)
    # what a fork waits for is over, and the fork goes on at once: the thread is still there
    warmup._finish_before_fork(thread, warmup._early[0], lines.append)
    thread.join(0.3)
    assert thread.is_alive() and not any("fork waited" in line for line in lines)
    # the typeclasses' start, on the running reactor, lets it end
    monkeypatch.setattr(reactor, "running", True)
    monkeypatch.setattr(threads, "configure", lambda settings: None)
    monkeypatch.setattr(threads, "run_blocking", lambda func, *args: defer.Deferred())
    warmup.warm_up_process(Settings())
    thread.join(5)
    assert not thread.is_alive()


def test_a_fork_waits_for_a_slow_warm_up_however_long_saying_where_it_is(
        monkeypatch, fresh_process_warm_up):
    """A fork cut short of the warm-up leaves a child that hangs at its first import of what
    the thread was importing: a slow machine's fork waits on, and tells where the thread is."""
    import warnings

    from ai_assistant.plumbing.settings import Settings

    def slow_imports(prepare):
        time.sleep(0.5)

    monkeypatch.setattr(warmup, "FORK_REPORT_SECONDS", 0.1)
    monkeypatch.setattr(warmup, "_import_client_library", slow_imports)
    monkeypatch.setattr(warmup, "_load_models", lambda settings: None)
    lines = []
    thread = warmup.start_early(Settings(), log=lines.append)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multi-threaded process forks": other tests' pools
        child = os.fork()
        if child == 0:
            os._exit(0 if warmup._early[0].is_set() and not thread.is_alive() else 1)
    _, status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(status) == 0
    waiting = [line for line in lines if "has waited" in line]
    assert len(waiting) >= 2 and all("in slow_imports" in line for line in waiting)
    assert "fork waited" in lines[-1] and float(lines[-1].split("waited ")[1].split()[0]) >= 0.4


def test_the_early_warm_up_installs_no_reactor():
    """Started before twistd runs the reactor (perhaps before it installs one): the thread's
    real work - the imports, the SDK's rehearsal, the models - must not import the reactor,
    which would install the default one behind twistd's back. In a fresh interpreter."""
    import subprocess

    code = (
        "import sys\n"
        "from ai_assistant.agent import warmup\n"
        "from ai_assistant.plumbing.settings import Settings\n"
        "lines = []\n"
        "from ai_assistant.server_warm_up import import_tick_modules\n"
        "warmup.start_early(Settings(), import_tick_modules, log=lines.append)\n"
        "warmup._early[0].wait()\n"
        "assert 'started early' in lines[0], lines\n"
        "assert 'openai' in sys.modules and 'ai_assistant.agent.react' in sys.modules\n"
        "assert 'twisted.internet.reactor' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
