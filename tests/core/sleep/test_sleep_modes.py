"""Operating modes, wake conditions, the schedule and the sleep tick orchestrator (core)."""

from datetime import UTC, datetime

import pytest
import support
from twisted.internet import defer

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import FixedClock
from ai_assistant.sleep import cycle, modes


class Transitions:
    def __init__(self, state):
        self.state = state
        self.calls = []

    def __call__(self, target, reason):
        self.calls.append((target, reason))
        self.state.set("operating_mode", target)


def make_ports(hour=12, **overrides):
    clock = FixedClock(datetime(2025, 1, 1, hour, 0, tzinfo=UTC))
    ports = support.make_ports(key="a1", clock=clock, overrides=overrides)
    return ports, Transitions(ports.state)


def result_of(deferred):
    results = []
    deferred.addBoth(results.append)
    assert results
    return results[0]


@pytest.mark.parametrize(
    "hour, start, duration, inside",
    [(2, 2, 4, True), (5.9, 2, 4, True), (6, 2, 4, False), (1, 2, 4, False),
     (22, 22, 4, True), (23.5, 22, 4, True), (1, 22, 4, True), (2, 22, 4, False),
     (21, 22, 4, False), (12, 0, 0, False), (12, 0, 24, True)],
)
def test_sleep_window_wraps_around_midnight(hour, start, duration, inside):
    assert modes.in_sleep_window(hour, start, duration) is inside


def test_sleep_then_wake_is_deferred_while_compacting():
    ports, transition = make_ports()
    assert modes.enter_sleep(ports, "admin", transition) is True
    assert ports.state.get("sleep_phase") == "compacting"
    assert modes.enter_sleep(ports, "again", transition) is False
    outcome = modes.request_wake(ports, "admin", transition)
    assert outcome.startswith("wake deferred: compacting")
    assert transition.calls == [("sleep", "admin")]
    assert modes.check_wake_conditions(ports) == (True, "wake requested by admin", True)


def test_wake_in_dreaming_is_immediate_and_sets_cooldown():
    ports, transition = make_ports()
    modes.enter_sleep(ports, "admin", transition)
    ports.state.set("sleep_phase", "dreaming")
    assert modes.request_wake(ports, "admin", transition) == "awake"
    awake_state = ports.state.get("awake_state")
    assert awake_state["awake_ticks"] == 0
    assert awake_state["auto_sleep_blocked_until"] == "2025-01-01T13:00:00Z"
    assert ports.state.get("sleep_state") is None and ports.state.get("sleep_phase") is None
    assert modes.request_wake(ports, "admin", transition) == "already awake"


def test_urgent_event_wakes_a_light_sleeper_only():
    ports, transition = make_ports()
    modes.enter_sleep(ports, "tired", transition)
    ports.state.set(documents.PENDING_EVENTS, [{"sender": "Bob", "priority": 3, "urgent": False,
                                        "classification": "room_chatter"}])
    assert modes.check_wake_conditions(ports)[0] is False
    ports.state.set(documents.PENDING_EVENTS,
                    [{"sender": "Bob", "classification": "direct_message"}])
    assert modes.check_wake_conditions(ports) == (True, "urgent event from Bob", True)
    ports.state.set("sleep_phase", "dreaming")
    assert modes.check_wake_conditions(ports) == (True, "urgent event from Bob", False)
    ports.state.set(documents.PENDING_EVENTS, [{"sender": "Cy", "metadata": {"priority": 8}}])
    assert modes.check_wake_conditions(ports)[0] is True
    ports.state.set(documents.PENDING_EVENTS, [{"sender": "Cy", "metadata": {"urgent": True}}])
    assert modes.check_wake_conditions(ports)[0] is True


def test_schedule_sends_to_sleep_after_min_awake_ticks_and_cooldown():
    ports, transition = make_ports(hour=23, **{"sleep.enabled": True,
                                               "sleep.sleep_start_hour": 22})
    assert modes.check_sleep_schedule(ports) == (False, None, "not awake long enough")
    ports.state.set("awake_state", {"awake_ticks": 10,
                                    "auto_sleep_blocked_until": "2025-01-01T23:30:00Z"})
    assert modes.check_sleep_schedule(ports)[2] == "woken recently (cooldown)"
    ports.state.set("awake_state", {"awake_ticks": 10})
    assert modes.check_sleep_schedule(ports) == (True, "sleep", "scheduled sleep (22:00)")


def test_schedule_wakes_when_the_window_ends():
    ports, transition = make_ports(hour=7, **{"sleep.enabled": True})
    modes.enter_sleep(ports, "night", transition)
    ports.state.set("sleep_phase", "dreaming")
    assert modes.check_wake_conditions(ports) == (True, "scheduled wake time reached", False)


