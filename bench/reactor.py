"""
Reactor responsiveness: how long a plain `look` takes while many assistants are busy.

    .venv/bin/python -m bench.reactor [--assistants 20] [--looks 200] [--interval 0.1]
                                      [--talkers 4] [--journal 300] [--memories 300]
                                      [--llm-delay 1.0] [--warmup 8] [--out PATH]
                                      [--blocks PATH] [--spy PATH] [--reload] [--gc-freeze]
                                      [--floor]

A real Evennia server is started from this repository (`tests/game_server.py`) with its LLM
pointed at the scripted OpenAI-compatible server (`tests/scripted_llm.py`), which answers every
request after `--llm-delay` seconds: a ReAct request with a `say` tool call, a sleep-time request
(importance scoring, mem0 fact extraction and updates) with the plausible JSON of
`bench/llm_economy.py`. Everything happens in Limbo.

1. **Baseline.** A player ("looker") sends `look` `--looks` times, `--interval` seconds apart,
   and times each until the end of the room description (a marker) arrives. No assistant is
   created and nobody talks (the talkers are connected but idle; the demo world's Ada stands
   idle in both runs).
2. **Load.** The superuser creates `--assistants` assistants (`@assistant/create BenchN`). The
   last one gets `--journal` journal entries and is put to sleep with a 5 s sleep tick (the
   default is 60 s), so its compacting phase (LLM scoring, mem0 consolidation with the local
   embedder) runs during the measurement. Every awake assistant is given a grown memory, a few
   weeks of play: `--memories` journal entries and as many long-term memories (invented lines
   about invented people, places and things, written through the owners, `Journal` and
   `Memories`, so the store, its recall mirror and the journal hold them as play would), so
   that recall ranks a large corpus for every reply. `--talkers` players `talk` to the awake
   assistants in turn, each every 0.5 s, for the whole run. After a warm-up (`--warmup`
   seconds) the looker
   measures again.

With `--reload` the server is reloaded once the assistants are grown, as a live game starts
with its world, and the load begins when that start has settled (its warm-ups over: at most
`SETTLE_SECONDS`). `--gc-freeze` sets `threads.gc_freeze` in the server's settings, so the
objects held once a start settles are left out of the garbage collector's full passes.

With `--floor` the same traffic is served by plain Evennia characters instead of assistants
(`bench.reactor_floor`): the players `say` their lines, each character answers a line that
names it after `--llm-delay` seconds with Evennia's own `say`. No memory is grown and nobody
sleeps. What a `look` waits for then is the game's own work for that traffic, the floor under
any assistant: compare the two runs' `p99_ms` and `reactor_cpu_ms_per_talk`.

With `--spy PATH` the Server is sampled from outside by `py-spy` while the looks under load are
timed (`bench.reactor_profile`): what its reactor thread spent its CPU on while it held the
interpreter lock, by function and by package, without the in-process watchdog's beat.

The target (issue 30): p99 under load within 1.5x the baseline's p99, or baseline + 20 ms,
whichever is larger. Every process started from the game folder is stopped at the end.

Results go to `bench/results/reactor.json`.
"""

import argparse
import json
import os
import random
import re
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.machine import describe
from bench.percentiles import percentile
from bench.reactor_profile import Recording
from bench.reactor_profile import summarise as summarise_profile

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO / "tests"))

MARKER = "BENCH-ROOM-END"
TALK_EVERY = 0.5
WARMUP_SECONDS = 8.0
# After `--reload`: the longest wait for the start to settle (its warm-ups wait for a quiet
# moment and take a few seconds each; `threads.gc_freeze` logs when it is over).
SETTLE_SECONDS = 60.0
SETTLED_LINE = "the start has settled"
# `--gc-freeze`: appended to the server's settings
GC_FREEZE_SETTINGS = ('AI_ASSISTANT = dict(globals().get("AI_ASSISTANT", {}))\n'
                      'AI_ASSISTANT["threads"] = {**AI_ASSISTANT.get("threads", {}), '
                      '"gc_freeze": True}\n')
