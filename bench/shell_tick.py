"""
CPU cost of an idle awake tick in the real Evennia shell (Attributes, ticker callback, state).

`bench/ticks.py` times the core path on an in-memory store; this one boots Django and Evennia on
a throwaway SQLite database, creates an assistant, and times `AssistantScript.at_assistant_tick`
itself - what TICKER_HANDLER calls every 5 s - including its amortised Attribute writes.

    .venv/bin/python -m bench.shell_tick [--ticks 2000]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import describe

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "shell_tick.json"


def boot(database):
    """Django + Evennia on `database` (a fresh SQLite file), migrated."""
    sys.path.insert(0, str(REPO))
    # a SQLite file even under `make test-postgres`, whose variables point the demo's settings
    # at its cluster
    for name in [name for name in os.environ if name.startswith("EVENNIA_DB_")]:
        del os.environ[name]
    os.environ["DJANGO_SETTINGS_MODULE"] = "server.conf.settings"
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = database
    # its files (state logs) beside its database, never in this repository's game folder
    settings.AI_ASSISTANT_DATA_DIR = os.path.join(os.path.dirname(database), "ai_assistant_data")
    settings.AI_ASSISTANT = {**settings.AI_ASSISTANT, "memory": {"enabled": False}}
    settings.TEST_ENVIRONMENT = True
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import evennia

    evennia._init()


def settle_worker_pools(timeout=120.0):
    """Wait until the worker pools have no work left (what a server start began in them)."""
    from ai_assistant.plumbing import threads

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statistics = [pool._team.statistics() for pool in threads._pools.values()]
        if all(s.busyWorkerCount == 0 and s.backloggedWorkCount == 0 for s in statistics):
            return
        time.sleep(0.05)


def measure(ticks):
    from evennia.utils import create

    from ai_assistant.typeclasses import AssistantCharacter

    room = create.create_object("evennia.objects.objects.DefaultRoom", key="Bench room")
    npc = create.create_object(AssistantCharacter, key="Ada", location=room, home=room)
    from twisted.internet import reactor

    script = npc.assistant.script

    def tick():
        script.at_assistant_tick()
        reactor.runUntilCurrent()  # the work it scheduled for the next reactor turn

    for _ in range(50):  # warm caches
        tick()
    settle_worker_pools()  # the process's warm-up (models, client library) is not the tick
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(ticks):
        tick()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    flushed = script.attributes.get("tick_count")
    script.unsubscribe()
    return {
        "ticks": ticks,
        "cpu_ms_per_tick": round(cpu / ticks * 1000, 4),
        "wall_ms_per_tick": round(wall / ticks * 1000, 4),
        "tick_count_in_database": flushed,
        "flush_every": npc.assistant.ports().settings.get("ticks.flush_every"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--ticks", type=int, default=2000)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        boot(os.path.join(folder, "bench.db3"))
        result = measure(args.ticks)
    result.update(benchmark="shell_tick", machine=describe(), target_cpu_ms=0.5,
                  met=result["cpu_ms_per_tick"] < 0.5,
                  when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
