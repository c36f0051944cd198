"""
The Evennia typeclasses: the assistant NPC and the script that gives it a heartbeat.

- `AssistantCharacter` is a plain `DefaultCharacter` with `AssistantMixin` (see
  `ai_assistant.handler`): it hears its room, thinks on its script's ticks and acts through the
  same tools an admin can run as commands. Give the mixin to your own class instead if you
  need another parent.
- `AssistantScript` subscribes to TICKER_HANDLER (one ticker per NPC, `persistent=True`): every
  5 s while awake, every 60 s asleep. A tick starts the work and returns None at once; a tick
  that finds the previous one still running is skipped and counted, and one still running
  after `mode.LONG_TICK_SECONDS` is logged once and named by `@assistant <npc>`.
"""

import time

from evennia import TICKER_HANDLER
from evennia.objects.objects import DefaultCharacter
from evennia.scripts.scripts import DefaultScript
from evennia.utils import logger
from twisted.internet import defer, reactor

from ai_assistant import attribute_reads, durability, reactor_turns
from ai_assistant.adapters import game_settings
from ai_assistant.agent.warmup import warm_up_process
from ai_assistant.handler import SCRIPT_KEY, AssistantMixin, is_assistant, never_raises, retire
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.settings import Settings
from ai_assistant.server_warm_up import import_tick_modules
from ai_assistant.workspace.mode import SCRIPT_DOCUMENTS, long_tick


def _warm_up_process():
    warm_up_process(Settings(game_settings()), prepare=import_tick_modules)


# Evennia imports this module early in a server start, when it loads the assistants' scripts:
# what every reply needs (libraries, models) starts loading in the worker pools as soon as that
# start is over - unless the inspector app started it earlier still (`server_warm_up`), which
# this then follows. Not at once: a reload imports it in the reactor turn that starts every
# script (`at_server_start`), and the warm-up's imports, in a thread, would take the interpreter
# from that loop at each of its queries (a reload of 1,000 assistants took twice as long); a
# server that imports it before its reactor runs starts it when the reactor does
if reactor.running:
    reactor.callLater(0, _warm_up_process)
else:
    reactor.callWhenRunning(_warm_up_process)


def _no_timer_without_a_reactor(interval):
    """
    With no reactor running (Evennia's test runner running the demo's initial setup, a
    script), a new ticker's timer would be left pending - a `DirtyReactorAggregateError` in
    Evennia's own tests - and could never fire: stop it. The subscription stays in the ticker
    store, and Evennia's server restores every persistent ticker when it starts.
    """
    if reactor.running:
        return
    ticker = TICKER_HANDLER.ticker_pool.tickers.get(interval)
    if ticker is not None and ticker.task.running:
        ticker.task.stop()


