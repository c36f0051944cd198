"""
Where the contrib keeps its files, and which process and database wrote them.

Everything the contrib writes to disk - the write-ahead state logs (`durability`), the embedded
vector store and mem0's history database (`adapters.semantic_data_dir`) - lives in one folder
that belongs to the database the process runs against, so that a test run, a benchmark or a
second game never reads, writes or cleans up a running game's files:

- `settings.AI_ASSISTANT_DATA_DIR`, when a game (or a test run) names a folder;
- a SQLite file in `<game>/server/` (Evennia's own, `evennia.db3`):
  `<game>/server/ai_assistant_data`;
- any other SQLite file: `<game>/server/ai_assistant_data/sqlite-<file name>-<hash of its path>`;
- an in-memory SQLite database (Django's test database): a temporary folder of this process,
  removed when it exits, as the database is;
- a database server: `<game>/server/ai_assistant_data/<vendor>-<host>-<port>-<database name>`.
"""

import atexit
import hashlib
import os
import re
import shutil
import tempfile

from ai_assistant.memory.longterm.mem0_store import DATA_FOLDER

# the temporary folder of an in-memory database, one per process
_in_memory_folder = []


def database_identity():
    """
    The database this process runs against, in words that name it across processes.

    Returns:
        str: `sqlite:<absolute path>`, `sqlite:memory:<pid>:<process start>` or
        `<vendor>://<host>:<port>/<name>`.
    """
    from django.db import connections

    connection = connections["default"]
    params = connection.settings_dict
    if connection.vendor == "sqlite":
        if connection.is_in_memory_db():
            return f"sqlite:memory:{os.getpid()}:{_own_start(os.getpid())}"
        return f"sqlite:{os.path.abspath(str(params['NAME']))}"
    host = params.get("HOST") or "localhost"
    return f"{connection.vendor}://{host}:{params.get('PORT') or ''}/{params.get('NAME')}"


def data_folder():
    """The folder of everything the contrib writes for this database (see the module)."""
    from django.conf import settings

    named = getattr(settings, "AI_ASSISTANT_DATA_DIR", None)
    if named:
        return os.path.abspath(named)
    game = os.path.abspath(getattr(settings, "GAME_DIR", None) or os.getcwd())
    return folder_for(database_identity(), game)


def folder_for(identity, game_dir):
    """
    The data folder of the database `identity` (`database_identity`) in the game `game_dir`.
    """
    base = os.path.join(game_dir, "server", DATA_FOLDER)
    kind, _, where = identity.partition(":")
    if kind == "sqlite" and where.startswith("memory:"):
        if not _in_memory_folder:
            folder = tempfile.mkdtemp(prefix=f"{DATA_FOLDER}_")
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            _in_memory_folder.append(folder)
        return _in_memory_folder[0]
    if kind == "sqlite":
        if os.path.dirname(where) == os.path.join(game_dir, "server"):
            return base  # the game's own database
        digest = hashlib.sha256(where.encode()).hexdigest()[:12]
        return os.path.join(base, _safe(f"sqlite-{os.path.basename(where)}-{digest}"))
    vendor, _, address = identity.partition("://")
    return os.path.join(base, _safe(f"{vendor}-{address.replace(':', '-').replace('/', '-')}"))


def _safe(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def process_started(pid):
    """
    When process `pid` started (clock ticks since boot, from /proc), None when unknown: with
    its pid, it names one process, as a pid alone does not once the pid is reused.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode(errors="replace")
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: count from its last ")"
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def writer():
    """This process as the writer of a file: `(database, pid, process start)`."""
    pid = os.getpid()
    return (database_identity(), pid, _own_start(pid))


# this process's start, read once per pid (a fork reads its own): every assistant's log names
# its writer when it is opened, and a reload of a thousand would read /proc a thousand times
_own_starts = {}


def _own_start(pid):
    if pid not in _own_starts:
        _own_starts[pid] = process_started(pid)
    return _own_starts[pid]


def process_alive(pid, started):
    """
    True unless process `pid` (started at `started`) is provably gone: no such pid, or the
    pid now belongs to a process that started at another time.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, another user's
    except (OSError, OverflowError, TypeError):
        return True  # not a pid this system knows how to ask about: nothing proven
    now = process_started(pid)
    return not (started is not None and now is not None and now != started)
