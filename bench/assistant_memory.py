"""
What each loaded assistant holds in the game process, holder by holder (issue 33's RSS target).

    .venv/bin/python -m bench.assistant_memory --world DIR [--out PATH]

DIR is a world kept by `bench.scale --keep DIR` (its SQLite database and semantic tier). In this
process, on a copy of it, Django + Evennia start and run what a reload runs (the tickers
restored, every script's `at_server_start`), then for every assistant but the first (which pays
the process's one-off costs: imports, models, the store's opening) it measures with
`tracemalloc`, as bytes still allocated after each step:

- `light_documents`: the documents an idle tick reads (what a reload leaves in memory);
- `heavy_documents`: each heavy document (`documents.Document.heavy`), read as plain data;
- `derived`: each cache derived from them after a round of searches (the prompt's recall, a
  journal search, a recall of scenes: the BM25 index, the vector matrices, the nodes' matrix),
  and `runtime_caches`, what the runtime keeps beside them (the embedded store's recall mirror);
- `released`: what remains once every assistant is released from residency
  (`plumbing.residency`), i.e. what a loaded assistant that is not resident holds;
- and the process's RSS after each phase (VmRSS, after a garbage collection).

It also times a journal search warm and right after a release (the rebuild). Figures are in
KB per assistant (mean). Results go to `bench/results/assistant_memory.json`.
"""

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "assistant_memory.json"
QUERIES = ("What about the dragon market?", "Who told me about the lantern?",
           "What happened at the harbour?")  # fmt: skip


