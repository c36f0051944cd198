"""Smoke-size run of bench/shell_tick.py (it boots its own Django, so in a subprocess)."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_shell_tick_benchmark_runs(tmp_path):
    out = tmp_path / "shell_tick.json"
    subprocess.run([sys.executable, "-m", "bench.shell_tick", "--ticks", "100", "--out",
                    str(out)], cwd=REPO, check=True, capture_output=True, timeout=300)
    result = json.loads(out.read_text())
    assert result["ticks"] == 100 and result["cpu_ms_per_tick"] > 0
    # 150 ticks in all (50 warm-up): counters reach the database every 12 ticks, the cycle
    # starting at a point of the assistant's own (so the last flush is one of the last 12)
    assert result["flush_every"] == 12
    assert 150 - 12 < result["tick_count_in_database"] <= 150
