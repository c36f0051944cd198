"""
The writer of a write-ahead log (`plumbing.state_log`): a header record that names who wrote it,
kept through every flush and never replayed as a document.
"""

import pytest

from ai_assistant.plumbing.state_log import StateLog, read_log, read_writer

pytestmark = pytest.mark.core
WRITER = ("sqlite:/games/castle/server/evennia.db3", 4242, "123456")


def test_a_new_log_names_its_writer_and_its_replay_holds_only_documents(tmp_path):
    path = str(tmp_path / "assistant_1_0.log")
    log = StateLog(path, writer=WRITER)
    log.append("character", "journal", ["one"])
    log.close()
    assert read_writer(path) == WRITER
    changes, records, damaged = read_log(path)
    assert changes == {("character", "journal"): ["one"]}
    assert (records, damaged) == (1, False)


def test_an_emptied_log_still_names_its_writer(tmp_path):
    path = str(tmp_path / "assistant_1_0.log")
    log = StateLog(path, writer=WRITER)
    empty = log.size
    log.append("script", "tick_count", 3)
    log.truncate()
    assert log.size == empty > 0
    log.close()
    assert read_writer(path) == WRITER
    assert read_log(path) == ({}, 0, False)


def test_a_log_taken_over_by_a_new_process_names_the_new_writer_once_emptied(tmp_path):
    path = str(tmp_path / "assistant_1_0.log")
    before = StateLog(path, writer=WRITER)
    before.append("character", "journal", ["before the crash"])
    before.close()
    after = StateLog(path, writer=("sqlite:/games/castle/server/evennia.db3", 5151, "999"))
    assert read_writer(path) == WRITER  # not emptied yet: the old writer's, still to replay
    assert read_log(path)[0] == {("character", "journal"): ["before the crash"]}
    after.truncate()
    after.close()
    assert read_writer(path)[1:] == (5151, "999")


def test_a_log_without_a_header_names_no_writer(tmp_path):
    path = str(tmp_path / "assistant_1_0.log")
    log = StateLog(path)
    log.append("character", "journal", ["old format"])
    log.close()
    assert read_writer(path) is None
    assert read_log(path)[0] == {("character", "journal"): ["old format"]}
    empty = StateLog(str(tmp_path / "empty.log"))
    empty.close()
    assert read_writer(str(tmp_path / "empty.log")) is None