# an answer the talkers read (the players' own lines say "talkerN says")
REPLY_SAID = re.compile(r"\b(?:Bench|Floor)\d+ says, ")
TARGET_RATIO = 1.5
TARGET_SLACK_MS = 20.0
# the players are created from one address within seconds; the server imports this module
# (appended to its path, after the game's own folders) to grow the assistants' memories
SERVER_SETTINGS = ("CREATION_THROTTLE_LIMIT = None\nLOGIN_THROTTLE_LIMIT = None\n"
                   f"import sys as _sys\n_sys.path.append({str(REPO)!r})\n")
# An invented world for the grown memories: lines like "Orla told me that Bram mended a copper
# lantern near the mill at dawn." (the vocabulary of a few weeks of varied conversation).
PEOPLE = ("Orla", "Bram", "Tamsin", "Iver", "Quill", "Sable", "Rowan", "Hesper", "Kestrel",
          "Marlo", "Wren", "Pell")  # fmt: skip
DEEDS = ("mended", "sold", "lost", "found", "painted", "carried", "traded", "buried", "stole",
         "polished", "hid", "baked", "carved", "sang about", "argued over", "dreamt of",
         "borrowed", "repaired", "counted", "guarded")  # fmt: skip
KINDS = ("copper", "old", "silver", "broken", "painted", "heavy", "tiny", "bright", "cracked",
         "woollen", "salted", "gilded", "crooked", "famous", "secret")  # fmt: skip
THINGS = ("lantern", "kettle", "compass", "fiddle", "ledger", "anchor", "loom", "saddle",
          "mirror", "bell", "shovel", "basket", "telescope", "cheese", "rope", "ring", "map",
          "drum", "blanket", "sword", "barrel", "quilt", "kite", "chessboard")  # fmt: skip
PLACES = ("mill", "harbour", "orchard", "chapel", "forge", "ferry", "quarry", "market",
          "lighthouse", "bakery", "stables", "bridge", "well", "tannery", "library")  # fmt: skip
WHENS = ("at dawn", "last winter", "during the fair", "after the storm", "before supper",
         "on market day", "in the rain", "at midnight", "every spring", "yesterday")  # fmt: skip


def make_responder(delay):
    """The scripted LLM: `say` for ReAct requests, sleep-time JSON otherwise, after `delay`."""
    from scripted_llm import Reply

    from bench.llm_economy import respond

    def responder(request):
        if request.get("tools"):  # a ReAct step (native tool calling)
            return Reply.tool("say", {"message": "Noted, friend."}).after(delay)
        return respond(request).after(delay)

    return responder


def summary(latencies_ms):
    return {
        "looks": len(latencies_ms),
        "p50_ms": round(percentile(latencies_ms, 0.50), 2),
        "p90_ms": round(percentile(latencies_ms, 0.90), 2),
        "p99_ms": round(percentile(latencies_ms, 0.99), 2),
        "mean_ms": round(statistics.fmean(latencies_ms), 2),
        "max_ms": round(max(latencies_ms), 2),
    }


def login(server, name=None, password="bench-pass-1"):
    """A connected TelnetClient: the superuser, or player `name` (created unless it exists)."""
    from game_server import TelnetClient

    client = TelnetClient(server.telnet_port, timeout=60)
    client.read_until(r"connect", timeout=60)
    if name is None:
        client.send(f"connect {server.username} {server.password}")
    else:
        client.send(f"create {name} {password}")
        client.read_until(r"Is this what you intended", timeout=60)
        client.send("Y")
        # a lent server may have this player from an earlier run: it connects again
        client.read_until(r"(?i)created|welcome|already taken", timeout=60)
        client.send(f"connect {name} {password}")
    client.read_until(r"Limbo", timeout=60)
    client.drain(0.5)
    return client


