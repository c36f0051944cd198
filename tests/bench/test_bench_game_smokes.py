"""
Short runs of the benchmarks that need a real game, `bench.first_reply` (one start, one reload,
one warm line) and `bench.reactor` (2 assistants, one asleep and compacting, one awake with a
small grown memory, 10 looks per run),
so they keep working: a real server, the scripted model, Ada answering.

They share one started server and scripted model (a start is most of a smoke run's time). The
first_reply run goes first: the reactor's baseline must still have no assistant but Ada, and a
reload leaves the server as it found it.
"""

import json

import pytest


@pytest.fixture(scope="module")
def bench_game():
    """(server, llm): a started game whose LLM is a scripted model server; stopped after."""
    from game_server import GameServer
    from scripted_llm import ScriptedLLMServer

    from bench.first_reply import llm_environment
    from bench.reactor import SERVER_SETTINGS

    llm = ScriptedLLMServer().start()
    # the reactor bench's settings: no login throttle, and its memory-growing helper importable
    server = GameServer(env=llm_environment(llm), settings=SERVER_SETTINGS)
    try:
        server.start()
        yield server, llm
    finally:
        left = server.stop()
        server.cleanup()
        llm.stop()
    assert not left, f"server processes left running: {left}"


def test_first_reply_smoke(tmp_path, bench_game):
    from bench import first_reply

    document = first_reply.main(["--starts", "2", "--warm", "1", "--pause", "0",
                                 "--out", str(tmp_path / "first_reply.json")], game=bench_game)
    written = json.loads((tmp_path / "first_reply.json").read_text())
    assert written["first_reply_s"] == document["first_reply_s"]
    assert len(document["first_reply_s"]) == 2
    # every line was answered, and the model was asked before the answer came
    for replied, asked in zip(document["first_reply_s"], document["model_asked_after_s"],
                              strict=True):
        assert asked is not None and 0 < asked <= replied
    assert len(document["warm_reply_s"]) == 1 and document["warm_median_s"] > 0
    assert len(document["reload_s"]) == 1 and document["reload_s"][0] > 0
    # the reloaded Server process started its warm-up from the inspector app's ready()
    assert document["early_warm_ups"] == 1
    # the lender stops the server (and checks that nothing is left: `bench_game`)
    assert document["server_tracebacks"] == 0 and document["processes_left_running"] is None


@pytest.mark.e2e
def test_reactor_smoke(tmp_path, bench_game):
    from bench import reactor

    document = reactor.main(["--assistants", "2", "--looks", "10", "--talkers", "1",
                             "--journal", "20", "--memories", "12", "--warmup", "2",
                             "--blocks", str(tmp_path / "passes.jsonl"),
                             "--spy", str(tmp_path / "spy.txt"),
                             "--out", str(tmp_path / "reactor.json")], game=bench_game)
    assert json.loads((tmp_path / "reactor.json").read_text())["load"] == document["load"]
    for run in ("baseline", "load"):
        assert document[run]["looks"] == 10
        assert 0.0 < document[run]["p50_ms"] <= document[run]["p99_ms"] < 60_000
    assert document["setup"]["warmup_s"] == 2
    assert document["during_load"]["talks_sent"] > 0
    assert document["during_load"]["talker_errors"] == []
    # the awake assistant recalled over its grown memory: the store's memories are mirrored,
    # and its journal holds the grown entries and what it heard since
    assert document["during_load"]["awake_memories_after"] == 12
    assert document["during_load"]["awake_journal_entries_after"] >= 12
    assert document["setup"]["memories_per_awake_assistant"] == {
        "journal_entries": 12, "long_term_memories": 12}
    # the reactor thread's CPU, read from /proc (a run this short may see no clock tick idle)
    cpu = document["reactor_cpu_ms_per_s"]
    assert 0.0 <= cpu["baseline"] <= 1000.0 and 0.0 < cpu["load"] <= 1000.0
    assert document["during_load"]["reactor_cpu_ms_per_llm_request"] > 0.0
    assert document["processes_left_running"] is None
    assert document["server_tracebacks"] == 0
    assert document["machine"]["python_loop_us"] > 0  # what its timings compare by
    # the watchdog ran in the Server: its file is there, and the passes it saw are summed up
    assert (tmp_path / "passes.jsonl").exists()
    passes = document["long_passes_under_load"]
    assert passes["passes"] >= 0 and passes["total_ms"] >= passes["max_ms"] >= 0
    # py-spy sampled the Server from outside: the reactor thread was seen, and what it did
    # is split by package (shares of its busy samples). Attaching to another process needs
    # ptrace rights, which a non-root user under Yama's ptrace_scope 1 does not have.
    profile = document["reactor_profile_under_load"]
    if "ermission" in profile.get("error", ""):
        pytest.skip(f"py-spy may not attach to the Server here: {profile['error']}")
    assert "error" not in profile, profile
    assert profile["samples"] >= profile["busy_samples"] > 0
    assert abs(sum(profile["self_by_owner"].values()) - 1.0) < 0.01


@pytest.mark.e2e
def test_reactor_floor_smoke(tmp_path, bench_game):
    """`--floor`: plain Evennia characters answer the same traffic, and are gone after."""
    from bench import reactor

    document = reactor.main(["--floor", "--assistants", "2", "--looks", "10", "--talkers", "1",
                             "--warmup", "2", "--llm-delay", "0.2",
                             "--out", str(tmp_path / "floor.json")], game=bench_game)
    assert document["setup"]["floor"] is True
    assert document["setup"]["memories_per_awake_assistant"] == {
        "journal_entries": 0, "long_term_memories": 0}
    for run in ("baseline", "load"):
        assert document[run]["looks"] == 10
    during = document["during_load"]
    # the floor characters answered the player's lines, by name, with Evennia's own `say`
    assert during["talks_sent"] > 0 and during["says_heard_by_talkers"] > 0
    assert during["talker_errors"] == []
    assert during["reactor_cpu_ms_per_talk"] > 0.0
    assert during["floor_characters_removed"] == 2
    assert document["server_tracebacks"] == 0
