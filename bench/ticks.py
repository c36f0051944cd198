"""
CPU cost of the assistant's periodic work, and how it grows with the journal.

    .venv/bin/python -m bench.ticks [--sizes 100,1000,10000] [--repeat N] [--out PATH]

For each journal size N (entries, oldest a year back, mixed speakers and importance) it times,
with `time.process_time` (CPU) and `time.perf_counter` (wall), over many repetitions:

- idle awake tick: the core path of `AssistantScript.at_assistant_tick` ->
  `npc.assistant.run_tick("awake")` with nothing to answer (tick counter, awake state,
  sleep-schedule check, pending-events check), on an in-memory `MemoryState`. It does not
  include Evennia's Attribute write (the game's `AttributeState.set`), which is measured
  separately by the smoke test inside Django (`tests/bench/test_bench_smoke.py`);
- sleep tick: `run_sleep_tick` in mechanical mode (no LLM, no semantic store), both phases;
- `add_journal_entry` through `execute_tool` (a full journal: each add also auto-prunes);
- `search_journal` through `execute_tool` with the tool's default settings (a new question
  each call, so the tool cache does not answer), also right after the assistant was released
  from residency (`search_after_release`: its index and vector matrix built again);
- prompt recall with N consolidated memories (the long-term store's mirror) beside a journal
  of 100 entries: `prompt_recall_reactor` is what building the prompt's "What you remember"
  block costs on the reactor (the query, reading the journal, the block's text; the corpus and
  the ranking are handed to the worker pool, here answered at once), `prompt_recall_worker` the
  ranking in the worker pool (embedding the query, the dense product, BM25, the budget), and
  `prompt_recall_worker_after_write` the same when a new journal entry changed the corpus.

Results (median and p95 per call, in ms) go to `bench/results/ticks.json`.
"""

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from twisted.internet import defer

from ai_assistant.plumbing.ports import AssistantPorts, FixedClock, MemoryState, iso
from ai_assistant.plumbing.settings import Settings
from ai_assistant.workspace.mode import Mode
from bench.machine import describe

RESULTS = Path(__file__).resolve().parent / "results"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
WORDS = ("dragon market bread harbour lantern sword quest festival garden tower river forge "
         "library potion knight merchant storm rumour treasure map lute wolf bridge").split()
SPEAKERS = ("Alice", "Bob", "Carol", "Dmitri", "Eve")
QUESTIONS = ("Where did Alice see the dragon?", "What did Bob sell at the market?",
             "When is the festival at the tower?", "Who told me about the treasure map?",
             "What happened at the bridge during the storm?")  # fmt: skip


def make_journal(size, seed=7):
    """A journal document of `size` plausible entries, oldest first."""
    rng = random.Random(seed)
    entries = []
    for number in range(1, size + 1):
        moment = NOW - timedelta(hours=(size - number) * 24 * 365 / max(size, 1))
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20)))
        entries.append({
            "id": number, "timestamp": iso(moment),
            "content": f"{rng.choice(SPEAKERS)} said the {text}.",
            "source_type": "direct", "source_trust": 0.9,
            "source_entity": rng.choice(SPEAKERS), "importance": rng.randint(1, 10),
            "importance_method": "heuristic", "tags": [], "related_projects": [],
        })  # fmt: skip
    return {"entries": entries, "entry_count": size, "max_entries": size,
            "last_reflection": None, "consolidated_entry_ids": []}  # fmt: skip


def make_ports(size):
    settings = Settings(overrides={"journal.max_entries": size})
    state = MemoryState()
    state.data["journal"] = make_journal(size)
    # no reactor runs here: the tool's embedding, which the game runs in the CPU worker pool,
    # runs in place, so `search_journal` is the whole search, embedding included
    return AssistantPorts(key=f"ticks-{size}", name="Ticker", state=state,
                          clock=FixedClock(NOW), settings=settings,
                          run_cpu_bound=defer.maybeDeferred)  # fmt: skip


def idle_awake_tick(ports):
    """
    The idle awake tick's core path (AssistantScript.at_assistant_tick + run_tick("awake")).
    """
    from ai_assistant.sleep import modes

    state = ports.state
    state.set("tick_count", (state.get("tick_count") or 0) + 1)
    awake = dict(state.get("awake_state") or {})
    awake["awake_ticks"] = awake.get("awake_ticks", 0) + 1
    state.set("awake_state", awake)
    should_sleep, target, _ = modes.check_sleep_schedule(ports)
    if should_sleep and target == "sleep":
        return "sleep"
    if not state.get("pending_events"):
        return None
    return "work"