def measure_looks(client, count, interval):
    """Latency (ms) of `count` looks, `interval` seconds apart."""
    latencies = []
    client.drain(0.2)
    for _ in range(count):
        started = time.perf_counter()
        client.send("look")
        client.read_until(re.escape(MARKER), timeout=60)
        latencies.append((time.perf_counter() - started) * 1000)
        time.sleep(interval)
    return latencies


def thread_cpu_seconds(pid, thread_id=None):
    """
    CPU seconds (user + system) one thread of process `pid` has used: its main thread, where
    Evennia's reactor runs, unless `thread_id` is given. Unlike a look's latency, it hardly
    depends on what else the machine runs. None where /proc cannot be read.
    """
    path = f"/proc/{pid}/task/{thread_id or pid}/stat"
    try:
        with open(path) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # after the command name: state is field 3, utime and stime fields 14 and 15 (1-based)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reactor_cpu_during(pid, measure):
    """`(result of measure(), reactor CPU ms per second of wall time)` while `measure` runs."""
    cpu_before, started = thread_cpu_seconds(pid) if pid else None, time.perf_counter()
    result = measure()
    cpu_after, seconds = thread_cpu_seconds(pid) if pid else None, time.perf_counter() - started
    if cpu_before is None or cpu_after is None:
        return result, None
    return result, round((cpu_after - cpu_before) * 1000 / seconds, 1)


def invented_line(rng):
    """One line of an invented conversation (see PEOPLE ... WHENS)."""
    teller, doer = rng.sample(PEOPLE, 2)
    return (f"{teller} told me that {doer} {rng.choice(DEEDS)} a {rng.choice(KINDS)} "
            f"{rng.choice(THINGS)} near the {rng.choice(PLACES)} {rng.choice(WHENS)}.")


def grow_memories(caller, names, count, seed=0):
    """
    Give each assistant of `names` `count` journal entries and `count` long-term memories
    (runs inside the server, called through `py`; the superuser `caller` is told when all
    are done, or what failed).

    The entries are written on the reactor through `Journal`; the memories through
    `Memories.add` (the store, off the reactor, and its recall mirror), one after another per
    assistant, dated over the past three weeks as consolidation dates them.
    """
    from datetime import timedelta

    from twisted.internet import defer

    from ai_assistant.memory.journal import Journal, get_journal
    from ai_assistant.memory.longterm.memories import Memories

    @defer.inlineCallbacks
    def grow(name):
        ports = caller.search(name, global_search=True).assistant.ports()
        rng = random.Random(f"{name}-{seed}")
        journal = Journal(ports)
        for _ in range(count):
            journal.add(invented_line(rng), source_type="direct",
                        source_entity=rng.choice(PEOPLE))  # fmt: skip
        now, memories = ports.clock.now(), Memories(ports)
        for number in range(count):
            moment = now - timedelta(hours=(count - number) * 24 * 21 / count)
            yield memories.add(invented_line(rng), {
                "source": "journal", "entry_id": f"old-{number}", "source_type": "direct",
                "source_trust": 0.9, "source_entity": rng.choice(PEOPLE),
                "importance": rng.randint(2, 8), "timestamp": moment.isoformat()})
        return len(get_journal(ports)["entries"])

    def done(results):
        failed = [result.getErrorMessage() for ok, result in results if not ok]
        caller.msg(f"growing failed: {failed[0]}" if failed else
                   f"grown {len(results)} assistants: {min(r for _, r in results)}+ entries, "
                   f"{count} memories each")  # fmt: skip

    defer.DeferredList([grow(name) for name in names], consumeErrors=True).addCallback(done)


