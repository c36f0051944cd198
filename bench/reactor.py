"""
Reactor responsiveness: how long a plain `look` takes while many assistants are busy.

    .venv/bin/python -m bench.reactor [--assistants 20] [--looks 200] [--interval 0.1]
                                      [--talkers 4] [--journal 300] [--llm-delay 1.0]
                                      [--warmup 8] [--out PATH]

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
   embedder) runs during the measurement. `--talkers` players `talk` to the awake assistants in
   turn, each every 0.5 s, for the whole run. After a warm-up (`--warmup` seconds) the looker
   measures again.

The target: p99 under load within 1.2x the baseline's p99, or baseline + 20 ms, whichever is
larger. Every process started from the game folder is stopped at the end.

Results go to `bench/results/reactor.json`.
"""

import argparse
import json
import re
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO / "tests"))

MARKER = "BENCH-ROOM-END"
TALK_EVERY = 0.5
WARMUP_SECONDS = 8.0
TARGET_RATIO = 1.2
TARGET_SLACK_MS = 20.0
# the players are created from one address within seconds
THROTTLES = "CREATION_THROTTLE_LIMIT = None\nLOGIN_THROTTLE_LIMIT = None\n"


def make_responder(delay):
    """The scripted LLM: `say` for ReAct requests, sleep-time JSON otherwise, after `delay`."""
    from scripted_llm import Reply

    from bench.llm_economy import respond

    def responder(request):
        if request.get("tools"):  # a ReAct step (native tool calling)
            return Reply.tool("say", {"message": "Noted, friend."}).after(delay)
        return respond(request).after(delay)

    return responder


def percentile(values, share):
    """Nearest-rank percentile (share 0-1) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(share * len(ordered) + 0.5)))
    return ordered[rank - 1]


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
    """A connected TelnetClient: the superuser, or a new player account `name`."""
    from game_server import TelnetClient

    client = TelnetClient(server.telnet_port, timeout=60)
    client.read_until(r"connect", timeout=60)
    if name is None:
        client.send(f"connect {server.username} {server.password}")
    else:
        client.send(f"create {name} {password}")
        client.read_until(r"Is this what you intended", timeout=60)
        client.send("Y")
        client.read_until(r"(?i)created|welcome", timeout=60)
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


class Talker(threading.Thread):
    """A player who talks to the assistants in turn until stopped (and reads what comes back)."""

    def __init__(self, client, names, offset):
        super().__init__(daemon=True)
        self.client = client
        self.names = names
        self.offset = offset
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
                self.client.send(f"talk {name} = how is the harbour today, {name}?")
                self.sent += 1
                deadline = time.time() + TALK_EVERY
                while time.time() < deadline:
                    self.client._receive(max(0.01, deadline - time.time()))
                self.heard += self.client.buffer.count(" says, ")
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


def run(assistants=20, looks=200, interval=0.1, talkers=4, journal_entries=300, llm_delay=1.0,
        log=print, warmup=WARMUP_SECONDS, game=None):  # fmt: skip
    """
    Run the benchmark (see the module doc).

    Args:
        game (tuple, optional): `(server, llm)`: a started `GameServer` whose LLM is the
            `ScriptedLLMServer` `llm`, lent by the caller, who stops it (the smoke tests share
            one between benches). Without it the bench starts its own.

    Returns:
        dict: The results document.
    """
    from game_server import GameServer
    from scripted_llm import ScriptedLLMServer

    if game is None:
        llm = ScriptedLLMServer(responder=make_responder(llm_delay)).start()
        server = GameServer(env={"AI_ASSISTANT_LLM_BASE_URL": llm.base_url,
                                 "AI_ASSISTANT_LLM_API_KEY": "bench-key"},
                            settings=THROTTLES)  # fmt: skip
    else:
        server, llm = game
        llm.responder = make_responder(llm_delay)
    clients, crew = [], []
    left_running = None  # a lent server is the lender's to stop
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
        baseline = measure_looks(looker, looks, interval)
        log(f"baseline: {summary(baseline)}")

        names = [f"Bench{number}" for number in range(1, assistants + 1)]
        for name in names:
            admin.command(f"@assistant/create {name}", rf"Created assistant {name}[^\n]*\n")
        sleeper = names[-1]
        awake = names[:-1] or names
        if journal_entries:
            admin.command(f"@assistant/config {sleeper} = journal.max_entries "
                          f"{max(1000, journal_entries * 2)}", r"journal.max_entries[^\n]*\n")
            admin.command(f"@assistant/config {sleeper} = ticks.sleep 5", r"ticks.sleep[^\n]*\n")
            seeded = admin.command(seed_journal_code(sleeper, journal_entries),
                                   r"seeded \d+ entries", timeout=120)  # fmt: skip
            log(seeded.strip().splitlines()[-1])
            admin.command(f"@assistant/sleep {sleeper}", r"now asleep[^\n]*\n")
        for number, client in enumerate(players):
            client.drain(0.1)
            crew.append(Talker(client, awake, number * 3))
        requests_before = len(llm.requests)
        for talker in crew:
            talker.start()
        time.sleep(warmup)
        load_started = time.perf_counter()
        loaded = measure_looks(looker, looks, interval)
        load_seconds = time.perf_counter() - load_started
        requests = len(llm.requests) - requests_before
        log(f"load: {summary(loaded)}")
        for talker in crew:
            talker.stop_event.set()
        for talker in crew:
            talker.join(timeout=10)
        status = admin.command(f"@assistant {sleeper}", r"provider:[^\n]*\n")
        tracebacks = server.logs().count("Traceback")
    finally:
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
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "setup": {
            "assistants": assistants,
            "looks": looks,
            "interval_s": interval,
            "talkers": talkers,
            "talk_every_s": TALK_EVERY,
            "sleeper_journal_entries": journal_entries,
            "sleeper_tick_s": 5,
            "llm_delay_s": llm_delay,
            "warmup_s": warmup,
        },
        "baseline": base,
        "load": load,
        "p99_ratio": round(load["p99_ms"] / base["p99_ms"], 3) if base["p99_ms"] else None,
        "p99_allowed_ms": round(allowed, 2),
        "target_met": load["p99_ms"] <= allowed,
        "during_load": {
            "seconds": round(load_seconds, 1),
            "llm_requests": requests,
            "talks_sent": sum(t.sent for t in crew),
            "says_heard_by_talkers": sum(t.heard for t in crew),
            "talker_errors": [t.error for t in crew if t.error],
            "sleeper_phase_after": phase.group(1) if phase else None,
        },
        "server_tracebacks": tracebacks,
        "processes_left_running": left_running,  # None: a lent server
    }


def main(argv=None, game=None):
    """The command line (see the module doc); `game` as `run` takes it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assistants", type=int, default=20)
    parser.add_argument("--looks", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--talkers", type=int, default=4)
    parser.add_argument("--journal", type=int, default=300)
    parser.add_argument("--llm-delay", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=WARMUP_SECONDS,
                        help="seconds of load before the looks under load are measured")
    parser.add_argument("--out", default=str(RESULTS / "reactor.json"))
    args = parser.parse_args(argv)
    document = run(args.assistants, args.looks, args.interval, args.talkers, args.journal,
                   args.llm_delay, warmup=args.warmup, game=game)  # fmt: skip
    print(json.dumps({k: document[k] for k in ("baseline", "load", "p99_ratio", "target_met")}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    return document


if __name__ == "__main__":
    main()
