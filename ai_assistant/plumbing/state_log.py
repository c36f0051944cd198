"""
The write-ahead log of one assistant's state documents: what makes a write-behind store safe.

The shell keeps state documents in a cache and writes them to the database in batches (a
database write per change would cost the reactor far more than the thinking). Between two
batches a crash would lose every change, including ones a player or an admin was told about.
So each change is also appended here, at once, before anyone is told: one record per
`StateStore.set`. A `write` of a few hundred bytes to a file the process keeps open survives
kill -9 (the kernel has it); an fsync every `durability.fsync_interval` seconds, off the
reactor, makes it survive a power cut too.

A record is one of:

- a **whole value** `(place, document name, value)` (`append`);
- a **change** `(place, document name, "change", operations)` (`append_change`): what the
  owner did (`plumbing.state_changes`), a few hundred bytes where the whole journal is tens of
  kilobytes. The shell logs a document whole at its first write after each flush and as
  changes after that, so a change always follows a whole value of its document in the log;
- a **written-through** mark `(place, document name, "written", None)` (`append_written`):
  the database has this document now; what the log held of it is dropped.

At the next start the records are read back (`read_log`: each document's last whole value with
the changes after it applied) and written to the database; every flush empties the log
(`StateLog.truncate`), so it only ever holds what the database does not have yet. The log
names its documents' values by itself, never relying on the database's copy, so replaying it
twice, or after a flush that committed but did not empty it, gives the same documents.

Each record is `length (4 bytes) | crc32 (4 bytes) | pickle`. A record cut short by a crash in
the middle of a write, or damaged, ends the replay there: everything before it is kept. So does
a change that does not fit the value before it (never written by this module's users).

A log may start with a header record naming its writer (`read_writer`): the shell records which
process and which database wrote it, so that a log is only ever removed by someone who can
prove it is stale.
"""

import os
import pickle
import struct
import zlib

from ai_assistant.plumbing.state_changes import ChangeError, apply

_HEADER = struct.Struct("<II")
_PROTOCOL = 5
WRITER = "writer"  # the place of the header record: who writes the log, not a document
CHANGE = "change"  # a record of what changed in a document (its fourth field the operations)
WRITTEN = "written"  # a record that a document went straight to the database


class StateLog:
    """
    An append-only file of state changes, kept open while it holds any (see `rest`).

    Args:
        path (str): The log file (its folder is created).
        writer (object, optional): Who writes it (picklable): recorded first in a new or emptied
            log, read back by `read_writer`.
        resting (bool): Leave the file as it is, unopened, until the first record: it holds
            no record the database lacks (at most an earlier writer's header, which that
            first record's opening replaces with this writer's).
    """

    def __init__(self, path, writer=None, resting=False):
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._fd = None
        self.unsynced = False
        self._writer = writer
        self._empty_size = 0
        self._renew = resting  # the file is someone else's until emptied
        self._resting = resting
        self.size = 0
        if not resting:
            self._open()
            if not self.size:
                self._write_writer()

    def _open(self):
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.size = os.fstat(self._fd).st_size
        self._resting = False
        if self._renew:
            self._renew = False
            if self.size:
                os.ftruncate(self._fd, 0)
                self.size = 0
            self._write_writer()

    def _write_writer(self):
        if self._writer is not None:
            self.append(WRITER, "", self._writer)
            self._empty_size = self.size

    @property
    def closed(self):
        """True once `close`d (a resting log is not closed: its next append opens it)."""
        return self._fd is None and not self._resting

    @property
    def resting(self):
        return self._resting

    def rest(self):
        """
        Close the file while it holds nothing the database lacks (only its header): a game
        with a thousand assistants would otherwise keep a thousand files open, most of them
        idle. The next record opens it again.

        Returns:
            bool: True when the log rests now (or already did); False when it holds records
            (or was closed for good), so it stays as it is.
        """
        if self._resting:
            return True
        if self._fd is None or self.size > self._empty_size:
            return False
        fd, self._fd = self._fd, None
        self._resting = True
        os.close(fd)
        return True

    def append(self, place, name, value):
        """
        Record that document `name` (kept on `place`) is now `value`.

        Returns:
            bool: False when `value` cannot be recorded (it does not pickle); the caller then
            has to write it through itself.
        """
        return self._append((place, str(name), value))

    def append_change(self, place, name, change):
        """
        Record what changed in document `name` since its last record (`plumbing.state_changes`).

        The log must hold a whole value of the document before it (`append`), since this
        process last emptied it: the caller keeps track.

        Returns:
            bool: False when the change cannot be recorded (it does not pickle); the caller
            then records the whole value instead.
        """
        return self._append((place, str(name), CHANGE, list(change)))

    def append_written(self, place, name):
        """
        Record that document `name` was written straight to the database: a replay drops what
        the log held of it before (the database's value is newer).

        Returns:
            bool: True when recorded.
        """
        return self._append((place, str(name), WRITTEN, None))

    def _append(self, record):
        if self._resting:
            self._open()
        if self._fd is None:
            return False
        try:
            payload = pickle.dumps(record, protocol=_PROTOCOL)
        except Exception:  # noqa: BLE001 - any object that refuses pickling
            return False
        framed = _HEADER.pack(len(payload), zlib.crc32(payload)) + payload
        view = memoryview(framed)
        while view:  # a regular file takes it in one write; loop in case it does not
            written = os.write(self._fd, view)
            view = view[written:]
        self.size += len(framed)
        self.unsynced = True
        return True

    def truncate(self):
        """Forget every record: the database has them all now."""
        if self._fd is not None and self.size > self._empty_size:
            os.ftruncate(self._fd, 0)
            self.size = 0
            self.unsynced = True
            self._write_writer()

    def sync(self):
        """fsync the log (blocking: run it off the reactor). Safe after `close`."""
        fd = self._fd
        if fd is None or not self.unsynced:
            return
        self.unsynced = False
        try:
            os.fsync(fd)
        except OSError:  # closed meanwhile
            pass

    def close(self):
        self._resting = False
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _well_formed(record):
    """A whole value (three fields) or a change / written-through mark (four)."""
    if not isinstance(record, tuple):
        return False
    if len(record) == 3:
        return True
    return len(record) == 4 and record[2] in (CHANGE, WRITTEN)