def test_sleep_tick_moves_to_dreaming_when_consolidation_completes(monkeypatch):
    ports, transition = make_ports()
    modes.enter_sleep(ports, "admin", transition)
    ran = []
    remaining = [1]

    def consolidation(ports):
        ran.append("consolidation")
        remaining[0] -= 1
        return defer.succeed({"completed": remaining[0] < 0})

    def failing(ports):
        raise RuntimeError("scoring broke")

    monkeypatch.setattr(cycle, "COMPACTING_STEPS",
                        (("scoring", failing), ("consolidation", consolidation)))
    report = result_of(cycle.run_sleep_tick(ports, transition))
    assert report["steps"]["scoring"] == {"error": "scoring broke"}
    assert ran == ["consolidation"]  # a failing step does not stop the next one
    assert ports.state.get("sleep_phase") == "compacting"
    result_of(cycle.run_sleep_tick(ports, transition))
    assert ports.state.get("sleep_phase") == "dreaming"
    assert ports.state.get("last_sleep_tick")["phase"] == "compacting"
    assert ports.state.get("sleep_state")["ticks"] == 2


def test_deferred_wake_happens_as_soon_as_compacting_completes(monkeypatch):
    ports, transition = make_ports()
    modes.enter_sleep(ports, "admin", transition)
    modes.request_wake(ports, "admin", transition)
    monkeypatch.setattr(cycle, "COMPACTING_STEPS",
                        (("consolidation", lambda p: {"completed": True}),))
    report = result_of(cycle.run_sleep_tick(ports, transition))
    assert report["woke"] == "wake requested by admin"
    assert transition.calls[-1] == ("awake", "wake requested by admin")


def test_dreaming_runs_every_step_in_order(monkeypatch):
    ports, transition = make_ports()
    modes.enter_sleep(ports, "admin", transition)
    ports.state.set("sleep_phase", "dreaming")
    order = []

    def make(name):
        def step(ports):
            order.append(name)
            if name == "entity_consolidation":
                raise ValueError("no llm")
            return {"done": name}
        return step

    steps = tuple((name, make(name)) for name, _ in cycle.DREAMING_STEPS)
    monkeypatch.setattr(cycle, "DREAMING_STEPS", steps)
    report = result_of(cycle.run_sleep_tick(ports, transition))
    assert order == [name for name, _ in steps]
    assert report["steps"]["entity_consolidation"] == {"error": "no llm"}
    assert report["steps"]["context_compaction"] == {"done": "context_compaction"}


def test_steps_are_functions_in_their_order():
    assert [name for name, _ in cycle.COMPACTING_STEPS] == ["importance_scoring", "consolidation"]
    assert [name for name, _ in cycle.DREAMING_STEPS] == [
        "memory_links", "link_cleanup", "entity_consolidation", "entity_pruning", "reflection",
        "episodic_pruning", "stale_conversations", "pre_compaction", "context_compaction",
        "patrol",
    ]
    assert all(callable(step) for _, step in cycle.COMPACTING_STEPS + cycle.DREAMING_STEPS)


def test_the_react_cycle_reaches_the_steps_that_run_one(monkeypatch):
    ports, transition = make_ports()
    modes.enter_sleep(ports, "admin", transition)
    ports.state.set("sleep_phase", "dreaming")
    seen = []

    def extraction(ports, *, run_cycle):
        seen.append(run_cycle)
        return {"ran": False}

    monkeypatch.setattr(cycle, "DREAMING_STEPS", (("pre_compaction", extraction),
                                                  ("other", lambda ports: {})))
    monkeypatch.setattr(cycle, "RUNS_A_CYCLE", (extraction,))
    result_of(cycle.run_sleep_tick(ports, transition, run_cycle=len))
    assert seen == [len]


def test_wake_clears_an_emergency_stop_even_when_awake():
    class Client:
        emergency_stopped = True

        def clear_emergency_stop(self):
            self.emergency_stopped = False

    ports, transition = make_ports()
    ports.llm = Client()
    outcome = modes.request_wake(ports, "admin", transition)
    assert outcome == "already awake (emergency stop cleared)"
    assert ports.llm.emergency_stopped is False
    assert modes.request_wake(ports, "admin", transition) == "already awake"


