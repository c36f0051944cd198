"""
How long the memory inspector's assistant page takes at scale, in headless Chromium.

    .venv/bin/python -m bench.inspector_page [--entries 5000] [--repeat 3] [--out PATH]

The page is made by the inspector's own view and loaded by Chromium exactly as the browser test
`tests/shell/test_inspector_scale.py` does it (that test asserts what does not depend on the
machine: the page's size and that it asks for nothing outside the game). This bench runs that
test `--repeat` times, each in a fresh pytest process with `--entries` journal entries and as
many long-term memories, and reads the timings the test records: the time the view took to make
the page, and Chromium's Navigation Timing (first paint, DOM ready, loaded) of a first visit and
of a visit again (the median of three). Target (5,000 entries and 5,000 memories): the page
and its stylesheets under 300 KB, made and loaded again in under a second. Results go to
`bench/results/inspector_page.json`, with the machine's load average beside them.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.machine import describe

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "inspector_page.json"
TEST = "tests/shell/test_inspector_scale.py::TestInspectorAtScale"
MOST_BYTES = 300 * 1024
MOST_SECONDS = 1.0


def measure_once(entries):
    """
    One run of the browser test at `entries`: the timings it recorded.

    Raises:
        RuntimeError: The test failed or was skipped (no Chromium), with pytest's last lines.
    """
    with tempfile.TemporaryDirectory() as folder:
        record = os.path.join(folder, "record.json")
        # a run from inside the suite's parallel workers is a plain run of its own
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
        env.update(INSPECTOR_SCALE_ENTRIES=str(entries), INSPECTOR_SCALE_RECORD=record)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", TEST],
            cwd=REPO, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(record):
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise RuntimeError(f"the inspector's browser test did not run through:\n{tail}")
        with open(record) as file:
            return json.load(file)


def summarise(runs):
    """The runs' figures (ms, KB) and whether the targets hold in their median."""
    made = [run["served_seconds"] * 1000 for run in runs]
    again = [run["again_median"]["load"] for run in runs]
    first = [run["first_visit"]["load"] for run in runs]
    total = [m + a for m, a in zip(made, again, strict=True)]
    size = runs[0]["page_bytes"] + runs[0]["stylesheet_bytes"]
    return {
        "page_kb": round(runs[0]["page_bytes"] / 1024, 1),
        "stylesheets_kb": round(runs[0]["stylesheet_bytes"] / 1024, 1),
        "made_ms": [round(value) for value in made],
        "first_visit_loaded_ms": [round(value) for value in first],
        "again_loaded_ms": [round(value) for value in again],
        "again_first_paint_ms": [round(run["again_median"]["paint"] or 0) for run in runs],
        "made_and_loaded_again_ms_median": round(statistics.median(total)),
        "requests": runs[0]["requests"],
        f"size_under_{MOST_BYTES // 1024}_kb": size < MOST_BYTES,
        f"made_and_loaded_under_{MOST_SECONDS:g}_s": statistics.median(total) / 1000
        < MOST_SECONDS,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=5000,
                        help="journal entries, and as many long-term memories")
    parser.add_argument("--repeat", type=int, default=3, help="fresh runs of the test")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    runs = [measure_once(args.entries) for _ in range(args.repeat)]
    result = {
        "benchmark": "inspector_page",
        "machine": describe(),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "entries": args.entries, "memories": args.entries, "runs": args.repeat,
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        **summarise(runs),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as file:
        json.dump(result, file, indent=1)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