class AssistantScript(DefaultScript):
    """
    Drives one assistant's ticks. Lives on the assistant NPC (`obj`).

    Its Attributes hold the ticker's rate (`ticker_interval`) and the documents that live on the
    script (`plumbing.documents`: operating mode, sleep phase, tick counters, mode history and
    the core's script-side documents).
    """

    def at_script_creation(self):
        self.key = SCRIPT_KEY
        self.desc = "Drives an AI assistant's awake and sleep ticks"
        self.persistent = True
        for document in (*SCRIPT_DOCUMENTS, documents.TICKER_INTERVAL):
            self.attributes.add(document, document.default())

    # --- ticker ---------------------------------------------------------------------------

    @property
    def ticker_idstring(self):
        return f"ai_assistant_{self.obj.id if self.obj else self.id}"

    def interval_for(self, mode):
        """Seconds between ticks in `mode` (settings `ticks.awake` / `ticks.sleep`)."""
        settings = self.obj.assistant.ports().settings
        if mode == "sleep":
            return int(settings.get("ticks.sleep"))
        return int(settings.get("ticks.awake"))

    def subscribe(self):
        """Make sure exactly one ticker, at the current mode's rate, calls `at_assistant_tick`."""
        interval = self.interval_for(self.obj.assistant.operating_mode)
        live = self._live_intervals()
        if live == {interval}:
            # a reload restores persistent tickers by themselves: adding again would re-save
            # the whole ticker store once per assistant, and reading the stored interval
            # would cost each assistant a query at every start
            return
        for stale in live - {interval}:
            self._remove_ticker(stale)
        if interval not in live:
            TICKER_HANDLER.add(interval, self.at_assistant_tick, idstring=self.ticker_idstring,
                               persistent=True)
            _no_timer_without_a_reactor(interval)
        self.attributes.add(documents.TICKER_INTERVAL, interval)

    def _live_intervals(self):
        """
        The intervals at which TICKER_HANDLER calls this script's tick. The ticker store is
        the truth; the stored `ticker_interval` is what admins are shown.
        """
        # a store key is (packed object, method name, path, interval, idstring, persistent);
        # the idstring is read once: every assistant's start scans every subscription, and
        # reading it per subscription (its object through the script's foreign key) cost a
        # reload time quadratic in assistants (0.24-0.67 s of CPU at 300, against 0.01)
        idstring = self.ticker_idstring
        return {interval for interval, subscriptions in (TICKER_HANDLER.all() or {}).items()
                for key in subscriptions
                if key[1] == "at_assistant_tick" and key[4] == idstring and key[5]}

    def _remove_ticker(self, interval):
        try:
            TICKER_HANDLER.remove(interval, self.at_assistant_tick, idstring=self.ticker_idstring,
                                  persistent=True)
        except KeyError:
            pass

    def unsubscribe(self):
        for interval in self._live_intervals():
            self._remove_ticker(interval)
        if self.ticker_interval is not None:
            self.attributes.add(documents.TICKER_INTERVAL, None)

    @property
    def ticker_interval(self):
        """Seconds between the ticks it is subscribed to, None when unsubscribed."""
        return self.attributes.get(documents.TICKER_INTERVAL)

    def retire_if_orphaned(self):
        """
        Delete this script when its object is no longer an assistant (`@typeclass` swapped it
        to a class without `AssistantMixin`; the old class's hooks do not run on a swap).

        Returns:
            bool: True when it was retired (the caller must do nothing more with it).
        """
        if self.obj is not None and is_assistant(self.obj):
            return False
        where = f"{self.obj.key} ({self.obj.typeclass_path})" if self.obj else "no object"
        logger.log_info(f"[ai_assistant] {where} is no longer an assistant: its script, ticker, "
                        "tool commands and tag are removed")
        self.delete()
        return True

    @never_raises
    def at_server_start(self):
        # the first script to start reads what every assistant's start reads, for all at once
        self._read_at_start()
        if self.retire_if_orphaned():
            return
        if self.obj:
            self.obj.ndb.assistant_script = self  # its handler need not look it up again
            # what an unclean stop left in the write-ahead log reaches the Attributes before
            # anything (a tick, the inspector, an admin command) reads them
            self.obj.assistant.ports().state.durability()
            # persistent tickers come back by themselves; this repairs a missing or stale one
            self.subscribe()
            # what the first reply needs (model client, store, embedder, recall index) is made
            # ready now, off the reactor, once the start is over (agent/warmup.py)
            reactor.callLater(0, self.obj.assistant.warm_up)

    @never_raises
    def _read_at_start(self):
        # on its own: should the batch fail, each assistant still reads its own as it starts
        attribute_reads.read_at_start(self, SCRIPT_KEY, is_assistant)

    def at_script_delete(self):
        self.unsubscribe()
        if self.obj is not None and not is_assistant(self.obj):
            retire(self.obj, self)  # what the assistant left on an object that is one no more
        elif self.obj:
            # the documents reach the database (its NPC may live on without this script), and
            # the write-ahead log - which may hold whispers - does not outlive them
            self.obj.assistant.flush()
            durability.remove_log(self.obj)
        return True

    def set_mode(self, target, reason):
        """Switch between awake and sleep (see `AssistantHandler.set_mode`)."""
        return self.obj.assistant.set_mode(target, reason)

    # --- ticks ----------------------------------------------------------------------------

    @never_raises
    def at_assistant_tick(self, *args, **kwargs):
        """
        Called by TICKER_HANDLER. Starts the tick's work and returns None at once.
        """
        if self.retire_if_orphaned():
            return None
        assistant = self.obj.assistant
        ports = assistant.ports()
        if self.ndb.busy:
            assistant.mode.skip_tick()
            self._report_long_tick()
            return None
        assistant.mode.record_tick()
        # flush every few awake ticks (a minute at 5 s) and every sleep tick (one a minute).
        # The ticks since the last flush are counted in ndb: a stored counter would be rolled
        # back by the very crash it is meant to limit, and a server crashing more often than a
        # flush would never flush
        flush_every = max(1, int(ports.settings.get("ticks.flush_every")))
        since = self.ndb.ticks_since_flush
        if since is None:
            # assistants started together would all flush at the same tick: each starts at a
            # point of the cycle of its own (its first flush comes sooner, never later)
            since = (self.obj.id or 0) % flush_every
        since += 1
        if since >= flush_every or assistant.operating_mode == "sleep":
            reactor_turns.ticks.add(self._flush)
            since = 0
        self.ndb.ticks_since_flush = since
        # TICKER_HANDLER calls every assistant on the same interval in one reactor turn: each
        # flushes and starts its work in turns of its own, so players' commands get in between
        reactor_turns.ticks.add(self._start_work_if_idle)
        return None

    @never_raises
    def _flush(self):
        if self.obj and self.obj.pk and is_assistant(self.obj):
            self.obj.assistant.flush()

    @never_raises
    def at_server_reload(self):
        if self.obj and is_assistant(self.obj):
            self.obj.assistant.flush()

    @never_raises
    def at_server_shutdown(self):
        if self.obj and is_assistant(self.obj):
            self.obj.assistant.flush()

    def poke(self):
        """Run a tick's work soon (urgent event, new mode) unless a tick is already running."""
        if not self.ndb.busy:
            reactor.callLater(0, self._start_work_if_idle)

    def _start_work_if_idle(self):
        if not self.ndb.busy:
            self._start_work()

    def _start_work(self):
        self.ndb.busy = True
        assistant = self.obj.assistant
        # when it started, for a tick that never ends (`_report_long_tick`); lost at a reload,
        # which ends it anyway
        self.ndb.tick_started, self.ndb.tick_mode = time.monotonic(), assistant.operating_mode
        self.ndb.tick_reported = False
        deferred = defer.maybeDeferred(assistant.run_tick, assistant.operating_mode)
        deferred.addErrback(self._tick_failed)
        deferred.addBoth(self._tick_done)

    def _tick_failed(self, failure):
        logger.log_err(f"[ai_assistant] {self.obj.key}: tick failed: {failure.getErrorMessage()}")
        logger.log_trace(failure)

    def tick_running(self):
        """
        The tick running now, `(mode it started in, seconds it has run)`, or None when none
        runs (for `@assistant`'s status).
        """
        started = self.ndb.tick_started  # set and cleared with `busy`
        if started is None:
            return None
        return self.ndb.tick_mode, time.monotonic() - started

    def _report_long_tick(self):
        """A tick that has run past `LONG_TICK_SECONDS` is logged, once: its assistant skips
        every tick until it ends, and the admin is told why (`@assistant` shows it too)."""
        stuck = long_tick(self.tick_running())
        if stuck and not self.ndb.tick_reported:
            self.ndb.tick_reported = True
            logger.log_warn(f"[ai_assistant] {self.obj.key}: {stuck}; its ticks are skipped "
                            f"until it does (@assistant {self.obj.key} shows how long)")

    def _tick_done(self, _):
        if self.ndb.tick_reported:
            running = self.tick_running()
            logger.log_info(f"[ai_assistant] {self.obj.key}: the long tick ended after "
                            f"{running[1] / 60:.0f} min")
        self.ndb.busy = False
        self.ndb.tick_started = None
        # woken (or still awake) with people waiting for an answer: answer now, not next tick
        assistant = self.obj.assistant
        if assistant.operating_mode == "awake" and assistant.perception.waiting():
            self.poke()


class AssistantCharacter(AssistantMixin, DefaultCharacter):
    """
    An NPC driven by an LLM with long-term memory.

    It needs no account: it hears its room through `at_msg_receive`, thinks on its script's
    ticks, and acts through the same tools an admin can run as commands. Everything it does is
    on its handler, `npc.assistant` (see `ai_assistant.handler`).
    """