def test_go_to_sleep_tool_requests_sleep_for_the_next_tick():
    from ai_assistant.tools.catalogue import load_all_tools
    from ai_assistant.tools.registry import execute_tool

    load_all_tools()
    ports, transition = make_ports()
    out = result_of(execute_tool("go_to_sleep", ports, {"reason": "quiet night"}))
    assert out["success"] and transition.calls == []
    assert result_of(execute_tool("go_to_sleep", ports, {}))["success"] is False
    assert modes.take_sleep_request(ports, transition) is True
    assert transition.calls == [("sleep", "own choice: quiet night")]
    assert ports.state.get("sleep_phase") == "compacting"
    assert modes.take_sleep_request(ports, transition) is False
    out = result_of(execute_tool("go_to_sleep", ports, {"reason": "again"}))
    assert out == {"success": False, "error": "you are already asleep"}


# ----------------------------------------------------------------------------------------------
# A forced wake, the sign a player gets from a sleeper, a light sleeper woken by being addressed


def test_force_wake_wakes_mid_compacting_and_the_rest_of_the_tick_stops(monkeypatch):
    ports, transition = make_ports()
    modes.enter_sleep(ports, "admin", transition)
    ran = []

    def scoring(ports):
        ran.append("scoring")
        # the admin forces a wake while the tick runs (the LLM call was in flight)
        assert modes.force_wake(ports, "admin", transition).startswith(
            "awake (forced: compacting was interrupted")
        return {}

    def consolidation(ports):
        ran.append("consolidation")
        return {"completed": True}

    monkeypatch.setattr(cycle, "COMPACTING_STEPS",
                        (("scoring", scoring), ("consolidation", consolidation)))
    report = result_of(cycle.run_sleep_tick(ports, transition))
    assert ran == ["scoring"]  # what is left waits for the next sleep
    assert report["steps"]["interrupted"] == "woken before consolidation"
    assert ports.state.get("operating_mode") == "awake"
    assert ports.state.get("sleep_phase") is None  # not moved on to dreaming
    assert transition.calls[-1] == ("awake", "admin (forced)")
    # the next sleep starts with the compacting again
    modes.enter_sleep(ports, "night", transition)
    assert ports.state.get("sleep_phase") == "compacting"


def test_force_wake_of_a_dreaming_or_awake_assistant():
    ports, transition = make_ports()
    assert modes.force_wake(ports, "admin", transition) == "already awake"
    modes.enter_sleep(ports, "admin", transition)
    ports.state.set("sleep_phase", "dreaming")
    assert modes.force_wake(ports, "admin", transition) == "awake (forced)"
    assert ports.state.get("operating_mode") == "awake"


def addressed(sender_id="#5", classification="direct_addressing"):
    return {"sender_id": sender_id, "sender": "Bob", "classification": classification,
            "urgent": classification != "room_chatter", "kind": "say", "priority": 8}


def test_a_player_gets_one_sign_of_sleep_per_period_not_one_per_line():
    ports, transition = make_ports(**{"sleep.sign_period": 300})
    assert modes.sleep_sign(ports, addressed()) is None  # awake: no sign
    modes.enter_sleep(ports, "night", transition)
    first = modes.sleep_sign(ports, addressed())
    assert first == "Ada is fast asleep, breathing slowly, and does not stir."
    assert modes.sleep_sign(ports, addressed()) is None  # the same player, a second line
    assert modes.sleep_sign(ports, addressed("#6")) == first  # another player gets theirs
    assert modes.sleep_sign(ports, addressed("#7", "room_chatter")) is None  # not addressed
    ports.clock.advance(seconds=301)
    ports.state.set("sleep_phase", "dreaming")
    assert modes.sleep_sign(ports, addressed()) == "Ada stirs in their sleep and blinks awake."


def test_being_addressed_wakes_a_light_sleeper_at_once_but_not_a_deep_one():
    ports, transition = make_ports()
    modes.enter_sleep(ports, "night", transition)
    ports.state.set("pending_events", [addressed()])
    assert modes.wake_light_sleeper(ports, transition) is None  # compacting: deep sleep
    assert ports.state.get("operating_mode") == "sleep"
    ports.state.set("sleep_phase", "dreaming")
    assert modes.wake_light_sleeper(ports, transition) == "urgent event from Bob"
    assert ports.state.get("operating_mode") == "awake"


def test_the_emergency_stop_is_cleared_and_logged_only_when_one_was_active():
    class Client:
        emergency_stopped = False
        cleared = 0

        def clear_emergency_stop(self):
            self.cleared += 1

    ports, _ = make_ports()
    ports.llm = Client()
    assert modes.clear_emergency_stop(ports) is False and ports.llm.cleared == 0
    ports.llm.emergency_stopped = True
    assert modes.clear_emergency_stop(ports) is True and ports.llm.cleared == 1
