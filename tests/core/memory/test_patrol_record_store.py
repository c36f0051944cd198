"""What the memory patrol keeps between runs (`memory.patrol_record.PatrolRecord`)."""

from support import make_ports

from ai_assistant.memory.patrol_record import PatrolRecord

# what the assistant wrote with no scenes named: its own thought, at an inference's trust
OWN_THOUGHT = {"speaker_id": None, "speaker": None, "channel": "own", "trust": 0.6,
               "derived_from": []}


def test_the_diary_keeps_one_entry_a_day_and_its_last_days_only():
    ports = make_ports(overrides={"nodes.diary_kept": 2})
    record = PatrolRecord(ports)
    record.write_diary("2025-01-01", "first", "2025-01-01T22:00:00Z")
    record.write_diary("2025-01-02", "second", "2025-01-02T22:00:00Z")
    record.write_diary("2025-01-02", "second, rewritten", "2025-01-02T23:00:00Z")
    record.write_diary("2025-01-03", "third", "2025-01-03T22:00:00Z")
    diary = record.diary()
    assert sorted(diary) == ["2025-01-02", "2025-01-03"]
    assert diary["2025-01-02"] == {"date": "2025-01-02", "text": "second, rewritten",
                                   "updated_at": "2025-01-02T23:00:00Z",
                                   "provenance": OWN_THOUGHT}
    assert ports.state.get("diary") == diary  # the document game makers read


def test_the_think_notes_are_replaced_as_a_whole():
    record = PatrolRecord(make_ports())
    assert record.think_notes() == {}
    record.write_think_notes(["ask Bob", "fix the sign"], "2025-01-01T22:00:00Z")
    record.write_think_notes(["buy wood"], "2025-01-02T22:00:00Z")
    assert record.think_notes() == {"text": "- buy wood", "bullets": ["buy wood"],
                                    "updated_at": "2025-01-02T22:00:00Z",
                                    "provenance": OWN_THOUGHT}


def test_runs_are_counted_with_their_last_report():
    ports = make_ports()
    record = PatrolRecord(ports)
    assert record.last_run_at() is None
    record.record_run({"finished_at": "2025-01-01T12:00:00Z", "steps": {}})
    record.record_run({"finished_at": "2025-01-02T12:00:00Z", "steps": {"notes": 3}})
    stored = ports.state.get("patrol_state")
    assert record.last_run_at() == "2025-01-02T12:00:00Z"
    assert stored["runs"] == 2 and stored["last_report"]["steps"] == {"notes": 3}


def test_the_sleep_patrolled_is_remembered():
    record = PatrolRecord(make_ports())
    assert record.patrolled_sleep() is None
    record.mark_sleep_patrolled("2025-01-01T02:00:00Z")
    assert record.patrolled_sleep() == "2025-01-01T02:00:00Z"


def test_the_diary_queue_takes_each_node_once_and_lets_written_ones_go():
    record = PatrolRecord(make_ports())
    record.queue_for_diary(["n1", "n2"])
    record.queue_for_diary(["n2", "n3"])
    assert record.diary_pending() == ["n1", "n2", "n3"]
    record.written_in_diary(node_id for node_id in ("n1", "n3"))
    assert record.diary_pending() == ["n2"]
    record.record_run({"finished_at": "2025-01-01T12:00:00Z"})
    assert record.diary_pending() == ["n2"]  # a run's record keeps the queue
    record.clear_diary_pending()
    assert record.diary_pending() == []