def timed(func, repeat):
    """
    Returns:
        dict: CPU and wall time per call (ms): median, p95, mean; and the repetitions.
    """
    cpu, wall = [], []
    for number in range(repeat):
        started_cpu, started_wall = time.process_time(), time.perf_counter()
        func(number)
        cpu.append((time.process_time() - started_cpu) * 1000)
        wall.append((time.perf_counter() - started_wall) * 1000)

    def summary(values):
        ordered = sorted(values)
        return {"median": round(statistics.median(ordered), 4),
                "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4),
                "mean": round(statistics.fmean(ordered), 4)}  # fmt: skip

    return {"repeat": repeat, "cpu_ms": summary(cpu), "wall_ms": summary(wall)}


def run_tool(ports, name, arguments):
    from ai_assistant.tools.registry import execute_tool

    results = []
    execute_tool(name, ports, arguments).addBoth(results.append)
    if not results or not isinstance(results[0], dict) or not results[0].get("success"):
        raise RuntimeError(f"{name} failed: {results}")
    return results[0]


def measure_size(size, repeat):
    from ai_assistant.sleep.cycle import run_sleep_tick

    result = {}
    ports = make_ports(size)
    result["idle_awake_tick"] = timed(lambda _: idle_awake_tick(ports), repeat * 10)

    ports = make_ports(size)
    reports = []

    def sleep_tick(_):
        run_sleep_tick(ports, lambda target, reason: None).addBoth(reports.append)

    Mode(ports).switch("sleep", "benchmark")
    result["sleep_tick"] = timed(sleep_tick, max(5, repeat // 4))
    failures = [r for r in reports if not isinstance(r, dict)]
    if failures:
        raise RuntimeError(f"sleep tick failed: {failures[0]}")
    result["sleep_tick"]["phases"] = sorted({r["phase"] for r in reports})
    result["sleep_tick"]["steps"] = sorted({name for r in reports for name in r["steps"]})

    ports = make_ports(size)
    result["add_journal_entry"] = timed(
        lambda n: run_tool(ports, "add_journal_entry", {
            "content": f"Note {n}: {QUESTIONS[n % len(QUESTIONS)]} asked by a visitor",
            "source_type": "direct", "source_entity": SPEAKERS[n % len(SPEAKERS)]}),
        repeat,
    )  # fmt: skip

    ports = make_ports(size)
    run_tool(ports, "search_journal", {"query": "warm up the index"})
    result["search_journal"] = timed(
        lambda n: run_tool(ports, "search_journal",
                           {"query": f"{QUESTIONS[n % len(QUESTIONS)]} ({n})"}),
        repeat,
    )  # fmt: skip
    # the first search after a write rebuilds the index: measure that too
    ports = make_ports(size)

    def search_after_write(n):
        run_tool(ports, "add_journal_entry", {"content": f"Fresh news number {n}"})
        run_tool(ports, "search_journal", {"query": QUESTIONS[n % len(QUESTIONS)] + f" {n}"})

    result["add_then_search"] = timed(search_after_write, max(5, repeat // 4))
    # an assistant no longer resident (`plumbing.residency`) searches with its index and its
    # vector matrix built again (the vectors of its texts still in the process-wide table)
    ports = make_ports(size)
    run_tool(ports, "search_journal", {"query": "warm up the vectors"})

    def search_after_release(n):
        ports.runtime.release()
        run_tool(ports, "search_journal", {"query": f"{QUESTIONS[n % len(QUESTIONS)]} ({n})"})

    result["search_after_release"] = timed(search_after_release, max(5, repeat // 4))
    result.update(measure_prompt_recall(size, repeat))
    return result


def make_recall_ports(size):
    """Ports with `size` consolidated memories mirrored and a journal of the last 100 lines."""
    from ai_assistant.memory.longterm.mirror import mirror_of

    ports = make_ports(100)
    memories = make_journal(size, seed=11)["entries"]
    mirror = mirror_of(ports)
    mirror.merge([{"id": f"memory-{entry['id']}", "memory": entry["content"],
                   "metadata": {"entry_id": f"old-{entry['id']}", "timestamp": entry["timestamp"],
                                "source_entity": entry["source_entity"]}}
                  for entry in memories])  # fmt: skip
    mirror.loaded = True
    return ports


def measure_prompt_recall(size, repeat):
    """The prompt's recall: its reactor part and its worker part (see the module doc)."""
    from twisted.internet import defer

    from ai_assistant.agent.blocks import remembered
    from ai_assistant.memory.recall import pipeline

    ports = make_recall_ports(size)
    handed = []

    def to_worker(func, *args):
        handed.append(args)  # the work the reactor hands over, answered at once
        return defer.succeed(([], ["- [1 June 2025] a recalled line"] * 10))

    def situation(n):
        return {"events": [{"text": f"{QUESTIONS[n % len(QUESTIONS)]} ({n})", "sender": "Alice",
                            "sender_id": "#5"}],
                "interlocutor": {"id": "#5", "name": "Alice"}, "history": []}  # fmt: skip

    def reactor_part(n):
        found = []
        pipeline.recall(ports, remembered.recall_query(ports, situation(n)),
                        runner=to_worker).addBoth(found.append)
        remembered.remembered_block(ports, {**situation(n), "recall": found[0][1]})

    result = {"prompt_recall_reactor": timed(reactor_part, repeat)}
    worker = pipeline._recall_in_worker
    worker(*handed[-1])  # warm up: the memories' vectors and the index
    result["prompt_recall_worker"] = timed(lambda n: worker(*_asked(handed, n)),
                                           max(5, repeat // 4))

    def after_write(n):
        run_tool(ports, "add_journal_entry", {"content": f"Fresh news number {n}"})
        found = []
        pipeline.recall(ports, remembered.recall_query(ports, situation(n)),
                        runner=to_worker).addBoth(found.append)
        worker(*handed[-1])

    result["prompt_recall_worker_after_write"] = timed(after_write, max(5, repeat // 10))
    return result


def _asked(handed, n):
    """The last work handed over, asking another question (so no cache answers)."""
    journal_entries, query, *rest = handed[-1]
    text = f"{QUESTIONS[n % len(QUESTIONS)]} ({n})"
    return journal_entries, type(query)(**{**vars(query), "text": text}), *rest


def run(sizes=(100, 1000, 10000), repeat=200, log=print):
    """
    Returns:
        dict: The results document.
    """
    from ai_assistant.tools.catalogue import load_all_tools

    load_all_tools()
    document = {
        "benchmark": "ticks",
        "machine": describe(),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": sys.version.split()[0],
        "what": "core path on MemoryState; mechanical mode; medians over repetitions",
        "sizes": {},
    }
    for size in sizes:
        started = time.perf_counter()
        document["sizes"][str(size)] = measure_size(size, repeat)
        log(f"size {size}: measured in {time.perf_counter() - started:.1f}s")
    document["targets"] = {
        "idle_awake_tick_cpu_ms<0.5": all(
            s["idle_awake_tick"]["cpu_ms"]["median"] < 0.5 for s in document["sizes"].values()
        ),
        "prompt_recall_reactor_at_10000_ms<=10": (
            document["sizes"]["10000"]["prompt_recall_reactor"]["wall_ms"]["p95"] <= 10
            if "10000" in document["sizes"] else None
        ),
        "search_at_10000_ms<50": (
            document["sizes"]["10000"]["search_journal"]["wall_ms"]["p95"] < 50
            if "10000" in document["sizes"] else None
        ),
    }
    return document


def print_table(document, out=sys.stdout):
    names = ("idle_awake_tick", "sleep_tick", "add_journal_entry", "search_journal",
             "add_then_search", "search_after_release", "prompt_recall_reactor",
             "prompt_recall_worker", "prompt_recall_worker_after_write")  # fmt: skip
    out.write(f"{'operation (CPU ms, median / p95)':<34}" + "".join(
        f"{size:>20}" for size in document["sizes"]) + "\n")  # fmt: skip
    for name in names:
        cells = "".join(
            f"{s[name]['cpu_ms']['median']:>11.3f} /{s[name]['cpu_ms']['p95']:>7.3f}"
            for s in document["sizes"].values()
        )
        out.write(f"{name:<34}{cells}\n")
    out.write(f"targets: {document['targets']}\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--out", default=str(RESULTS / "ticks.json"))
    args = parser.parse_args(argv)
    sizes = tuple(int(size) for size in args.sizes.split(","))
    document = run(sizes, args.repeat)
    print_table(document)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    return document


if __name__ == "__main__":
    main()
