"""
Where the reactor's long passes are: a watchdog started inside the game's Server by
`bench.reactor --blocks PATH`.

A looping call beats on the reactor every millisecond. A watchdog thread checks the beat every
half millisecond; while it is older than `THRESHOLD` the reactor is inside one pass, and the
watchdog samples the reactor thread's stack (`sys._current_frames`). When the pass ends it
writes one JSON line: when it ended, how long it lasted and how many samples each stack got.
`summarise(path, start, end)` then weighs each stack by the time of the passes it was seen in.

It observes what a slow `look` waits behind, with the same pass lengths a player meets: a
stack that shows a system call (a file write, a socket send, a database commit) may be waiting
for the call or for the interpreter lock afterwards, which this cannot tell apart. One thing
that holds the lock is told apart: the garbage collector, which runs in whichever thread
allocated last and stops every other. Each collection is written as a line of its own
(`{"gc": generation, "ms", "collected"}`), and each long pass says how many of its
milliseconds a collection took (`gc_ms`).
"""

import collections
import gc
import json
import re
import sys
import threading
import time
import traceback

THRESHOLD = 0.004  # seconds without a beat: the passes a player notices beside a 3-4 ms look
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def start(path, threshold=THRESHOLD):
    """
    Start the beat and the watchdog in this process (the Server's, through `py`).

    Args:
        path (str): The JSON-lines file the passes are appended to.
        threshold (float): Seconds without a beat that make a long pass.

    Returns:
        str: A line for the admin who started it.
    """
    from twisted.internet import task

    beat = [time.perf_counter()]

    def tick():
        beat[0] = time.perf_counter()

    task.LoopingCall(tick).start(0.001)
    reactor_thread = threading.get_ident()
    collected = collections.deque()
    gc.callbacks.append(gc_recorder(collected))
    threading.Thread(target=_watch, args=(beat, reactor_thread, path, threshold, None,
                                          collected),
                     daemon=True, name="reactor-blocks").start()
    return f"reactor watchdog writing to {path}"


def gc_recorder(sink):
    """
    A `gc.callbacks` entry that appends each collection to `sink` as `(began, ended,
    generation, collected)` (`time.perf_counter` seconds).
    """
    began = []

    def on_collection(phase, info):
        now = time.perf_counter()
        if phase == "start":
            began[:] = [now]
        else:
            sink.append((began[0] if began else now, now, info.get("generation"),
                         info.get("collected", 0)))

    return on_collection


def _watch(beat, reactor_thread, path, threshold, stop=None, collected=None):
    """Watch `beat` (see the module doc) until `stop` (a `threading.Event`) is set, writing
    the collections `collected` receives (`gc_recorder`) as they come."""
    recent = collections.deque(maxlen=64)  # the last collections, for the passes they fell in
    with open(path, "a", encoding="utf-8") as out:
        current = None  # [the beat it began after, {stack: samples}, seconds so far]
        while stop is None or not stop.is_set():
            time.sleep(0.0005)
            while collected:
                began, ended, generation, freed = collected.popleft()
                recent.append((began, ended))
                out.write(json.dumps({"t": time.time(), "gc": generation,
                                      "ms": round((ended - began) * 1000, 2),
                                      "collected": freed}) + "\n")
            stale = time.perf_counter() - beat[0]
            if current is not None and current[0] != beat[0]:  # the pass is over
                ended = time.perf_counter()
                in_gc = sum(max(0.0, min(ended, stop_) - max(current[0], start_))
                            for start_, stop_ in recent)
                out.write(json.dumps({"t": time.time(), "ms": round(current[2] * 1000, 2),
                                      "gc_ms": round(in_gc * 1000, 2),
                                      "stacks": current[1]}) + "\n")
                out.flush()
                current = None
            if stale > threshold:
                frame = sys._current_frames().get(reactor_thread)
                stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
                if current is None:
                    current = [beat[0], {}, stale]
                current[1][stack] = current[1].get(stack, 0) + 1
                current[2] = stale


def innermost(stack):
    """`file:line function` of a stack's innermost frame."""
    frames = _FRAME.findall(stack)
    if not frames:
        return "?"
    path, line, function = frames[-1]
    return f"{path.rsplit('/', 1)[-1]}:{line} {function}"


def summarise(path, start=None, end=None, top=12):
    """
    The long passes between `start` and `end` (epoch seconds): how many, their lengths, and
    the milliseconds of them spent at each innermost frame.

    Returns:
        dict: `{"passes", "total_ms", "median_ms", "p90_ms", "max_ms", "by_frame_ms", "gc"}`;
        `gc`: the collections in that time (how many of each generation, their milliseconds
        in all and the longest), and the long passes a collection fell in, with its share of
        their time.
    """
    passes, runs = [], []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if (start is None or record["t"] >= start) and (end is None or record["t"] <= end):
                (runs if "gc" in record else passes).append(record)
    lengths = sorted(record["ms"] for record in passes)
    by_frame = collections.Counter()
    for record in passes:
        samples = sum(record["stacks"].values()) or 1
        for stack, count in record["stacks"].items():
            by_frame[innermost(stack)] += record["ms"] * count / samples

    def share(fraction):
        return lengths[min(len(lengths) - 1, int(len(lengths) * fraction))] if lengths else 0.0

    in_gc = [record for record in passes if record.get("gc_ms")]
    return {"passes": len(passes), "total_ms": round(sum(lengths), 2),
            "median_ms": share(0.5), "p90_ms": share(0.9),
            "max_ms": lengths[-1] if lengths else 0.0,
            "by_frame_ms": {frame: round(ms, 1) for frame, ms in by_frame.most_common(top)},
            "gc": {"collections": dict(sorted(collections.Counter(
                       str(run["gc"]) for run in runs).items())),
                   "total_ms": round(sum(run["ms"] for run in runs), 2),
                   "max_ms": max((run["ms"] for run in runs), default=0.0),
                   "passes_with_a_collection": len(in_gc),
                   "their_ms": round(sum(record["ms"] for record in in_gc), 2),
                   "collecting_ms": round(sum(record["gc_ms"] for record in in_gc), 2)}}
