"""
The first reply after a start or a reload, against a model that answers at once.

    .venv/bin/python -m bench.first_reply [--starts 4] [--warm 4] [--out PATH]

A real Evennia server is started from this repository (`tests/game_server.py`) with its LLM
pointed at the scripted OpenAI-compatible server (`tests/scripted_llm.py`), which answers every
ReAct request at once with a `say`. The demo world's assistant, Ada, stands in Limbo; for each
start:

1. the server starts (the first: the fresh Server process of `evennia start`, which restarts
   once after the initial setup that builds the world; the others: `reload`, as a game maker
   does after every code change);
2. the superuser waits until the server is up (and `--pause` seconds more: 0, at once, by
   default) and says `talk Ada = ...`;
3. the time until "Ada says" reaches the player is the first reply; the time until the
   request reaches the model server is the part spent before the model is asked.

Each reload is timed too (the command to the server saying it is back): a warm-up that made
the start itself longer would show there, not in the first reply. Then `--warm` more lines
(each after the speaker's cooldown; a reload needs no wait, as the cooldown lives in the
Server process) give the warm reply. Targets (issue 34): median first reply <= 1.5 s and
<= 2x the warm median.

Results go to `bench/results/first_reply.json`.
"""

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.machine import describe

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO / "tests"))

NAME = "Ada"
TARGET_SECONDS = 1.5
TARGET_RATIO = 2.0
# the speaker's cooldown (`perception.speaker_cooldown`, 4 s) holds a line said sooner
BETWEEN_LINES = 4.5


class Arrivals:
    """The scripted model: answers every ReAct request at once and notes when each arrived."""

    def __init__(self):
        from scripted_llm import Reply

        from bench.llm_economy import respond

        # imported now: a first request must not time this process's own imports
        self.reply, self.respond = Reply, respond
        self.times = []

    def __call__(self, request):
        if request.get("tools"):
            self.times.append(time.perf_counter())
            return self.reply.tool("say", {"message": "At your service."})
        return self.respond(request)


def timed_line(client, arrivals, text):
    """(seconds to the reply, seconds to the model request) of one line said to the assistant."""
    client.drain(0.1)
    asked = len(arrivals.times)
    started = time.perf_counter()
    client.send(f"talk {NAME} = {text}")
    log_time("said")
    client.read_until(rf"{NAME} says", timeout=60)
    replied = time.perf_counter() - started
    requested = arrivals.times[asked] - started if len(arrivals.times) > asked else None
    return round(replied, 3), (round(requested, 3) if requested is not None else None)


def log_time(what):
    print(f"  {datetime.now(UTC).strftime('%H:%M:%S.%f')[:-3]} {what}", flush=True)


def reload_server(client):
    """
    Reload the server from the game (as `reload` does) and wait until it is back.

    Returns:
        float: Seconds from the command to the server saying it is back (a warm-up that made
        the start longer shows here).
    """
    started = time.perf_counter()
    client.send("reload")
    client.read_until(r"(?i)server restarted|reloaded", timeout=120)
    took = time.perf_counter() - started
    log_time("reloaded")
    client.drain(0.3)
    return round(took, 3)


def llm_environment(llm):
    """The environment that points a game's LLM at the scripted model server `llm`."""
    return {"AI_ASSISTANT_LLM_BASE_URL": llm.base_url, "AI_ASSISTANT_LLM_API_KEY": "bench-key"}


def run(starts=4, warm=4, log=print, keep_log=None, pause=0.0, game=None):
    """
    Run the benchmark (see the module doc).

    Args:
        game (tuple, optional): `(server, llm)`: a started `GameServer` whose LLM is the
            `ScriptedLLMServer` `llm` (`llm_environment`), lent by the caller, who stops it
            (the smoke tests share one between benches). Without it the bench starts its own.

    Returns:
        dict: The results document.
    """
    from game_server import GameServer, login
    from scripted_llm import ScriptedLLMServer

    arrivals = Arrivals()
    if game is None:
        llm = ScriptedLLMServer(responder=arrivals).start()
        server = GameServer(env=llm_environment(llm))
    else:
        server, llm = game
        llm.responder = arrivals
    first, before_model, warm_replies, reloads, client = [], [], [], [], None
    left_running = None  # a lent server is the lender's to stop
    try:
        if game is None:
            server.start()
        else:
            server.mark_logs()
        client = login(server)
        for number in range(starts):
            if number:
                reloads.append(reload_server(client))
            time.sleep(pause)  # a player who reconnects and types (0: at once)
            replied, requested = timed_line(client, arrivals, f"good day, start {number}")
            first.append(replied)
            before_model.append(requested)
            log(f"start {number}: first reply {replied:.2f} s (model asked at {requested} s)")
            if number == starts - 1 and warm:
                # the next line goes to the same assistant in the same process: past the
                # speaker's cooldown (a reload ends it: it lives in the process)
                time.sleep(BETWEEN_LINES)
        for number in range(warm):
            replied, _ = timed_line(client, arrivals, f"and again, {number}")
            warm_replies.append(replied)
            if number < warm - 1:
                time.sleep(BETWEEN_LINES)
        log(f"warm: {warm_replies}")
        tracebacks = server.logs().count("Traceback")
        # the Server processes whose warm-up the inspector app started (`server_warm_up`)
        early_warm_ups = server.logs().count("(started early)")
        if keep_log:
            Path(keep_log).write_text(server.logs())
    finally:
        if client is not None:
            client.close()
        if game is None:
            left_running = server.stop()
            server.cleanup()
            llm.stop()
    first_median = statistics.median(first)
    warm_median = statistics.median(warm_replies)
    return {
        "benchmark": "first_reply",
        "machine": describe(),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "setup": {"starts": starts, "warm": warm, "llm_delay_s": 0.0, "pause_s": pause,
                  "first_start": ("evennia start (fresh Server process)" if game is None
                                  else "a server already running (lent)"),
                  "later_starts": "reload"},
        "first_reply_s": first,
        "model_asked_after_s": before_model,
        "warm_reply_s": warm_replies,
        "reload_s": reloads,
        "reload_median_s": round(statistics.median(reloads), 3) if reloads else None,
        "first_median_s": round(first_median, 3),
        "warm_median_s": round(warm_median, 3),
        "ratio": round(first_median / warm_median, 2) if warm_median else None,
        "target": {"median_s": TARGET_SECONDS, "ratio": TARGET_RATIO},
        "target_met": first_median <= TARGET_SECONDS
        and first_median <= TARGET_RATIO * max(warm_median, 0.001),
        "server_tracebacks": tracebacks,
        "early_warm_ups": early_warm_ups,
        "processes_left_running": left_running,  # None: a lent server
    }


def main(argv=None, game=None):
    """The command line (see the module doc); `game` as `run` takes it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=4)
    parser.add_argument("--warm", type=int, default=4)
    parser.add_argument("--out", default=str(RESULTS / "first_reply.json"))
    parser.add_argument("--keep-log", help="copy the server's log here (to see where time goes)")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds between the server being up and the first line")
    args = parser.parse_args(argv)
    document = run(args.starts, args.warm, keep_log=args.keep_log, pause=args.pause,
                   game=game)
    print(json.dumps({k: document[k] for k in ("first_reply_s", "model_asked_after_s",
                                                "warm_median_s", "ratio", "target_met")}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    return document


if __name__ == "__main__":
    main()
