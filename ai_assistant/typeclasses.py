"""
The Evennia shell: the assistant NPC and the script that gives it a heartbeat.

- `AssistantCharacter` hears its room (say, poses, whispers, arrivals/departures, `talk`) and
  queues what it perceives; it carries the cmdset of its tools.
- `AssistantScript` subscribes to TICKER_HANDLER (one ticker per NPC, `persistent=True`): every
  5 s while awake, every 60 s asleep. A tick starts the work and returns None at once; a tick
  that finds the previous one still running is skipped and counted.

All the thinking happens in the core (`ai_assistant.agent`, `ai_assistant.memory`, ...); this
module only wires it to the game.
"""

import json

from evennia import TICKER_HANDLER
from evennia.objects.objects import DefaultCharacter
from evennia.scripts.scripts import DefaultScript
from evennia.utils import logger
from evennia.utils.ansi import strip_ansi
from evennia.utils.utils import delay, make_iter
from twisted.internet import defer, reactor

from ai_assistant.adapters import build_ports
from ai_assistant.agent import perception
from ai_assistant.plumbing.ports import iso

SCRIPT_KEY = "ai_assistant"
ASSISTANT_TAG = ("ai_assistant", "ai_assistant")
MODES = ("awake", "sleep")


class AssistantScript(DefaultScript):
    """
    Drives one assistant's ticks. Lives on the assistant character (`obj`).

    Persistent state (`db`): `operating_mode`, `sleep_phase`, `tick_count`, `skipped_ticks`,
    `ticker_interval`, `mode_history`, plus the core documents the seeds keep on the script.
    """

    def at_script_creation(self):
        self.key = SCRIPT_KEY
        self.desc = "Drives an AI assistant's awake and sleep ticks"
        self.persistent = True
        self.db.operating_mode = "awake"
        self.db.sleep_phase = None
        self.db.tick_count = 0
        self.db.skipped_ticks = 0
        self.db.ticker_interval = None
        self.db.mode_history = []

    # --- ticker ---------------------------------------------------------------------------

    @property
    def ticker_idstring(self):
        return f"ai_assistant_{self.obj.id if self.obj else self.id}"

    def interval_for(self, mode):
        """Seconds between ticks in `mode` (settings `ticks.awake` / `ticks.sleep`)."""
        settings = self.obj.ai_ports().settings
        if mode == "sleep":
            return int(settings.get("ticks.sleep"))
        return int(settings.get("ticks.awake"))

    def subscribe(self):
        """Make sure exactly one ticker, at the current mode's rate, calls `at_assistant_tick`."""
        interval = self.interval_for(self.obj.operating_mode)
        old = self.db.ticker_interval
        if old and old != interval:
            self._remove_ticker(old)
        TICKER_HANDLER.add(interval, self.at_assistant_tick, idstring=self.ticker_idstring,
                           persistent=True)
        self.db.ticker_interval = interval

    def _remove_ticker(self, interval):
        try:
            TICKER_HANDLER.remove(interval, self.at_assistant_tick, idstring=self.ticker_idstring,
                                  persistent=True)
        except KeyError:
            pass

    def unsubscribe(self):
        if self.db.ticker_interval:
            self._remove_ticker(self.db.ticker_interval)
            self.db.ticker_interval = None

    def at_server_start(self):
        # persistent tickers come back by themselves; this repairs a missing or stale one
        if self.obj:
            self.subscribe()

    def at_script_delete(self):
        self.unsubscribe()
        return True

    # --- modes ----------------------------------------------------------------------------

    def set_mode(self, target, reason):
        """
        Switch between awake and sleep: swap the ticker, record why, tell the room.

        Args:
            target (str): "awake" or "sleep".
            reason (str): Why (logged and kept in `mode_history`).

        Returns:
            bool: False if already in `target`.
        """
        if target not in MODES:
            raise ValueError(f"unknown mode {target!r}")
        state = self.obj.ai_ports().state
        current = state.get("operating_mode") or "awake"
        if current == target:
            return False
        state.set("operating_mode", target)
        history = list(state.get("mode_history") or [])
        history.append({"from": current, "to": target, "reason": reason,
                        "time": iso(self.obj.ai_ports().clock.now())})
        state.set("mode_history", history[-20:])
        state.flush()  # a mode change (and all before it) reaches the database at once
        self.subscribe()
        logger.log_info(f"[ai_assistant] {self.obj.key}: {current} -> {target} ({reason})")
        if self.obj.location:
            verb = "dozes off." if target == "sleep" else "wakes up."
            self.obj.location.msg_contents(f"{self.obj.key} {verb}", from_obj=self.obj)
        return True

    # --- ticks ----------------------------------------------------------------------------

    def at_assistant_tick(self, *args, **kwargs):
        """
        Called by TICKER_HANDLER. Starts the tick's work and returns None at once.
        """
        state = self.obj.ai_ports().state
        if self.ndb.busy:
            state.set("skipped_ticks", (state.get("skipped_ticks") or 0) + 1)
            return None
        count = (state.get("tick_count") or 0) + 1
        state.set("tick_count", count)
        # flush every few awake ticks (a minute at 5 s) and every sleep tick (one a minute)
        flush_every = max(1, int(self.obj.ai_ports().settings.get("ticks.flush_every")))
        if count % flush_every == 0 or self.obj.operating_mode == "sleep":
            state.flush()
        # TICKER_HANDLER calls every assistant on the same interval in one reactor turn: each
        # starts its work in a turn of its own, so players' commands get in between them
        reactor.callLater(0, self._start_work_if_idle)
        return None

    def at_server_reload(self):
        if self.obj:
            self.obj.ai_ports().state.flush()

    def at_server_shutdown(self):
        if self.obj:
            self.obj.ai_ports().state.flush()

    def poke(self):
        """Run a tick's work soon (urgent event, new mode) unless a tick is already running."""
        if not self.ndb.busy:
            reactor.callLater(0, self._start_work_if_idle)

    def _start_work_if_idle(self):
        if not self.ndb.busy:
            self._start_work()

    def _start_work(self):
        self.ndb.busy = True
        deferred = defer.maybeDeferred(self.obj.run_tick, self.obj.operating_mode)
        deferred.addErrback(self._tick_failed)
        deferred.addBoth(self._tick_done)

    def _tick_failed(self, failure):
        logger.log_err(f"[ai_assistant] {self.obj.key}: tick failed: {failure.getErrorMessage()}")
        logger.log_trace(failure)

    def _tick_done(self, _):
        self.ndb.busy = False
        # woken (or still awake) with people waiting for an answer: answer now, not next tick
        if self.obj.operating_mode == "awake" and self.obj.ai_ports().state.get("pending_events"):
            self.poke()