class Talker(threading.Thread):
    """
    A player who talks to the assistants in turn until stopped (and reads what comes back):
    `talk Bench3 = ...`, or with `floor` Evennia's own `say Bench3, ...` (`bench.reactor_floor`).
    """

    def __init__(self, client, names, offset, floor=False):
        super().__init__(daemon=True)
        self.client = client
        self.names = names
        self.offset = offset
        self.floor = floor
        self.stop_event = threading.Event()
        self.sent = 0
        self.heard = 0
        self.error = None

    def run(self):
        turn = self.offset
        try:
            while not self.stop_event.is_set():
                name = self.names[turn % len(self.names)]
                turn += 1
                self.client.send(f"say {name}, how is the harbour today?" if self.floor
                                 else f"talk {name} = how is the harbour today, {name}?")
                self.sent += 1
                deadline = time.time() + TALK_EVERY
                while time.time() < deadline:
                    self.client._receive(max(0.01, deadline - time.time()))
                self.heard += len(REPLY_SAID.findall(self.client.buffer))
                self.client.buffer = ""
        except (OSError, ConnectionError) as err:  # reported, not raised in a thread
            self.error = repr(err)


def seed_journal_code(name, count):
    """`py` code that writes `count` journal entries for assistant `name` (as the superuser)."""
    return (
        "py from ai_assistant.memory.journal import Journal; "
        f"_n = self.search('{name}', global_search=True); _p = _n.assistant.ports(); "
        f"_ = [Journal(_p).add('Entry %d: a sailor at the harbour told me about the storm, "
        f"the wolves and the lost ring number %d.' % (_i, _i), source_type='direct', "
        f"source_entity='Sailor%d' % (_i % 7)) for _i in range({count})]; "
        "self.msg('seeded %d entries' % len(Journal(_p).entries()))"
    )


def reload_and_settle(server, admin, pid_file, log):
    """
    Reload the server (`--reload`) and wait until its start has settled: the line
    `threads.gc_freeze` logs, or `SETTLE_SECONDS`.

    Returns:
        int or None: The new Server's pid.
    """
    started = time.perf_counter()
    server.mark_logs()
    server.reload(admin)
    deadline = time.time() + SETTLE_SECONDS
    while time.time() < deadline and SETTLED_LINE not in server.logs():
        time.sleep(0.5)
    settled = [line for line in server.logs().splitlines() if SETTLED_LINE in line]
    log(f"reloaded and settled in {time.perf_counter() - started:.1f}s"
        + (f": {settled[-1].split(SETTLED_LINE, 1)[1].strip(' :')}" if settled else ""))
    return int(pid_file.read_text().strip()) if pid_file.exists() else None


