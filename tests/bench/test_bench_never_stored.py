"""
The never-stored trace at smoke size: two sessions two months apart, in the real shell (in its
own process: it boots its own Django), with the scripted paraphrasing model.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def conversation():
    def session(number, lines):
        return [{"speaker": speaker, "dia_id": f"D{number}:{i + 1}", "text": text}
                for i, (speaker, text) in enumerate(lines)]

    return [{"sample_id": "tiny-gap", "conversation": {
        "speaker_a": "Oriel", "speaker_b": "Bastian",
        "session_1_date_time": "9:00 am on 3 January, 2023",
        "session_1": session(1, [
            ("Oriel", "I started restoring an old clock tower in Hollowmere last week."),
            ("Bastian", "Thanks!"),
            ("Oriel", "The bells were cast in 1887 and two of them are cracked."),
        ]),
        "session_2_date_time": "9:00 am on 14 March, 2023",
        "session_2": session(2, [
            ("Bastian", "My brother Ansel opened a bakery near the harbour."),
            ("Oriel", "Ansel should sell rye loaves at the spring market."),
        ]),
    }, "qa": []}]  # fmt: skip


def test_never_stored_traces_the_small_talk_it_let_go(tmp_path):
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(conversation()))
    out = tmp_path / "never_stored.json"
    completed = subprocess.run(
        [sys.executable, "-m", "bench.never_stored", "--data", str(data), "--out", str(out),
         "--consolidation", "llm"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    document = json.loads(out.read_text())
    assert document["turns"] == 5
    # only the small talk is stored nowhere, pruned two months on, and the trace says so
    (traced,) = document["conversations"]
    assert [lost["dia_id"] for lost in traced["lost"]] == ["D1:2"]
    lost = traced["lost"][0]
    assert lost["text"] == "Thanks!" and lost["information"] == 0.0
    (events,) = lost["entries"].values()
    assert any(event.startswith("pruned low importance (importance 2 (llm), facts []")
               for event in events), events
    assert traced["model_calls"]["importance"] >= 2
