"""
The summary of `bench.reactor --spy` (`bench/reactor_profile.py`): the reactor thread's busy
samples from a py-spy raw file, by package and by this contrib's functions.
"""

import pytest

from bench import reactor_profile

# py-spy's raw format (`--threads --format raw`): the thread, then the frames outermost first,
# then how many samples had that stack. Invented stacks, in the shape py-spy writes them.
REACTOR, WORKER = "thread (101): MainThread", "thread (102): PoolThread-ai_assistant-cpu-0"
RUN = "run (twisted/internet/base.py:697)"
TURN = "_run_one (ai_assistant/reactor_turns.py:40)"
STACKS = [
    ([REACTOR, RUN, "EPollReactor.doPoll (twisted/internet/epollreactor.py:227)"], 50),
    ([REACTOR, RUN, TURN, "record (ai_assistant/durability.py:128)",
      "_append (ai_assistant/plumbing/state_log.py:168)"], 6),
    ([REACTOR, RUN, TURN, "save (evennia/utils/idmapper/models.py:300)",
      "execute (django/db/backends/sqlite3/base.py:359)"], 3),
    ([REACTOR, RUN, "dataReceived (twisted/protocols/amp.py:10)",
      "func (evennia/commands/default/general.py:90)"], 1),
    ([WORKER, "rank_items (ai_assistant/memory/recall/pipeline.py:200)"], 40),
    ([REACTOR], 2),
]
RAW = "".join(f"{';'.join(frames)} {count}\n" for frames, count in STACKS)


@pytest.fixture
def raw(tmp_path):
    path = tmp_path / "spy.txt"
    path.write_text(RAW)
    return str(path)


def test_only_the_reactor_thread_counts_and_its_poll_is_idle(raw):
    summary = reactor_profile.summarise(raw)
    # 50 in the poll, 6 + 3 + 1 busy, 2 with no frame (py-spy could not read the stack)
    assert summary["samples"] == 62
    assert summary["busy_samples"] == 10
    # the worker thread's ranking is not the reactor's
    assert not any("rank_items" in key for key in summary["ai_assistant_inclusive"])


def test_busy_samples_split_by_package_and_by_contrib_function(raw):
    summary = reactor_profile.summarise(raw)
    assert summary["self_by_owner"] == {"ai_assistant": 0.6, "django": 0.3, "evennia": 0.1}
    # a contrib frame anywhere on the stack: the database save under a turn counts as the turn's
    assert summary["under_ai_assistant"] == 0.9
    assert summary["ai_assistant_inclusive"]["_run_one (ai_assistant/reactor_turns.py)"] == 0.9
    assert summary["ai_assistant_inclusive"]["record (ai_assistant/durability.py)"] == 0.6
    assert next(iter(summary["self_top"])) == "_append (ai_assistant/plumbing/state_log.py)"
    # the game's own work beside it: the save under the turn, the command under AMP
    assert summary["evennia_inclusive"] == {
        "save (evennia/utils/idmapper/models.py)": 0.3,
        "func (evennia/commands/default/general.py)": 0.1}


def test_a_recording_without_py_spy_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(reactor_profile, "py_spy", lambda: None)
    recording = reactor_profile.Recording(1, tmp_path / "spy.txt").start()
    assert "py-spy is not installed" in recording.stop()


def test_a_recording_that_could_not_attach_names_why_once_stopped(tmp_path):
    # no process has this pid: py-spy exits at once, writing nothing; a file left by an
    # earlier run at the same path is not taken for this one's
    path = tmp_path / "spy.txt"
    path.write_text("thread (1): MainThread;run (twisted/internet/base.py:1) 5\n")
    recording = reactor_profile.Recording(2**22 + 12345, path).start()
    error = recording.stop()
    assert error and not path.exists()
    assert recording.stop() == error  # stopping again says the same