def run(assistants=20, looks=200, interval=0.1, talkers=4, journal_entries=300, memories=300,
        llm_delay=1.0, log=print, warmup=WARMUP_SECONDS, game=None, blocks=None,
        reload_world=False, gc_freeze=False, floor=False, spy=None):  # fmt: skip
    """
    Run the benchmark (see the module doc).

    Args:
        game (tuple, optional): `(server, llm)`: a started `GameServer` whose LLM is the
            `ScriptedLLMServer` `llm`, lent by the caller, who stops it (the smoke tests share
            one between benches). Without it the bench starts its own.
        blocks (str, optional): A file for the reactor's long passes under load
            (`bench.reactor_blocks`: its watchdog's beat is a little reactor work of its own,
            so a run with it is for finding the passes, not for the ratio).
        reload_world (bool): Reload the server once the world is grown (`--reload`).
        gc_freeze (bool): `threads.gc_freeze` in the server's settings (a server of its own).
        floor (bool): The same traffic served by plain Evennia characters, no assistant
            (`bench.reactor_floor`): what the game's own work for it costs a `look`.
        spy (str, optional): A file for `py-spy`'s samples of the Server under load
            (`bench.reactor_profile`).

    Returns:
        dict: The results document.
    """
    from game_server import GameServer
    from scripted_llm import ScriptedLLMServer

    if game is None:
        llm = ScriptedLLMServer(responder=make_responder(llm_delay)).start()
        server = GameServer(env={"AI_ASSISTANT_LLM_BASE_URL": llm.base_url,
                                 "AI_ASSISTANT_LLM_API_KEY": "bench-key"},
                            settings=SERVER_SETTINGS + (GC_FREEZE_SETTINGS if gc_freeze
                                                        else ""))  # fmt: skip
    else:
        server, llm = game
        llm.responder = make_responder(llm_delay)
    clients, crew = [], []
    # a lent server is the lender's to stop (it must be started with SERVER_SETTINGS)
    left_running, corpus, machine_load, reactor_cpu = None, [None, None], {}, {}
    status = floor_removed = None
    long_passes = profile = recording = None
    try:
        started = time.perf_counter()
        if game is None:
            server.start()
            log(f"server up in {time.perf_counter() - started:.1f}s")
        else:
            server.mark_logs()
        admin = login(server)
        clients.append(admin)
        admin.command(f"@desc here = A quiet grey room for benchmarks. {MARKER}",
                      r"(?i)desc[^\n]*\n")  # fmt: skip
        looker = login(server, "looker")
        clients.append(looker)
        players = []  # connected (idle) in the baseline too
        for number in range(talkers):
            players.append(login(server, f"talker{number}"))
            clients.append(players[-1])

        measure_looks(looker, min(10, looks), interval)  # warm caches before either run
        pid_file = Path(server.dir) / "server" / "server.pid"
        server_pid = int(pid_file.read_text().strip()) if pid_file.exists() else None
        baseline, reactor_cpu["baseline"] = reactor_cpu_during(
            server_pid, lambda: measure_looks(looker, looks, interval))
        machine_load = {"baseline": round(os.getloadavg()[0], 2)}
        log(f"baseline: {summary(baseline)}")

        names = [f"{'Floor' if floor else 'Bench'}{number}" for number in range(1, assistants + 1)]
        if floor:
            admin.command(f"py from bench.reactor_floor import create_floor; "
                          f"create_floor(self, {names!r}, {llm_delay!r})",
                          r"floor: \d+ characters[^\n]*\n")  # fmt: skip
        else:
            for name in names:
                admin.command(f"@assistant/create {name}", rf"Created assistant {name}[^\n]*\n")
        sleeper = None if floor else names[-1]
        awake = names if floor else (names[:-1] or names)
        if journal_entries and not floor:
            admin.command(f"@assistant/config {sleeper} = journal.max_entries "
                          f"{max(1000, journal_entries * 2)}", r"journal.max_entries[^\n]*\n")
            admin.command(f"@assistant/config {sleeper} = ticks.sleep 5", r"ticks.sleep[^\n]*\n")
            seeded = admin.command(seed_journal_code(sleeper, journal_entries),
                                   r"seeded \d+ entries", timeout=120)  # fmt: skip
            log(seeded.strip().splitlines()[-1])
            admin.command(f"@assistant/sleep {sleeper}", r"now asleep[^\n]*\n")
        if memories and not floor:
            grow_started = time.perf_counter()
            for name in awake:
                admin.command(f"@assistant/config {name} = journal.max_entries "
                              f"{max(1000, memories * 2)}", r"journal.max_entries[^\n]*\n")
            grown = admin.command(f"py from bench.reactor import grow_memories; "
                                  f"grow_memories(self, {awake!r}, {memories})",
                                  r"grown \d+ assistants[^\n]*\n|growing failed[^\n]*\n",
                                  timeout=60 + memories * len(awake) * 0.2)  # fmt: skip
            if "growing failed" in grown:
                raise RuntimeError(grown.strip().splitlines()[-1])
            log(f"{grown.strip().splitlines()[-1]} "
                f"in {time.perf_counter() - grow_started:.1f}s")
        if reload_world:
            server_pid = reload_and_settle(server, admin, pid_file, log)
        for number, client in enumerate(players):
            client.drain(0.1)
            crew.append(Talker(client, awake, number * 3, floor))
        requests_before = len(llm.requests)
        for talker in crew:
            talker.start()
        if blocks:
            admin.command(f"py from bench.reactor_blocks import start; "
                          f"self.msg(start({str(blocks)!r}))", r"reactor watchdog[^\n]*\n")
        time.sleep(warmup)
        talks_before = sum(t.sent for t in crew)
        recording = Recording(server_pid, spy).start() if spy and server_pid else None
        load_started, load_began = time.perf_counter(), time.time()
        loaded, reactor_cpu["load"] = reactor_cpu_during(
            server_pid, lambda: measure_looks(looker, looks, interval))
        load_seconds = time.perf_counter() - load_started
        if recording is not None:
            failed = recording.stop()
            profile = {"error": failed} if failed else summarise_profile(spy)
            log(f"reactor profile: {profile}")
        talks_during_load = sum(t.sent for t in crew) - talks_before
        if blocks:
            from bench.reactor_blocks import summarise

            time.sleep(0.1)  # the watchdog writes a pass when it ends
            long_passes = summarise(blocks, load_began, time.time())
            log(f"long passes: {long_passes}")
        machine_load["load"] = round(os.getloadavg()[0], 2)
        requests = len(llm.requests) - requests_before
        log(f"load: {summary(loaded)}")
        for talker in crew:
            talker.stop_event.set()
        for talker in crew:
            talker.join(timeout=10)
        if floor:
            removed = admin.command(f"py from bench.reactor_floor import remove_floor; "
                                    f"remove_floor(self, {names!r})", r"floor removed: \d+")
            floor_removed = int(re.findall(r"floor removed: (\d+)", removed)[-1])
        else:
            status = admin.command(f"@assistant {sleeper}", r"provider:[^\n]*\n")
            corpus = admin.command(
                f"py from ai_assistant.memory.longterm.mirror import mirror_of; "
                f"from ai_assistant.memory.journal import get_journal; "
                f"_p = self.search('{awake[0]}', global_search=True).assistant.ports(); "
                f"self.msg('corpus: %d memories, %d entries' % (len(mirror_of(_p)), "
                f"len(get_journal(_p)['entries'])))", r"corpus: \d+ memories, \d+ entries")
            corpus = [int(n) for n in re.findall(r"\d+", corpus.splitlines()[-1])]
        tracebacks = server.logs().count("Traceback")
    finally:
        if recording is not None and profile is None:
            recording.stop()  # the run failed under load: py-spy is not left sampling
        for talker in crew:
            talker.stop_event.set()
        for client in clients:
            try:
                client.close()
            except OSError:
                pass
        if game is None:
            left_running = server.stop()
            server.cleanup()
            llm.stop()

    base, load = summary(baseline), summary(loaded)
    allowed = max(TARGET_RATIO * base["p99_ms"], base["p99_ms"] + TARGET_SLACK_MS)
    phase = re.search(r"phase:?\s*([a-z_]+)", status or "")
    return {
        "benchmark": "reactor",
        "machine": describe(),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "setup": {
            "assistants": assistants,
            "looks": looks,
            "interval_s": interval,
            "talkers": talkers,
            "talk_every_s": TALK_EVERY,
            # plain Evennia characters, no assistant (`bench.reactor_floor`)
            "floor": floor,
            "sleeper_journal_entries": 0 if floor else journal_entries,
            "memories_per_awake_assistant": {"journal_entries": 0 if floor else memories,
                                             "long_term_memories": 0 if floor else memories},
            "sleeper_tick_s": 5,
            "llm_delay_s": llm_delay,
            "warmup_s": warmup,
            "reloaded_after_growing": reload_world,
            "gc_freeze": gc_freeze,
        },
        "baseline": base,
        "load": load,
        # the machine's 1-minute load average at the end of each run (a shared machine's
        # other work slows both runs; compare ratios measured under the same load)
        "machine_load_average": machine_load,
        # CPU ms the Server's reactor thread used per second of each run: the reactor's own
        # work, which the machine's other load hardly changes (a look's latency it does)
        "reactor_cpu_ms_per_s": reactor_cpu,
        "p99_ratio": round(load["p99_ms"] / base["p99_ms"], 3) if base["p99_ms"] else None,
        "p99_allowed_ms": round(allowed, 2),
        "target_met": load["p99_ms"] <= allowed,
        "during_load": {
            "seconds": round(load_seconds, 1),
            "llm_requests": requests,
            # the reactor's CPU per reply: a busier run (more replies a second) uses more a second
            "reactor_cpu_ms_per_llm_request": (
                round(reactor_cpu["load"] * load_seconds / requests, 1)
                if reactor_cpu.get("load") is not None and requests else None),
            "talks_sent": sum(t.sent for t in crew),
            # the reactor's CPU per player line: comparable between the floor and the game
            # (the lines said while the looks under load were timed)
            "reactor_cpu_ms_per_talk": (
                round(reactor_cpu["load"] * load_seconds / talks_during_load, 2)
                if reactor_cpu.get("load") is not None and talks_during_load else None),
            "says_heard_by_talkers": sum(t.heard for t in crew),
            "talker_errors": [t.error for t in crew if t.error],
            # `--floor`: the plain characters deleted at the end (a lent server is left as found)
            "floor_characters_removed": floor_removed,
            "sleeper_phase_after": phase.group(1) if phase else None,
            # what one awake assistant's recall ranked at the end (its mirror and journal)
            "awake_memories_after": corpus[0],
            "awake_journal_entries_after": corpus[1],
        },
        "server_tracebacks": tracebacks,
        "processes_left_running": left_running,  # None: a lent server
    } | ({"long_passes_under_load": long_passes} if blocks else {}) | (
        {"reactor_profile_under_load": profile} if spy else {})