class AssistantCharacter(DefaultCharacter):
    """
    An NPC driven by an LLM with long-term memory.

    It needs no account: it hears its room through `at_msg_receive`, thinks on its script's
    ticks, and acts through the same tools an admin can run as commands.
    """

    def at_object_creation(self):
        super().at_object_creation()
        self.tags.add(*ASSISTANT_TAG)
        self.cmdset.add("ai_assistant.commands.AssistantToolCmdSet", persistent=True)
        self.db.config_overrides = {}
        self.scripts.add(AssistantScript, key=SCRIPT_KEY, autostart=True)
        self.assistant_script.subscribe()

    # --- wiring -----------------------------------------------------------------------------

    @property
    def assistant_script(self):
        script = self.ndb.assistant_script
        if script is None or not script.id:
            found = self.scripts.get(SCRIPT_KEY)
            script = self.ndb.assistant_script = found[0] if found else None
        return script

    def ai_ports(self):
        """The core's ports for this NPC, cached until its config changes."""
        ports = self.ndb.ai_ports
        if ports is None:
            ports = self.ndb.ai_ports = build_ports(self)
        return ports

    def at_server_reload(self):
        super().at_server_reload()
        self.ai_ports().state.flush()

    def at_server_shutdown(self):
        super().at_server_shutdown()
        self.ai_ports().state.flush()

    def reset_ai_ports(self):
        """Forget cached ports and clients (after `@assistant/config`)."""
        self.ndb.ai_ports = None
        self.ndb.llm_client = None
        self.ndb.llm_client_signature = None

    def llm_client(self, settings):
        """
        The LLM client for `settings["llm"]`, or None in mechanical mode.
        """
        from ai_assistant.plumbing.llm import make_llm_client

        config = settings.get("llm")
        signature = json.dumps(config, sort_keys=True, default=str)
        if self.ndb.llm_client_signature != signature:
            from ai_assistant.adapters import AttributeState, log_to_server

            self.ndb.llm_client = make_llm_client(
                config,
                npc_key=f"assistant_{self.id}",
                npc_name=self.key,
                state=AttributeState(self),
                log=log_to_server,
            )
            self.ndb.llm_client_signature = signature
        return self.ndb.llm_client

    @property
    def operating_mode(self):
        return self.ai_ports().state.get("operating_mode") or "awake"

    # --- perception -------------------------------------------------------------------------

    def hear(self, sender, text, kind):
        """
        Perceive something and queue it as an event.

        Args:
            sender (Object): Who caused it.
            text (str): What was said or done.
            kind (str): "talk", "say", "whisper", "pose", "arrive", "depart".

        Returns:
            dict or None: The queued event (None for the NPC's own echo).
        """
        ports = self.ai_ports()
        names = [self.key, *self.aliases.all()]
        classification = perception.classify(kind, text, names=names, from_self=sender is self)
        if classification == "self":
            return None
        if classification == "direct_addressing" and not sender.has_account:
            # other NPCs (and other assistants) are heard, not answered: no endless NPC chatter
            classification = "room_chatter"
        event = perception.make_event(
            kind=kind,
            text=text,
            sender=sender.key,
            sender_id=sender.dbref,
            classification=classification,
            time=iso(ports.clock.now()),
            urgent_priority=ports.settings.get("perception.urgent_priority"),
        )
        perception.enqueue(ports, event)
        if event["urgent"] and self.operating_mode == "awake":
            script = self.assistant_script
            if script:
                script.poke()
        return event

    def at_msg_receive(self, text=None, from_obj=None, **kwargs):
        senders = [obj for obj in make_iter(from_obj) if hasattr(obj, "has_account")]
        if not senders or senders[0] is self or text is None:
            return True
        sender = senders[0]
        message, meta = (text[0], text[1] if len(text) > 1 else {}) if isinstance(
            text, tuple | list) else (text, {})
        message = strip_ansi(str(message or ""))
        msg_type = (meta or {}).get("type") or kwargs.get("type")
        if msg_type in ("say", "whisper"):
            self.hear(sender, perception.extract_speech(message), msg_type)
        elif msg_type == "pose":
            self.hear(sender, message, "pose")
        elif msg_type in ("move", "teleport") or (msg_type or "").startswith("move"):
            # announce_move_from runs before the move, announce_move_to after: look once the
            # move has finished to know which this was
            delay(0, self._note_movement, sender)
        return True

    def _note_movement(self, sender):
        if sender.location == self.location:
            self.hear(sender, f"{sender.key} arrives.", "arrive")
        else:
            self.hear(sender, f"{sender.key} leaves.", "depart")

    # --- thinking ---------------------------------------------------------------------------

    def run_tick(self, mode):
        """
        One tick of work in `mode`. Returns a Deferred (or None when idle).
        """
        from ai_assistant.sleep import modes

        ports = self.ai_ports()
        script = self.assistant_script
        if mode == "awake":
            awake = dict(ports.state.get("awake_state") or {})
            awake["awake_ticks"] = awake.get("awake_ticks", 0) + 1
            ports.state.set("awake_state", awake)
            if modes.take_sleep_request(ports, script.set_mode):
                return None
            should_sleep, target, reason = modes.check_sleep_schedule(ports)
            if should_sleep and target == "sleep":
                modes.enter_sleep(ports, reason, script.set_mode)
                return None
            if not ports.state.get("pending_events"):
                return None
            from ai_assistant.agent.awake import run_awake_tick
            from ai_assistant.agent.react import run_react_cycle

            return run_awake_tick(
                ports,
                run_cycle=run_react_cycle,
                call_later=reactor.callLater,
                cache=self.tool_cache(),
            )
        from ai_assistant.sleep.cycle import run_sleep_tick

        return run_sleep_tick(ports, script.set_mode)

    def tool_cache(self):
        from ai_assistant.tools.registry import ToolCache

        if self.ndb.tool_cache is None:
            self.ndb.tool_cache = ToolCache()
        return self.ndb.tool_cache