def rss_mb():
    """The process's resident memory now (VmRSS), in MB, after a garbage collection."""
    gc.collect()
    with open("/proc/self/statm") as statm:
        return round(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def traced():
    """Bytes allocated now and still alive (tracemalloc), after a garbage collection."""
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def boot(database, game_dir):
    """Django + Evennia on `database`, and what a reload runs; returns the assistants."""
    sys.path.insert(0, str(REPO))
    for name in [name for name in os.environ if name.startswith("EVENNIA_DB_")]:
        del os.environ[name]
    os.environ["DJANGO_SETTINGS_MODULE"] = "server.conf.settings"
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = database
    settings.GAME_DIR = game_dir
    settings.TEST_ENVIRONMENT = True
    import django

    django.setup()
    import evennia

    evennia._init()
    from evennia.objects.models import ObjectDB
    from evennia.scripts.models import ScriptDB
    from evennia.scripts.tickerhandler import TICKER_HANDLER

    from ai_assistant.handler import is_assistant
    from bench.inline import inline_threads

    inline_threads()
    TICKER_HANDLER.restore(True)
    ScriptDB.objects.update_scripts_after_server_start()
    return [obj for obj in ObjectDB.objects.all() if is_assistant(obj)]


def searches(npc, number=0):
    """A round of what a talking assistant searches: the prompt's recall, its tools."""
    import dataclasses

    from ai_assistant.agent.blocks.remembered import recall_query
    from ai_assistant.memory.recall.pipeline import recall
    from ai_assistant.tools.registry import execute_tool
    from bench.inline import fired

    ports = npc.assistant.ports()
    situation = {"events": [{"text": QUERIES[number % len(QUERIES)]}], "interlocutor": {},
                 "history": []}
    fired(recall(ports, dataclasses.replace(recall_query(ports, situation),
                                            wait_for_store=True)))
    for tool in ("search_journal", "recall_scenes"):
        result = fired(execute_tool(tool, ports, {"query": f"{QUERIES[number % 3]} {number}"}))
        if not result.get("success"):
            raise RuntimeError(f"{tool} failed: {result}")


def measure(npcs):
    """The figures of the module doc, for `npcs[1:]` (the first one warms the process)."""
    from ai_assistant.attribute_reads import stored_documents
    from ai_assistant.memory.longterm.mirror import MIRROR_CACHE
    from ai_assistant.plumbing import documents, residency
    from ai_assistant.tools.catalogue import load_all_tools
    from ai_assistant.tools.registry import execute_tool
    from bench.inline import fired

    load_all_tools()
    first, measured = npcs[0], npcs[1:]
    for name in documents.REGISTRY:
        first.assistant.ports().state.get(name)
    searches(first)
    residency.RESIDENCY.resize(len(npcs) + 1)  # every assistant resident while measured
    residency.RESIDENCY.release_all()
    figures = {"assistants_measured": len(measured), "rss_mb": {"start": rss_mb()}}
    tracemalloc.start()
    start = traced()
    for npc in measured:  # as a reload leaves them: the light documents
        state = npc.assistant.ports().state
        for name in documents.REGISTRY:
            if not documents.heavy(name):
                state.get(name)
    light = traced()
    heavy = {}  # each heavy document as plain data, read on its own
    for npc in measured:
        for name in documents.REGISTRY:
            if documents.heavy(name):
                owner = npc.assistant.script if documents.on_script(name) else npc
                before = traced()
                value = stored_documents(owner, (name,))
                heavy[name] = heavy.get(name, 0) + traced() - before
                del value
    before = traced()
    for npc in measured:  # as the assistant's searches read them: into its state's cache
        state = npc.assistant.ports().state
        for name in documents.REGISTRY:
            if documents.heavy(name):
                state.get(name)
    read = traced() - before
    figures["rss_mb"]["documents_read"] = rss_mb()
    retained = 0
    for number, npc in enumerate(measured):
        before = traced()
        searches(npc, number)
        retained += traced() - before
    figures["rss_mb"]["searched"] = rss_mb()
    # each holder's size: the bytes freed when it alone is dropped (this process only measures)
    held, mirrored = {}, []
    for npc in measured:
        runtime = npc.assistant.runtime
        holders = [(f"derived.{name}", runtime.derived, name) for name in list(runtime.derived)]
        if MIRROR_CACHE in runtime.caches:
            mirrored.append(len(runtime.caches[MIRROR_CACHE]))
            holders.append((f"caches.{MIRROR_CACHE}", runtime.caches, MIRROR_CACHE))
        for label, place, name in holders:
            before = traced()
            del place[name]
            held[label] = held.get(label, 0) + before - traced()
    residency.RESIDENCY.release_all()
    released = traced()
    figures["heavy_documents_cached_after_release"] = sum(
        1 for npc in measured for owner in (npc, npc.assistant.script)
        for name in (owner.ndb.ai_state_cache or {}) if documents.heavy(name))
    figures["rss_mb"]["released"] = rss_mb()
    tracemalloc.stop()
    count = len(measured)

    def kb(size):
        return round(size / count / 1024, 1)

    figures["kb_per_assistant"] = {
        "light_documents": kb(light - start),
        "heavy_documents": {name: kb(size) for name, size in
                            sorted(heavy.items(), key=lambda pair: -pair[1])},
        "heavy_documents_total": kb(sum(heavy.values())),
        "heavy_documents_in_state": kb(read),
        "searches_retained": kb(retained),
        "held_by_the_assistant": {label: kb(size) for label, size in
                                  sorted(held.items(), key=lambda pair: -pair[1])},
        "held_process_wide": kb(retained - sum(held.values())),
        "released": kb(released - start),
    }
    figures["memories_mirrored_per_assistant"] = (round(statistics.fmean(mirrored), 1)
                                                  if mirrored else 0)
    spent = {"warm": [], "after_release": []}
    for label in spent:
        for number, npc in enumerate(measured):
            if label == "after_release":
                npc.assistant.runtime.release()
            started = time.perf_counter()
            fired(execute_tool("search_journal", npc.assistant.ports(),
                               {"query": f"{QUERIES[number % 3]} ({label} {number})"}))
            spent[label].append((time.perf_counter() - started) * 1000)
    figures["search_journal_ms"] = {label: round(statistics.median(values), 2)
                                    for label, values in spent.items()}
    return figures


def run(world):
    """Measure a kept world (on a copy of it); returns the results document."""
    with (tempfile.TemporaryDirectory(prefix="ai_assistant_memory_") as folder,
          tempfile.TemporaryDirectory(prefix="ai_assistant_memory_") as game):
        database = os.path.join(folder, "bench.db3")
        shutil.copy2(os.path.join(world, "bench.db3"), database)
        shutil.copytree(os.path.join(world, "game"), game, dirs_exist_ok=True)
        npcs = boot(database, game)
        if len(npcs) < 2:
            raise SystemExit("the world needs at least 2 assistants (the first warms up)")
        figures = measure(npcs)
        from ai_assistant.memory.longterm.mem0_store import close_all_stores

        close_all_stores()
    return {"benchmark": "assistant_memory", "world": str(world),
            "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), **figures}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", required=True, help="a world kept by bench.scale --keep")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    if not os.path.exists(os.path.join(args.world, "bench.db3")):
        parser.error(f"no kept world in {args.world} (bench.scale --keep DIR makes one)")
    document = run(args.world)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, indent=2))
    return document


if __name__ == "__main__":
    main()