def main(argv=None, game=None):
    """The command line (see the module doc); `game` as `run` takes it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assistants", type=int, default=20)
    parser.add_argument("--looks", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--talkers", type=int, default=4)
    parser.add_argument("--journal", type=int, default=300)
    parser.add_argument("--memories", type=int, default=300,
                        help="journal entries and long-term memories of each awake assistant")
    parser.add_argument("--llm-delay", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=WARMUP_SECONDS,
                        help="seconds of load before the looks under load are measured")
    parser.add_argument("--out", default=str(RESULTS / "reactor.json"))
    parser.add_argument("--reload", action="store_true",
                        help="reload the server once the world is grown, and load it once that "
                             "start has settled")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="threads.gc_freeze in the server's settings")
    parser.add_argument("--floor", action="store_true",
                        help="the same traffic served by plain Evennia characters, no assistant "
                             "(bench.reactor_floor): the game's own share of the tail")
    parser.add_argument("--spy", default=None,
                        help="sample the Server with py-spy under load into this file, and "
                             "summarise where its reactor thread spent its CPU")
    parser.add_argument("--blocks", default=None,
                        help="record the reactor's passes over 4 ms under load in this file "
                             "(where a slow look waits; adds a 1 ms beat to the reactor)")
    args = parser.parse_args(argv)
    document = run(args.assistants, args.looks, args.interval, args.talkers, args.journal,
                   args.memories, args.llm_delay, warmup=args.warmup, game=game,
                   blocks=args.blocks, reload_world=args.reload, spy=args.spy,
                   gc_freeze=args.gc_freeze, floor=args.floor)  # fmt: skip
    print(json.dumps({k: document[k] for k in ("baseline", "load", "p99_ratio", "target_met",
                                               "reactor_cpu_ms_per_s", "machine_load_average")}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    return document


if __name__ == "__main__":
    main()
