"""Consolidation's progress has one owner: `ConsolidationProgress(ports)`."""

from support import make_ports

from ai_assistant.memory.longterm.progress import ConsolidationProgress


def test_start_keeps_the_time_of_the_first_start():
    ports = make_ports()
    ConsolidationProgress(ports).start([1, 2])
    first = ConsolidationProgress(ports).in_flight()
    ports.clock.advance(minutes=5)
    ConsolidationProgress(ports).start([2, 3])
    again = ConsolidationProgress(ports).in_flight()
    assert again[1] == again[2] == first[1] and again[3] != first[1]


def test_failures_count_per_entry_and_a_finished_entry_is_forgotten():
    ports = make_ports()
    progress = ConsolidationProgress(ports)
    progress.start([1, 2])
    assert progress.count_extraction_failure([1, 2]) == {1: 1, 2: 1}
    assert progress.count_extraction_failure([1]) == {1: 2, 2: 1}
    progress.record_part(1, 0, ["m-0"])
    progress.record_part(1, 1, [])  # nothing stored: nothing recorded
    assert progress.parts(1) == {0: "m-0"}
    progress.finish(1, stored_count=3)
    assert progress.extraction_attempts() == {2: 1}
    assert progress.parts(1) == {} and 1 not in progress.in_flight()
    assert progress.document()["stored_total"] == 3


def test_recorded_parts_survive_a_fresh_owner_and_read_back_as_ints():
    ports = make_ports()
    ConsolidationProgress(ports).record_part("entry-0", 2, ["m-2", "m-2b"])
    assert ConsolidationProgress(ports).parts("entry-0") == {2: "m-2"}
