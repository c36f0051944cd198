"""
Nothing acknowledged is lost: the shell's side of crash safety.

State documents are written behind (`adapters.AttributeState`): changes live in a cache and
reach the Attributes at the next flush. Three things make that safe:

- **A write-ahead log per assistant** (`plumbing.state_log.StateLog`, one file per NPC under
  `state_log/` in the database's data folder, `game_data.data_folder`): every `set` is
  appended to it before the change is acknowledged to anyone, so a kill -9 loses nothing - a
  document's first change after a flush as its whole value, the next ones as the change its
  owner describes (`plumbing.state_changes`: a journal entry, not the whole journal). It
  is replayed into the Attributes the first time the NPC's state is touched in a server
  process (at the latest when its script starts, `AssistantScript.at_server_start`), and
  emptied by every flush. An fsync follows within `durability.fsync_interval` seconds, in a
  worker thread.
- **A flush when the reactor stops** (`hook_shutdown`): SIGTERM makes Twisted stop the reactor,
  which runs its "before shutdown" triggers, but Evennia's Server flushes nothing then (only
  `evennia stop`/`reload` call the `at_server_shutdown` hooks). One trigger per process flushes
  every assistant in memory.
- **A flush schedule kept in memory** (`AssistantScript`): the ticks since the last flush are
  counted in `ndb`, not in a document a crash would roll back.

A log names the NPC by id and creation time, so an NPC that gets the id of a deleted one never
replays the old one's changes. Its first record names its writer: the database and the process
(pid and start time). Another NPC's log with this id is removed only when it is provably stale:
written for this database, by a process that is gone.
"""

import os
from datetime import UTC

from django.db import transaction
from evennia.utils import logger

from ai_assistant import game_data
from ai_assistant.plumbing import residency, threads
from ai_assistant.plumbing.state_log import StateLog, read_log, read_writer

FOLDER = "state_log"
CHARACTER, SCRIPT = "character", "script"
_RUNTIME_CACHE = "state_log"

# process-wide: one reactor trigger per server process flushes every assistant
_shutdown_hooked = []


def log_folder():
    """`state_log/` in the data folder of the database this process runs against."""
    return os.path.join(game_data.data_folder(), FOLDER)


def _stamp(character):
    created = character.db_date_created
    if created is None:
        return "0"
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return str(int(created.timestamp() * 1_000_000))


def log_path(character):
    """The log file of `character`: `assistant_<id>_<creation time in µs>.log`."""
    return os.path.join(log_folder(), f"assistant_{character.id}_{_stamp(character)}.log")


class Durability:
    """
    One NPC's write-ahead log and its fsync schedule (kept in its runtime, one per process).

    Args:
        character (AssistantMixin): The NPC.
        settings (Settings): Its settings (`durability.*`).
    """

    def __init__(self, character, settings):
        self.character = character
        self.fsync_interval = float(settings.get("durability.fsync_interval"))
        self.max_bytes = int(settings.get("durability.max_log_kb")) * 1024
        self.log = None
        self.replayed = 0
        self._sync_scheduled = False
        self._flush_scheduled = False
        # the documents the log holds a whole value of (a change to one of them is logged as
        # the change); emptied with the log
        self._whole = set()
        if settings.get("durability.write_ahead"):
            path = log_path(character)
            self.replayed, held = replay(character, path)
            _remove_stale_logs(character, path)
            runtime = character.assistant.runtime
            if held or runtime in residency.RESIDENCY:
                self.log = StateLog(path, writer=game_data.writer())
                self.log.truncate()  # replayed into the Attributes above
            else:
                # most of a big world's assistants after a reload: an empty log is left as it
                # is, unopened, until the first change (a reload of a thousand would otherwise
                # spend seconds rewriting files and keep a thousand open)
                self.log = StateLog(path, writer=game_data.writer(), resting=True)
            # an assistant out of residency keeps no file open while its log is empty
            runtime.on_release("state_log", self.log.rest)

    @property
    def enabled(self):
        """True when changes are logged (`durability.write_ahead`)."""
        return self.log is not None

    def record(self, place, name, value, change=None):
        """
        Append a change to the log (before it is acknowledged).

        Args:
            place (str): `CHARACTER` or `SCRIPT`.
            name (str): The document.
            value (any): Its new value.
            change (list, optional): What changed since the document's last `record`
                (`plumbing.state_changes`), recorded instead of the whole value when the log
                holds a whole value of the document to change (it is emptied by every flush,
                so a document's first change after one is recorded whole).

        Returns:
            bool: False when it was not recorded (no log, or a value that does not pickle):
            the caller writes it through.
        """
        if self.log is None:
            return False
        document = (place, name)
        logged = (change is not None and document in self._whole
                  and self.log.append_change(place, name, change))
        if not logged:  # whole: the first since the log was emptied, or a change that failed
            if not self.log.append(place, name, value):
                return False
            self._whole.add(document)
        self._schedule_sync()
        if self.log.size > self.max_bytes and not self._flush_scheduled:
            # a long stretch without a flush (a very busy room): flush now, and the log is empty
            from twisted.internet import reactor

            self._flush_scheduled = True
            reactor.callLater(0, self._flush_now)
        return True

    def written_through(self, place, name):
        """A document went straight to the database: what the log held of it is stale."""
        self._whole.discard((place, name))
        if self.log is not None and self.log.append_written(place, name):
            self._schedule_sync()

    def flushed(self):
        """Everything is in the database: empty the log."""
        if self.log is not None:
            self.log.truncate()
            self._whole.clear()
            self._schedule_sync()
            if self.character.assistant.runtime not in residency.RESIDENCY:
                self.log.rest()  # flushed after its release: no reason to keep it open

    def _flush_now(self):
        self._flush_scheduled = False
        self.character.assistant.flush()

    def _schedule_sync(self):
        if self._sync_scheduled:
            return
        from twisted.internet import reactor

        if not reactor.running:
            # no reactor (Evennia's test runner running the initial setup, a script): a timer
            # would be left pending. The kernel has the write; the next change made while the
            # reactor runs schedules the fsync
            return
        self._sync_scheduled = True
        reactor.callLater(self.fsync_interval, self._sync)

    def _sync(self):
        self._sync_scheduled = False
        log = self.log
        if log is not None and log.unsynced:
            threads.run_blocking(log.sync).addErrback(
                lambda failure: logger.log_err(
                    f"[ai_assistant] state log fsync failed: {failure.getErrorMessage()}"))

    def close(self):
        if self.log is not None:
            self.log.close()


