"""
The reactor watchdog of `bench.reactor --blocks` (`bench/reactor_blocks.py`): a pass longer than
the threshold is written once, with how long it lasted and the stack it spent its time in.
"""

import json
import threading
import time

from bench import reactor_blocks


def a_long_pass():
    time.sleep(0.1)


def test_a_long_pass_is_written_once_with_its_length_and_stack(tmp_path):
    path = tmp_path / "passes.jsonl"
    beat, stop = [time.perf_counter()], threading.Event()
    watcher = threading.Thread(target=reactor_blocks._watch, daemon=True, args=(
        beat, threading.get_ident(), str(path), 0.02, stop))
    watcher.start()
    try:
        for _ in range(20):  # a reactor beating every millisecond or so
            beat[0] = time.perf_counter()
            time.sleep(0.001)
        beat[0] = time.perf_counter()
        a_long_pass()
        beat[0] = time.perf_counter()
        time.sleep(0.05)
    finally:
        stop.set()
        watcher.join(timeout=5)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    (record,) = [record for record in records
                 if any(reactor_blocks.innermost(stack).endswith(" a_long_pass")
                        for stack in record["stacks"])]
    assert 80 <= record["ms"] <= 2000
    summary = reactor_blocks.summarise(str(path))
    assert summary["max_ms"] == record["ms"]
    assert next(iter(summary["by_frame_ms"])).endswith(" a_long_pass")  # where the time went
    assert reactor_blocks.summarise(str(path), start=record["t"] + 1)["passes"] == 0


def test_a_collection_is_written_and_counted_in_the_pass_it_fell_in(tmp_path):
    import collections
    import gc

    path = tmp_path / "passes.jsonl"
    beat, stop, collected = [time.perf_counter()], threading.Event(), collections.deque()
    recorder = reactor_blocks.gc_recorder(collected)
    watcher = threading.Thread(target=reactor_blocks._watch, daemon=True, args=(
        beat, threading.get_ident(), str(path), 0.02, stop, collected))
    gc.callbacks.append(recorder)
    watcher.start()
    try:
        for _ in range(20):
            beat[0] = time.perf_counter()
            time.sleep(0.001)
        beat[0] = time.perf_counter()
        gc.collect()  # a full collection inside a long pass
        a_long_pass()
        beat[0] = time.perf_counter()
        time.sleep(0.05)
    finally:
        gc.callbacks.remove(recorder)
        stop.set()
        watcher.join(timeout=5)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert any(record["gc"] == 2 and record["ms"] >= 0 for record in records if "gc" in record)
    (slow,) = [record for record in records if "gc" not in record
               and any(reactor_blocks.innermost(stack).endswith(" a_long_pass")
                       for stack in record["stacks"])]
    assert 0 < slow["gc_ms"] <= slow["ms"]
    found = reactor_blocks.summarise(str(path))["gc"]
    assert found["collections"]["2"] >= 1 and found["passes_with_a_collection"] >= 1
    assert found["collecting_ms"] >= slow["gc_ms"]
