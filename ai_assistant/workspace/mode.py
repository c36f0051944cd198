"""
The assistant's mode and sleep state: awake or asleep, the phase of a sleep, the ticks.

`Mode` owns the documents that say where the assistant is in its day (`plumbing.documents`):

- `OPERATING_MODE` ("awake" or "sleep") and `MODE_HISTORY` (the last `HISTORY_LENGTH` changes);
- `SLEEP_PHASE` (`COMPACTING`, `DREAMING`, or None when awake) and `SLEEP_STATE`
  (`{"started_at", "reason", "ticks", "wake_requested"}` while asleep);
- `AWAKE_STATE` (`{"awake_ticks", "auto_sleep_blocked_until"}` since the last wake) and
  `SLEEP_REQUEST` (the assistant's own wish to sleep, taken on the next awake tick);
- `TICK_COUNT`, `SKIPPED_TICKS` and `LAST_SLEEP_TICK` (the last sleep tick's report).

It only records: the rules of when to sleep and wake live with the processes (`sleep.modes`,
`sleep.cycle`), and the shell performs a switch (`AssistantHandler.set_mode`: ticker, room).
The tools and the agent read it from here, so neither needs the sleep layer.
"""

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso

AWAKE = "awake"
ASLEEP = "sleep"
MODES = (AWAKE, ASLEEP)
COMPACTING = "compacting"
DREAMING = "dreaming"
HISTORY_LENGTH = 20
# A tick still running after this long is reported (logged once, shown by `@assistant`): the
# ticks after it are skipped until it ends. An awake turn is abandoned long before
# (`agent.awake`); a sleep tick's model and store calls end within minutes.
LONG_TICK_SECONDS = 600.0

# What a new assistant's script holds from the start, so a game maker reading
# `script.db.<name>` finds a value before the first tick.
SCRIPT_DOCUMENTS = (documents.OPERATING_MODE, documents.SLEEP_PHASE, documents.TICK_COUNT,
                    documents.SKIPPED_TICKS, documents.MODE_HISTORY)