def durability_of(character, settings_factory):
    """
    The NPC's `Durability`, opened (and its log replayed) on first use in this process.

    Args:
        character (AssistantMixin): The NPC.
        settings_factory (callable): Makes its settings (only called the first time).
    """
    hook_shutdown()
    return character.assistant.runtime.cache(
        _RUNTIME_CACHE, lambda: Durability(character, settings_factory()))


def replay(character, path):
    """
    Write what a log holds into the NPC's (and its script's) Attributes.

    Returns:
        tuple: `(restored, held)`: how many documents were restored, and whether the log held
        any record (or damage) besides its header, i.e. whether it must be emptied.
    """
    changes, records, damaged = read_log(path)
    held = bool(records or damaged)
    if not changes:
        return 0, held
    script = character.assistant.script
    restored = []
    # one commit for them all; the log is emptied only afterwards, and replaying it again
    # (a crash before it was emptied) writes the same values: it never reads the database's
    with transaction.atomic():
        for (place, name), value in changes.items():
            owner = script if place == SCRIPT else character
            if owner is None:
                continue
            owner.attributes.add(name, value)
            restored.append((owner, name, value))
    for owner, name, value in restored:
        # a cache made before the replay (none should be) must not hide the restored value
        cache = owner.ndb.ai_state_cache
        if cache is not None:
            cache[name] = value
    restored = len(restored)
    logger.log_info(f"[ai_assistant] {character.key}: restored {restored} documents from "
                    f"{records} logged changes after an unclean stop"
                    + (" (the last record was cut short)" if damaged else ""))
    return restored, held


def _remove_stale_logs(character, path):
    """
    Remove the logs of an earlier NPC with this id (deleted, its id reused), when provably stale.

    A log is removed only when its header says it was written for this database by a process
    that is gone: a running game's log is never touched by a test run or a second process
    against another database (whose NPCs reuse the same ids), nor one whose writer is unknown.
    """
    folder, own = os.path.dirname(path), os.path.basename(path)
    prefix = f"assistant_{character.id}_"
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    database = None
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".log") and name != own):
            continue
        found = os.path.join(folder, name)
        try:
            writer = read_writer(found)
        except OSError:
            continue
        if database is None:
            database = game_data.database_identity()
        if not _provably_stale(writer, database):
            continue
        try:
            os.remove(found)
        except OSError:
            pass


def _provably_stale(writer, database):
    """True when a log's `writer` was this database's, in a process that is gone."""
    if not (isinstance(writer, tuple) and len(writer) == 3):
        return False  # no header: nothing proves it
    written_for, pid, started = writer
    return written_for == database and not game_data.process_alive(pid, started)


def remove_log(character):
    """Close and delete the NPC's log (the NPC is being deleted)."""
    durability = (character.ndb.ai_runtime.caches.get(_RUNTIME_CACHE)
                  if character.ndb.ai_runtime is not None else None)
    if durability is not None:
        durability.close()
        character.ndb.ai_runtime.caches.pop(_RUNTIME_CACHE, None)
    try:
        os.remove(log_path(character))
    except OSError:
        pass


def hook_shutdown():
    """Flush every assistant when the reactor stops (SIGTERM included); once per process."""
    if _shutdown_hooked:
        return
    from twisted.internet import reactor

    reactor.addSystemEventTrigger("before", "shutdown", flush_all)
    _shutdown_hooked.append(True)


def flush_all():
    """Flush the state of every assistant this process has in memory."""
    from evennia.objects.models import ObjectDB

    touched = [obj for obj in ObjectDB.get_all_cached_instances()
               if hasattr(obj, "assistant") and (obj.ndb.ai_runtime is not None
                                                 or obj.ndb.ai_state_cache is not None)]
    # an object deleted from the database can linger in the cache: it has nothing to flush
    alive = set(ObjectDB.objects.filter(pk__in=[obj.pk for obj in touched])
                .values_list("pk", flat=True))
    flushed = 0
    for obj in touched:
        if obj.pk not in alive:
            continue
        try:
            obj.assistant.flush()
            flushed += 1
        except Exception as err:  # noqa: BLE001 - one failing NPC must not stop the others
            logger.log_err(f"[ai_assistant] {obj.key}: flush at shutdown failed: {err}")
    return flushed