def _records(data):
    """
    `(offset, record)` of each whole record (a tuple, see the module doc), then True if the
    data ends damaged (False if not).
    """
    offset = 0
    while offset < len(data):
        if offset + _HEADER.size > len(data):
            yield True
            return
        length, crc = _HEADER.unpack_from(data, offset)
        payload = data[offset + _HEADER.size: offset + _HEADER.size + length]
        if len(payload) < length or zlib.crc32(payload) != crc:
            yield True
            return
        try:
            record = pickle.loads(payload)
        except Exception:  # noqa: BLE001 - an unreadable record ends the replay
            yield True
            return
        if not _well_formed(record):
            yield True
            return
        yield offset, record
        offset += _HEADER.size + length
    yield False


def read_writer(path):
    """
    Who wrote a log (the `writer` given to its `StateLog`), None when it names none.

    Raises:
        OSError: The log cannot be read (a missing one included).
    """
    with open(path, "rb") as handle:
        data = handle.read(64 * 1024)  # the header is the first record, a few hundred bytes
    first = next(_records(data))
    if isinstance(first, tuple) and first[1][0] == WRITER:
        return first[1][2]
    return None


def read_log(path):
    """
    The documents a log holds: each one's last whole value, with the changes after it applied.

    Args:
        path (str): The log file; a missing file holds nothing.

    Returns:
        tuple: `(changes, records, damaged)`: `changes` is `{(place, name): value}` in the order
        each document was last changed, `records` how many records were read, `damaged` True
        when the file ended in a cut-short or damaged record, or in a change that does not fit
        the value before it (ignored, with what follows it).
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return {}, 0, False
    return _replay(data)


def _replay(data):
    """`read_log` of the bytes of a log."""
    changes, records = {}, 0
    for found in _records(data):
        if found is True or found is False:
            return changes, records, found
        offset, record = found
        place, name = record[0], record[1]
        if place == WRITER:
            continue
        document = (place, name)
        if len(record) == 3:
            value = record[2]
        elif record[2] == WRITTEN:
            changes.pop(document, None)  # the database has it, newer than what came before
            records += 1
            continue
        elif document not in changes:
            return changes, records, True  # a change with nothing to change
        else:
            try:
                value = apply(changes[document], record[3])
            except ChangeError:
                # applied in place, perhaps in part: what came before is read again
                return _replay(data[:offset])[0], records, True
        changes.pop(document, None)  # keep the order of the last change
        changes[document] = value
        records += 1
    return changes, records, False