class Mode:
    """
    The mode and sleep state of one assistant, read fresh from its state on every call.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports
        self.state = ports.state

    # --- awake or asleep --------------------------------------------------------------------

    def current(self):
        """The operating mode: "awake" or "sleep"."""
        return self.state.get(documents.OPERATING_MODE) or AWAKE

    def recorded(self):
        """
        The mode as last recorded, None when none was: a sleep step run on an assistant never
        switched (a test, a benchmark) is not taken for woken.
        """
        return self.state.get(documents.OPERATING_MODE)

    def asleep(self):
        """True while the assistant sleeps."""
        return self.current() == ASLEEP

    def switch(self, target, reason):
        """
        Record a change of mode and keep it in the history.

        Args:
            target (str): "awake" or "sleep".
            reason (str): Why.

        Returns:
            str or None: The mode it left; None when it was already in `target`.

        Raises:
            ValueError: For a mode that is neither.
        """
        if target not in MODES:
            raise ValueError(f"unknown mode {target!r}")
        current = self.current()
        if current == target:
            return None
        self.state.set(documents.OPERATING_MODE, target)
        history = self.history()
        history.append({"from": current, "to": target, "reason": reason,
                        "time": iso(self.ports.clock.now())})
        self.state.set(documents.MODE_HISTORY, history[-HISTORY_LENGTH:])
        return current

    def history(self):
        """The last mode changes, oldest first: `[{"from", "to", "reason", "time"}]`."""
        return list(self.state.get(documents.MODE_HISTORY) or [])

    # --- a sleep ----------------------------------------------------------------------------

    def phase(self):
        """The phase of the sleep under way (`COMPACTING`, `DREAMING`), None when unset."""
        return self.state.get(documents.SLEEP_PHASE)

    def set_phase(self, phase):
        """Move the sleep to `phase` (None once awake)."""
        self.state.set(documents.SLEEP_PHASE, phase)

    def sleep_state(self):
        """The sleep under way: `{"started_at", "reason", "ticks", "wake_requested"}` or {}."""
        return dict(self.state.get(documents.SLEEP_STATE) or {})

    def enter_sleep(self, reason):
        """Start the record of a new sleep (the switch itself is the shell's)."""
        self.state.set(documents.SLEEP_STATE, {
            "started_at": iso(self.ports.clock.now()), "reason": reason, "ticks": 0,
            "wake_requested": None})

    def count_sleep_tick(self):
        """Count one more tick of this sleep; returns the sleep's state with it counted."""
        asleep = self.sleep_state()
        asleep["ticks"] = asleep.get("ticks", 0) + 1
        self.state.set(documents.SLEEP_STATE, asleep)
        return asleep

    def request_wake(self, reason):
        """Ask the sleep to end as soon as it may (`reason` says who asked)."""
        asleep = self.sleep_state()
        asleep["wake_requested"] = reason
        self.state.set(documents.SLEEP_STATE, asleep)

    def wake(self, auto_sleep_blocked_until):
        """
        Close the sleep's record and start counting the awake ticks again.

        Args:
            auto_sleep_blocked_until (datetime): No scheduled sleep before then.
        """
        self.state.set(documents.AWAKE_STATE, {
            "awake_ticks": 0, "auto_sleep_blocked_until": iso(auto_sleep_blocked_until)})
        self.state.set(documents.SLEEP_STATE, None)

    def last_sleep_tick(self):
        """The report of the last sleep tick (`{"phase", "steps", "woke", "time"}`), or None."""
        return self.state.get(documents.LAST_SLEEP_TICK)

    def record_sleep_tick(self, report):
        """Keep the report of the sleep tick that just ran."""
        self.state.set(documents.LAST_SLEEP_TICK, report)

    # --- awake ------------------------------------------------------------------------------

    def awake_state(self):
        """Since the last wake: `{"awake_ticks", "auto_sleep_blocked_until"}` or {}."""
        return dict(self.state.get(documents.AWAKE_STATE) or {})

    def count_awake_tick(self):
        """Count one more awake tick."""
        awake = self.awake_state()
        awake["awake_ticks"] = awake.get("awake_ticks", 0) + 1
        self.state.set(documents.AWAKE_STATE, awake)

    def request_sleep(self, reason):
        """Record that the assistant chose to sleep (it falls asleep on its next awake tick)."""
        self.state.set(documents.SLEEP_REQUEST,
                       {"reason": reason, "time": iso(self.ports.clock.now())})

    def sleep_request(self):
        """The assistant's pending wish to sleep, `{"reason", "time"}`, or None."""
        return self.state.get(documents.SLEEP_REQUEST)

    def take_sleep_request(self):
        """The pending wish to sleep, now taken (so it is acted on once), or None."""
        request = self.sleep_request()
        if request:
            self.state.set(documents.SLEEP_REQUEST, None)
        return request

    # --- ticks ------------------------------------------------------------------------------

    def ticks(self):
        """Ticks run so far."""
        return self.state.get(documents.TICK_COUNT) or 0

    def skipped_ticks(self):
        """Ticks skipped because the previous one was still running."""
        return self.state.get(documents.SKIPPED_TICKS) or 0

    def record_tick(self):
        """Count a tick that runs."""
        self.state.set(documents.TICK_COUNT, self.ticks() + 1)

    def skip_tick(self):
        """Count a tick skipped while the previous one still ran."""
        self.state.set(documents.SKIPPED_TICKS, self.skipped_ticks() + 1)


def long_tick(running):
    """
    What to say of a tick still running: "a sleep tick has run for 12 min and not ended".

    Args:
        running (tuple or None): `(mode it started in, seconds it has run)`; None when no
            tick runs.

    Returns:
        str or None: None while it has run less than `LONG_TICK_SECONDS` (or none runs).
    """
    if running is None or running[1] < LONG_TICK_SECONDS:
        return None
    mode, seconds = running
    return (f"{'a sleep' if mode == ASLEEP else 'an awake'} tick has run for "
            f"{seconds / 60:.0f} min and not ended")
