"""
Operating modes: going to sleep, waking up, and when either should happen.

The core decides; the shell performs the switch. Functions that change mode take a
`transition(target, reason)` callable from the shell (the script's `set_mode`, which swaps the
ticker and tells the room), so this module never touches Evennia.

This module holds the rules of the two modes in one place: what the modes are, the
assistant's own request to sleep, the sleep schedule, the conditions that wake a sleeper and the
transitions both ways. The `go_to_sleep` tool (`tools.modes`) only records the request. An
admin can force a wake (`force_wake`); a player who talks to a sleeper gets one sign of it
(`sleep_sign`).

The mode and the sleep's state are kept by `workspace.mode.Mode`; this module owns the NPC's
`SLEEP_SCHEDULE` and reads `PENDING_EVENTS` (for urgent events).
"""

from datetime import timedelta

from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import parse_iso
from ai_assistant.workspace.mode import COMPACTING, DREAMING, Mode


def mode(ports):
    """The operating mode: "awake" or "sleep"."""
    return Mode(ports).current()


def enter_sleep(ports, reason, transition):
    """
    Go to sleep: the compacting phase starts, wake is deferred until it completes.

    Args:
        ports (AssistantPorts): The assistant.
        reason (str): Why (logged, kept in the mode history).
        transition (callable): `transition("sleep", reason)` from the shell.

    Returns:
        bool: False if it was already asleep.
    """
    state = Mode(ports)
    if state.asleep():
        return False
    state.enter_sleep(reason)
    transition("sleep", reason)
    state.set_phase(COMPACTING)
    return True


def take_sleep_request(ports, transition):
    """
    Go to sleep if the assistant asked to (called by the shell at the start of an awake tick).

    Returns:
        bool: True if it fell asleep.
    """
    request = Mode(ports).take_sleep_request()
    if not request:
        return False
    return enter_sleep(ports, f"own choice: {request.get('reason')}", transition)


def request_wake(ports, reason, transition):
    """
    Wake now, or as soon as the compacting phase completes.

    Returns:
        str: What happened, for the admin: "awake", "already awake" or
        "wake deferred: compacting ...".
    """
    state = Mode(ports)
    if not state.asleep():
        # an admin waking an awake assistant still means "start thinking again"
        if clear_emergency_stop(ports):
            return "already awake (emergency stop cleared)"
        return "already awake"
    if (state.phase() or COMPACTING) == COMPACTING:
        state.request_wake(reason)
        return ("wake deferred: compacting memories; it will wake as soon as "
                "consolidation completes")
    perform_wake_transition(ports, reason, transition)
    return "awake"


def force_wake(ports, reason, transition):
    """
    Wake now, whatever the phase: an admin's `@assistant/wake/force`.

    Waking in the compacting phase leaves the rest of the compacting for the next sleep: a
    consolidation batch in flight stops between two entries (it checks the mode), and what
    was stored but not yet marked is found again by consolidation's store lookup, so nothing
    is consolidated twice.

    Returns:
        str: What happened, for the admin.
    """
    state = Mode(ports)
    if not state.asleep():
        return request_wake(ports, reason, transition)
    compacting = (state.phase() or COMPACTING) == COMPACTING
    perform_wake_transition(ports, f"{reason} (forced)", transition)
    if compacting:
        return "awake (forced: compacting was interrupted; it goes on at the next sleep)"
    return "awake (forced)"


def perform_wake_transition(ports, reason, transition):
    """
    The canonical wake: cooldown before auto-sleep, activity counter reset, sleep
    state cleared, emergency stop cleared, then the switch to awake.
    """
    cooldown = ports.settings.get("sleep.wake_cooldown_minutes")
    state = Mode(ports)
    state.wake(ports.clock.now() + timedelta(minutes=cooldown))
    clear_emergency_stop(ports)
    transition("awake", reason)
    state.set_phase(None)


def clear_emergency_stop(ports):
    """
    Let the LLM client call again after an emergency stop (wake and /config do this).

    Returns:
        bool: True if an emergency stop was in force.
    """
    if ports.llm is None or not hasattr(ports.llm, "clear_emergency_stop"):
        return False
    if not getattr(ports.llm, "emergency_stopped", False):
        return False  # nothing to clear, and nothing logged as cleared
    ports.llm.clear_emergency_stop()
    return True


def in_sleep_window(hour, start_hour, duration_hours):
    """
    Args:
        hour (int or float): The current hour of day.
        start_hour (int): When sleep starts.
        duration_hours (int): How long it lasts; windows may wrap past midnight (22:00-02:00).

    Returns:
        bool: True if `hour` is inside the window.
    """
    if duration_hours <= 0:
        return False
    if duration_hours >= 24:
        return True
    end = (start_hour + duration_hours) % 24
    if start_hour < end:
        return start_hour <= hour < end
    return hour >= start_hour or hour < end


