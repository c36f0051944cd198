"""The mode and sleep state store (`workspace.mode.Mode`): its verbs."""

from datetime import timedelta

import pytest
from support import make_ports

from ai_assistant.plumbing.ports import MemoryState
from ai_assistant.workspace.mode import COMPACTING, DREAMING, HISTORY_LENGTH, Mode


def test_a_new_assistant_is_awake_with_nothing_recorded():
    mode = Mode(make_ports())
    assert mode.current() == "awake" and not mode.asleep()
    assert mode.recorded() is None  # never switched: a sleep step is not "woken"
    assert mode.phase() is None and mode.sleep_state() == {} and mode.awake_state() == {}
    assert mode.history() == [] and mode.sleep_request() is None
    assert mode.ticks() == 0 and mode.skipped_ticks() == 0 and mode.last_sleep_tick() is None


def test_a_switch_records_where_it_came_from_and_is_kept_in_the_history():
    ports = make_ports()
    mode = Mode(ports)
    assert mode.switch("sleep", "tired") == "awake"
    ports.clock.advance(minutes=5)
    assert mode.switch("sleep", "again") is None  # already there: nothing recorded
    assert mode.switch("awake", "morning") == "sleep"
    assert mode.current() == "awake" and mode.recorded() == "awake"
    assert [(c["from"], c["to"], c["reason"]) for c in mode.history()] == [
        ("awake", "sleep", "tired"), ("sleep", "awake", "morning")]
    assert mode.history()[0]["time"] == "2025-01-01T12:00:00Z"
    assert mode.history()[1]["time"] == "2025-01-01T12:05:00Z"
    assert ports.state.get("operating_mode") == "awake"  # the document game makers read


def test_the_history_keeps_the_last_changes_only():
    mode = Mode(make_ports())
    for number in range(HISTORY_LENGTH + 5):
        mode.switch("sleep" if number % 2 == 0 else "awake", f"change {number}")
    history = mode.history()
    assert len(history) == HISTORY_LENGTH
    assert history[-1]["reason"] == f"change {HISTORY_LENGTH + 4}"
    assert history[0]["reason"] == "change 5"


def test_an_unknown_mode_is_refused_and_changes_nothing():
    mode = Mode(make_ports())
    with pytest.raises(ValueError, match="unknown mode 'napping'"):
        mode.switch("napping", "why not")
    assert mode.recorded() is None and mode.history() == []


def test_a_sleep_is_recorded_counted_asked_to_end_and_closed():
    ports = make_ports()
    mode = Mode(ports)
    mode.enter_sleep("scheduled")
    assert mode.sleep_state() == {"started_at": "2025-01-01T12:00:00Z", "reason": "scheduled",
                                  "ticks": 0, "wake_requested": None}
    mode.set_phase(COMPACTING)
    assert mode.count_sleep_tick()["ticks"] == 1
    assert mode.count_sleep_tick()["ticks"] == 2
    mode.request_wake("admin Bob")
    assert mode.sleep_state()["wake_requested"] == "admin Bob"
    assert mode.sleep_state()["ticks"] == 2  # asking to wake keeps the count
    mode.set_phase(DREAMING)
    assert mode.phase() == DREAMING

    mode.wake(ports.clock.now() + timedelta(minutes=30))
    assert mode.sleep_state() == {}
    assert mode.awake_state() == {"awake_ticks": 0,
                                  "auto_sleep_blocked_until": "2025-01-01T12:30:00Z"}
    mode.count_awake_tick()
    mode.count_awake_tick()
    assert mode.awake_state()["awake_ticks"] == 2


def test_a_copy_read_is_not_the_stored_document():
    ports = make_ports()
    mode = Mode(ports)
    mode.enter_sleep("tired")
    mode.sleep_state()["ticks"] = 99
    mode.history().append({"to": "sleep"})
    assert mode.sleep_state()["ticks"] == 0 and mode.history() == []


def test_the_wish_to_sleep_is_taken_once():
    ports = make_ports()
    mode = Mode(ports)
    assert mode.take_sleep_request() is None
    mode.request_sleep("quiet room")
    assert mode.sleep_request() == {"reason": "quiet room", "time": "2025-01-01T12:00:00Z"}
    assert mode.take_sleep_request()["reason"] == "quiet room"
    assert mode.take_sleep_request() is None and mode.sleep_request() is None


def test_ticks_and_skipped_ticks_are_counted_apart():
    mode = Mode(make_ports(state=MemoryState({"tick_count": None})))
    mode.record_tick()
    mode.record_tick()
    mode.skip_tick()
    assert mode.ticks() == 2 and mode.skipped_ticks() == 1


def test_the_last_sleep_tick_is_kept():
    mode = Mode(make_ports())
    report = {"phase": DREAMING, "steps": {"patrol": {"skipped": "x"}}, "woke": None,
              "time": "2025-01-01T12:00:00Z"}
    mode.record_sleep_tick(report)
    assert mode.last_sleep_tick() == report


def test_each_call_reads_the_state_afresh():
    ports = make_ports()
    first, second = Mode(ports), Mode(ports)
    first.switch("sleep", "tired")
    assert second.asleep()  # no copy kept by an owner