def schedule(ports):
    """The sleep schedule: the settings' defaults overlaid with the NPC's `sleep_schedule`."""
    merged = {
        "enabled": ports.settings.get("sleep.enabled"),
        "sleep_start_hour": ports.settings.get("sleep.sleep_start_hour"),
        "sleep_duration_hours": ports.settings.get("sleep.sleep_duration_hours"),
        # the specification's schedule names the sleep tick rate; its one setting is ticks.sleep
        "tick_rate_sleep": ports.settings.get("ticks.sleep"),
        "min_awake_ticks": ports.settings.get("sleep.min_awake_ticks"),
    }
    merged.update(ports.state.get(documents.SLEEP_SCHEDULE) or {})
    return merged


def check_sleep_schedule(ports):
    """
    Should the schedule move the assistant to another mode now? (game clock)

    Returns:
        tuple: `(should_transition, target_mode, reason)`.
    """
    plan = schedule(ports)
    if not plan["enabled"]:
        return False, None, "schedule disabled"
    now = ports.clock.game_now()
    hour = now.hour + now.minute / 60
    inside = in_sleep_window(hour, plan["sleep_start_hour"], plan["sleep_duration_hours"])
    current = mode(ports)
    if inside and current == "awake":
        awake = Mode(ports).awake_state()
        if awake.get("awake_ticks", 0) < plan["min_awake_ticks"]:
            return False, None, "not awake long enough"
        blocked = parse_iso(awake.get("auto_sleep_blocked_until"))
        if blocked and ports.clock.now() < blocked:
            return False, None, "woken recently (cooldown)"
        return True, "sleep", f"scheduled sleep ({plan['sleep_start_hour']:02d}:00)"
    if not inside and current == "sleep":
        return True, "awake", "scheduled wake time reached"
    return False, None, "on schedule"


URGENT_CLASSIFICATIONS = ("direct_message", "direct_addressing")


def is_urgent(event):
    """Urgent events wake a light sleeper."""
    metadata = event.get("metadata") or {}
    return bool(
        event.get("urgent")
        or metadata.get("urgent")
        or (metadata.get("priority") or event.get("priority") or 0) >= 8
        or event.get("classification") in URGENT_CLASSIFICATIONS
    )


def check_wake_conditions(ports):
    """
    Should the sleeping assistant wake?

    Returns:
        tuple: `(should_wake, reason, deferred)`; `deferred` is True when it should wake but
        the compacting phase must finish first.
    """
    state = Mode(ports)
    if not state.asleep():
        return False, "not asleep", False
    reason = None
    asleep = state.sleep_state()
    if asleep.get("wake_requested"):
        reason = f"wake requested by {asleep['wake_requested']}"
    if reason is None:
        should, target, why = check_sleep_schedule(ports)
        if should and target == "awake":
            reason = why
    if reason is None:
        pending = PerceptionQueue(ports).waiting()
        urgent = [event for event in pending if is_urgent(event)]
        if urgent:
            reason = f"urgent event from {urgent[0].get('sender', 'someone')}"
    if reason is None:
        return False, "sleeping", False
    deferred = (state.phase() or COMPACTING) == COMPACTING
    return True, reason, deferred


# What a player who talks to a sleeper sees (in character, to that player alone): a deep
# (compacting) sleeper does not stir; a light (dreaming) one is woken by being addressed.
DEEP_SLEEP_SIGN = "{name} is fast asleep, breathing slowly, and does not stir."
LIGHT_SLEEP_SIGN = "{name} stirs in their sleep and blinks awake."


def sleep_sign(ports, event):
    """
    The one in-character sign of sleep a player gets when talking to the sleeping assistant.

    One per speaker per `sleep.sign_period` seconds, not one per line: the times are kept in
    the assistant's runtime (`caches["sleep_signs"]`), so a reload forgets them.

    Args:
        ports (AssistantPorts): The assistant.
        event (dict): What was heard (perception's event).

    Returns:
        str or None: The sign, or None (awake, not addressed, or shown recently).
    """
    if mode(ports) != "sleep" or event.get("classification") not in URGENT_CLASSIFICATIONS:
        return None
    shown = ports.runtime.cache("sleep_signs", dict)
    now = ports.clock.now()
    last = shown.get(event.get("sender_id"))
    if last is not None and (now - last).total_seconds() < ports.settings.get(
            "sleep.sign_period"):
        return None
    shown[event.get("sender_id")] = now
    light = Mode(ports).phase() == DREAMING
    return (LIGHT_SLEEP_SIGN if light else DEEP_SLEEP_SIGN).format(name=ports.name)


def wake_light_sleeper(ports, transition):
    """
    Wake at once when dreaming and someone addressed the assistant (urgent).

    A deep (compacting) sleeper is not woken: `check_wake_conditions` defers it until the
    compacting completes, as before.

    Returns:
        str or None: The reason it woke, or None.
    """
    state = Mode(ports)
    if not state.asleep() or state.phase() != DREAMING:
        return None
    should_wake, reason, deferred = check_wake_conditions(ports)
    if not should_wake or deferred:
        return None
    perform_wake_transition(ports, reason, transition)
    return reason
