"""
A real Evennia server started from this repository, for end-to-end tests and benchmarks.

`GameServer` copies the game directory (server/conf, typeclasses, commands, world, web) into a
temporary folder with its own database (a SQLite file, or a fresh PostgreSQL database under
`make test-postgres`) and free loopback ports, starts it with the superuser from the
environment, and stops it (killing anything left) when done, or when its start fails.

- The harness's settings (ports, website, rate limits, the test's own lines) are appended to
  the copied `settings.py`, after everything the game sets, so they win over the game's own.
- The database is migrated once per test process: each server starts from a copy of that
  migrated template (a file copy on SQLite, `CREATE DATABASE ... TEMPLATE` on PostgreSQL).
- A start is over when the game takes telnet connections and runs one Server (its first
  start restarts the Server after Evennia's initial setup). A start that hangs fails with
  where the game's processes are (py-spy, or gdb past an interpreter's end) and its logs'
  ends; a replaced Server that stays is reported so (`LingeringServerWarning`) and killed.

`TelnetClient` talks to it as a player would.
"""

import atexit
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAME_PARTS = ("server", "typeclasses", "commands", "world", "web")
IGNORED = shutil.ignore_patterns("*.db3", "*.pid", "*.log", "logs", "__pycache__",
                                 "secret_settings.py", "ai_assistant_data", ".static", ".media")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
IAC, DONT, DO, WONT, WILL, SB, SE = 255, 254, 253, 252, 251, 250, 240
SQLITE_FILE = os.path.join("server", "evennia.db3")
# The migrated database every server of this process starts from: its SQLite file, or the
# name of its PostgreSQL database (made by the first server that needs it).
_TEMPLATE = {}


# How long the Server a first start replaces may take to exit after the restart.
REPLACED_SERVER_SECONDS = 60


class LingeringServerWarning(UserWarning):
    """A Server process that did not exit after it was shut down (killed by the harness)."""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class GameServer:
    """
    Every server made in this process is in `GameServer.made` until its `cleanup()`, so that a
    failed test can show their logs (`log_tails`).

    Args:
        env (dict, optional): Extra environment for the server (e.g. the LLM endpoint).
        settings (str, optional): Extra Python lines for the test's secret_settings.py.
        website (bool): Serve the game's website on a free port (`web_url`); off by default.
    """

    made = []
    # How long `evennia start` may take: a loaded 2-core machine took 30-50 s.
    START_TIMEOUT = 240

    def __init__(self, env=None, settings="", website=False):
        self.dir = tempfile.mkdtemp(prefix="ai_assistant_game_")
        self.telnet_port = free_port()
        self.amp_port = free_port()
        self.website = website
        self.web_port = free_port() if website else None
        self.web_url = f"http://127.0.0.1:{self.web_port}" if website else None
        self.username = "admin"
        self.password = "test-password-1"
        self.extra_env = dict(env or {})
        self.extra_settings = settings
        self.log_marks = {}
        self.evennia = os.path.join(os.path.dirname(sys.executable), "evennia")
        GameServer.made.append(self)

    def _env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENAI_", "AI_ASSISTANT_", "DJANGO_SETTINGS", "MEM0_DIR"))}
        env.update(
            EVENNIA_SUPERUSER_USERNAME=self.username,
            EVENNIA_SUPERUSER_PASSWORD=self.password,
            EVENNIA_SUPERUSER_EMAIL="admin@example.com",
            MEM0_TELEMETRY="False",
        )
        # the launcher starts `twistd` from PATH: put this venv's bin first
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        env.update(self.extra_env)
        return env

    def _run(self, *args, timeout=240):
        return subprocess.run(
            [self.evennia, *args], cwd=self.dir, env=self._env(), capture_output=True,
            text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )

    def _own_database(self):
        """A migrated database for this server alone, copied from the process's template."""
        if os.environ.get("EVENNIA_DB_ENGINE") != "postgresql":
            if "sqlite" not in _TEMPLATE:
                self._migrate()
                template = os.path.join(tempfile.mkdtemp(prefix="ai_assistant_template_"),
                                        "evennia.db3")
                shutil.copyfile(os.path.join(self.dir, SQLITE_FILE), template)
                atexit.register(shutil.rmtree, os.path.dirname(template), True)
                _TEMPLATE["sqlite"] = template
            else:
                shutil.copyfile(_TEMPLATE["sqlite"], os.path.join(self.dir, SQLITE_FILE))
            return
        import uuid

        import psycopg

        if "postgresql" not in _TEMPLATE:
            template = f"game_template_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(**_postgres_params(), autocommit=True) as connection:
                connection.execute(f'CREATE DATABASE "{template}"')
            self.extra_env["EVENNIA_DB_NAME"] = template
            self._migrate()
            _TEMPLATE["postgresql"] = template
            atexit.register(_drop_postgres_database, template)
        self.database = f"game_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(**_postgres_params(), autocommit=True) as connection:
            connection.execute(
                f'CREATE DATABASE "{self.database}" TEMPLATE "{_TEMPLATE["postgresql"]}"')
        self.extra_env["EVENNIA_DB_NAME"] = self.database

    def _migrate(self):
        result = self._run("migrate")
        if result.returncode != 0:
            raise RuntimeError(f"evennia migrate failed:\n{result.stdout}\n{result.stderr}")

    def _drop_database(self):
        if getattr(self, "database", None) is None:
            return
        _drop_postgres_database(self.database)
        self.database = None

    def _write_game(self):
        """The game's folders, with the harness's settings appended to its `settings.py`."""
        for part in GAME_PARTS:
            shutil.copytree(os.path.join(ROOT, part), os.path.join(self.dir, part), ignore=IGNORED)
        os.makedirs(os.path.join(self.dir, "server", "logs"), exist_ok=True)
        with open(os.path.join(self.dir, "server", "conf", "settings.py"), "a") as handle:
            handle.write(
                "\n\n# The test harness's own settings (tests/game_server.py): last, so that\n"
                "# they win over whatever the game set above, its secret settings included.\n"
                f"TELNET_PORTS = [{self.telnet_port}]\n"
                "TELNET_INTERFACES = ['127.0.0.1']\n"
                f"AMP_PORT = {self.amp_port}\n"
                "AMP_INTERFACE = '127.0.0.1'\n"
                f"{self._web_settings()}"
                "WEBSOCKET_CLIENT_ENABLED = False\n"
                "SSL_ENABLED = False\n"
                "SSH_ENABLED = False\n"
                "MAX_CONNECTION_RATE = 1000\n"
                "MAX_COMMAND_RATE = 1000\n"
                # the tests that share a game each make their own players, from one address
                "CREATION_THROTTLE_LIMIT = None\n"
                "LOGIN_THROTTLE_LIMIT = None\n"
                f"{self._stacks_on_signal()}"
                f"{self.extra_settings}\n"
            )

    def start(self):
        """
        Start the game and wait until its Server takes telnet connections.

        Returns:
            GameServer: Itself.

        Raises:
            RuntimeError: The start failed; every process it had started is stopped by then.
        """
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self):
        self._write_game()
        self._own_database()
        result = self._launch()
        for _ in range(3):
            # on a busy machine the launcher may time out reaching a Portal slow to load; the
            # Portal is up by then, and starting again brings the Server up
            if "timed out" not in result.stdout:
                break
            time.sleep(5)
            result = self._launch()
        if result.returncode != 0:
            raise RuntimeError(f"evennia start failed:\n{result.stdout}\n{result.stderr}")
        # the first start restarts the Server once after the initial setup: wait for that
        retried = False
        deadline = time.time() + 150
        while time.time() < deadline:
            log = self.logs()
            restart = log.rfind("Restarting Server once")
            ready = (log.find("successfully restarted", restart) > restart if restart >= 0
                     else "Evennia Server successfully started" in log)
            if ready:
                try:
                    with socket.create_connection(("127.0.0.1", self.telnet_port), timeout=1):
                        pass
                except OSError:
                    pass
                else:
                    self._wait_for_the_replaced_server()
                    return self
            elif not retried and "different application entirely" in log:
                # under load the restarted Server can race the old one's pid file: start again
                retried = True
                self._launch()
            time.sleep(0.5)
        raise RuntimeError(f"server did not start on {self.telnet_port}:\n{self.logs()}")

    def servers(self):
        """Pids of this game's live Server processes (by command line: a pid file may still
        name the process the first start replaced)."""
        found = []
        for pid in self.processes():
            try:
                if "server/server.py" in _command_line(pid) and _alive(pid):
                    found.append(pid)
            except OSError:
                continue
        return found

    def _wait_for_the_replaced_server(self, timeout=REPLACED_SERVER_SECONDS):
        """
        A started game has one Server: the one its first start replaced (after the initial
        setup) goes within seconds of saying "Server Shut Down". One still there after
        `timeout` s is a fault of its own, not of the game, which the new Server runs: it is
        reported (a `LingeringServerWarning`, and the test's stderr) with where its threads
        are, and killed, so that the game has one Server as the tests expect.
        """
        deadline = time.time() + timeout
        while len(servers := self.servers()) > 1:
            if time.time() > deadline:
                newest = max(servers, key=_start_tick)
                for pid in servers:
                    if pid != newest:
                        self._kill_lingering(pid, timeout)
                return
            time.sleep(0.5)

    def _kill_lingering(self, pid, waited):
        report = (f"the Server this game's first start replaced was still there {waited} s "
                  f"after the restart; killed. {_where(pid)}\n"
                  f"--- server.log (last lines)\n{self.log_tails().get('server.log', '')}")
        print(report, file=sys.stderr)
        warnings.warn(report, LingeringServerWarning, stacklevel=1)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.time() + 10
        while time.time() < deadline and _alive(pid):
            time.sleep(0.1)

    def _launch(self):
        """
        `evennia start`, which returns once the Server has told the Portal it is up: a start
        that hangs raises with where each of the game's processes is and the end of its logs
        (taken now: a failed start removes the game's folder).
        """
        try:
            return self._run("start", timeout=self.START_TIMEOUT)
        except subprocess.TimeoutExpired:
            stacks = "\n".join(_where(pid) for pid in self.processes())
            raise RuntimeError(f"evennia start did not return in {self.START_TIMEOUT} s.\n"
                               f"{stacks or '(no process of the game runs)'}\n"
                               f"{self.log_report()}") from None

    def reload(self, client, timeout=90):
        """
        Reload the game through `client` (a superuser's) and wait until it is back.

        Evennia's Portal starts the new Server as soon as the old one drops its connection; on
        a busy machine the new one can read the old one's pid file before that process is gone,
        and it then exits ("a different application entirely"). The launcher's start brings it
        up again, as it does in `start()`.

        Raises:
            TimeoutError: The Server did not come back within `timeout` seconds (its logs are
                in the message).
        """
        self.mark_logs()
        client.send("reload")
        deadline = time.time() + timeout
        retried = False
        while time.time() < deadline:
            try:
                client.read_until(r"(?i)server restarted|reloaded", timeout=1)
                return
            except TimeoutError:
                pass
            if not retried and "different application entirely" in self.logs():
                retried = True
                self._launch()
        raise TimeoutError(f"the game did not come back from a reload in {timeout}s:\n"
                           f"{self.log_report()}")

    def _stacks_on_signal(self):
        """
        Settings lines: each process of the game appends every thread's stack to its
        `server/logs/stacks.txt` on SIGUSR2 (a process forked after the settings were read keeps
        the file), so that one that will not stop tells where it hangs before `stop()` kills it.
        The path is this game's own, whatever folder a process reading the settings runs in.
        """
        path = os.path.join(self.dir, "server", "logs", "stacks.txt")
        return ("import faulthandler as _faulthandler, signal as _signal\n"
                f"_STACKS = open({path!r}, 'a')\n"
                "_faulthandler.register(_signal.SIGUSR2, file=_STACKS, all_threads=True)\n")

    def _web_settings(self):
        if not self.website:
            return "WEBSERVER_ENABLED = False\n"
        # the Portal proxies the public port to the Server's own web port
        return (f"WEBSERVER_ENABLED = True\n"
                f"WEBSERVER_PORTS = [({self.web_port}, {free_port()})]\n"
                "WEBSERVER_INTERFACES = ['127.0.0.1']\n")

    def logs(self, name="server.log"):
        """What the log `name` holds, from the last `mark_logs()` on (all of it without)."""
        path = os.path.join(self.dir, "server", "logs", name)
        if not os.path.exists(path):
            return ""
        with open(path, "rb") as handle:
            handle.seek(self.log_marks.get(name, 0))
            return handle.read().decode("utf-8", errors="replace")

    def log_tails(self, lines=80):
        """The last `lines` of each of this game's logs, whatever `mark_logs()` said."""
        folder = os.path.join(self.dir, "server", "logs")
        tails = {}
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
            with open(os.path.join(folder, name), "rb") as handle:
                text = handle.read().decode("utf-8", errors="replace")
            tails[name] = "\n".join(text.splitlines()[-lines:])
        return tails

    def log_report(self):
        """`log_tails()` as text, each log under a heading, for an error's message."""
        return "\n".join(f"--- {name} (last lines)\n{tail}"
                         for name, tail in self.log_tails().items())

    def mark_logs(self):
        """From now on `logs()` shows only what is written after this (a shared game's test)."""
        folder = os.path.join(self.dir, "server", "logs")
        self.log_marks = {name: os.path.getsize(os.path.join(folder, name))
                          for name in os.listdir(folder) if name.endswith(".log")}

    def pids(self):
        pids = []
        for name in ("server.pid", "portal.pid"):
            path = os.path.join(self.dir, "server", name)
            if os.path.exists(path):
                with open(path) as handle:
                    text = handle.read().strip()
                if text.isdigit():
                    pids.append(int(text))
        return pids

    def processes(self):
        """Pids of every process started from this game folder (portal, server, restarts)."""
        found = set(self.pids())
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if self.dir.encode() in handle.read():
                        found.add(int(entry))
            except OSError:
                continue
        found.discard(os.getpid())
        return sorted(found)

    def stop(self):
        """Stop every process started from this game's folder. Returns the pids left alive."""
        if not self.processes():
            return []
        try:
            self._run("stop", timeout=60)
        except subprocess.TimeoutExpired:
            pass
        pids = self.processes()
        deadline = time.time() + 20
        for pid in pids:
            while time.time() < deadline and _alive(pid):
                time.sleep(0.2)
            if _alive(pid):
                self._report_hang(pid)
                os.kill(pid, signal.SIGKILL)
        # a killed process is gone a moment later, not at once
        deadline = time.time() + 10
        while time.time() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.1)
        return [pid for pid in pids if _alive(pid)]

    def _report_hang(self, pid):
        """
        Print (to the test's captured stderr) where a process that would not stop is: read
        from outside first (`_where`), then by its own `faulthandler` (SIGUSR2), which may
        end a process past finalising its interpreter (the signal's default action).
        """
        where = _where(pid)
        try:
            path = os.path.join(self.dir, "server", "logs", "stacks.txt")
            written = os.path.getsize(path) if os.path.exists(path) else 0
            os.kill(pid, signal.SIGUSR2)
        except OSError:
            print(f"{where}\n(did not stop; gone before its own dump)", file=sys.stderr)
            return
        time.sleep(1)
        stacks = "(none written)"
        if os.path.exists(path):
            with open(path, errors="replace") as handle:
                handle.seek(written)
                stacks = handle.read() or stacks
        print(f"{where}\ndid not stop, killed; its own dump (faulthandler):\n{stacks}",
              file=sys.stderr)

    def cleanup(self):
        if self in GameServer.made:
            GameServer.made.remove(self)
        shutil.rmtree(self.dir, ignore_errors=True)
        self._drop_database()


@contextlib.contextmanager
def running_game(**options):
    """A started `GameServer(**options)`, stopped and removed afterwards (no process left)."""
    server = GameServer(**options)
    try:
        server.start()
        yield server
    finally:
        left = server.stop()
        server.cleanup()
        assert not left, f"server processes left running: {left}"


def login(server):
    """A `TelnetClient` logged in as the server's superuser, standing in Limbo."""
    client = TelnetClient(server.telnet_port)
    client.read_until(r"connect", timeout=60)
    client.send(f"connect {server.username} {server.password}")
    client.read_until(r"Limbo", timeout=60)
    client.drain(0.5)
    return client


def player(server, name, password="player-pass-1"):
    """A `TelnetClient` logged in as a new non-admin player `name`, standing in Limbo."""
    client = TelnetClient(server.telnet_port)
    client.read_until(r"connect", timeout=60)
    client.send(f"create {name} {password}")
    client.read_until(r"Is this what you intended", timeout=60)
    client.send("Y")
    client.read_until(r"(?i)created|welcome", timeout=60)
    client.send(f"connect {name} {password}")
    client.read_until(r"Limbo", timeout=60)
    client.drain(0.5)
    return client


def _postgres_params():
    return {
        "dbname": os.environ["EVENNIA_DB_NAME"],
        "user": os.environ["EVENNIA_DB_USER"],
        "password": os.environ.get("EVENNIA_DB_PASSWORD", ""),
        "host": os.environ["EVENNIA_DB_HOST"],
        "port": os.environ["EVENNIA_DB_PORT"],
    }


def _drop_postgres_database(name):
    import psycopg

    with psycopg.connect(**_postgres_params(), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _command_line(pid):
    """The command line of process `pid` (OSError when it is gone)."""
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()


def _where(pid):
    """
    Process `pid`'s command line and every thread's stack: py-spy's, and where py-spy finds
    no interpreter (a process past its interpreter's finalisation), gdb's native ones.
    """
    try:
        command = _command_line(pid)
    except OSError:
        return f"process {pid}: gone"
    stacks = _spy_dump(pid)
    if not stacks.startswith("Process "):  # py-spy read nothing
        stacks += f"\ngdb, every thread's native stack:\n{_gdb_stacks(pid)}"
    return f"process {pid}: {command}\n{stacks}"


def _gdb_stacks(pid):
    """Every thread's native stack of `pid`, by gdb (when it is installed), names included."""
    names = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        tids = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as handle:
                names.append(f"{tid} {handle.read().strip()}")
        except OSError:
            continue
    try:
        done = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx",
                               "-ex", "thread apply all bt 30"],
                              capture_output=True, text=True, timeout=60)
        traces = done.stdout[-20000:] or done.stderr[-2000:]
    except (OSError, subprocess.TimeoutExpired) as err:
        traces = f"(gdb failed: {err})"
    return f"threads: {', '.join(names)}\n{traces}"


def _start_tick(pid):
    """When process `pid` started (clock ticks since boot; 0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def _spy_dump(pid):
    """
    Every thread's stack of `pid`, native frames included, read from outside by py-spy: it
    also tells where a process hangs that no longer runs Python's signal handlers (one that
    is finalising its interpreter, where `faulthandler` is off).
    """
    executable = os.path.join(os.path.dirname(sys.executable), "py-spy")
    try:
        done = subprocess.run([executable, "dump", "--pid", str(pid), "--native"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"(py-spy dump failed: {err})"
    return (done.stdout + done.stderr).strip() or "(py-spy said nothing)"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); look at its state
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


class TelnetClient:
    """
    A minimal telnet client: refuses every option, strips negotiation and ANSI codes.

    Args:
        port (int): The game's telnet port on 127.0.0.1.
    """

    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = ""

    def _receive(self, timeout):
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        if not data:
            raise ConnectionError("server closed the connection")
        text, replies, i = bytearray(), bytearray(), 0
        while i < len(data):
            byte = data[i]
            if byte == IAC and i + 1 < len(data):
                command = data[i + 1]
                if command in (DO, DONT, WILL, WONT) and i + 2 < len(data):
                    option = data[i + 2]
                    if command == DO:
                        replies += bytes([IAC, WONT, option])
                    elif command == WILL:
                        replies += bytes([IAC, DONT, option])
                    i += 3
                    continue
                if command == SB:
                    end = data.find(bytes([IAC, SE]), i)
                    i = len(data) if end < 0 else end + 2
                    continue
                if command == IAC:
                    text.append(IAC)
                i += 2
                continue
            text.append(byte)
            i += 1
        if replies:
            self.sock.sendall(bytes(replies))
        self.buffer += ANSI.sub("", text.decode("utf-8", errors="replace")).replace("\r", "")
        return True

    def read_until(self, pattern, timeout=30):
        """
        Read until `pattern` (a regex) appears; return and consume the text up to its end.

        Raises:
            TimeoutError: With everything read so far.
        """
        regex = re.compile(pattern)
        deadline = time.time() + timeout
        while True:
            match = regex.search(self.buffer)
            if match:
                text, self.buffer = self.buffer[: match.end()], self.buffer[match.end():]
                return text
            remaining = deadline - time.time()
            if remaining <= 0:
                raise TimeoutError(f"waited {timeout}s for {pattern!r}; got:\n{self.buffer}")
            self._receive(min(remaining, 1.0))

    def drain(self, quiet=0.3):
        """Read whatever arrives until the line is quiet for `quiet` seconds."""
        while self._receive(quiet):
            pass
        text, self.buffer = self.buffer, ""
        return text

    def send(self, line):
        self.sock.sendall(line.encode("utf-8") + b"\r\n")

    def command(self, line, expect, timeout=30):
        """Send a command and wait for `expect` in the reply."""
        self.drain(0.1)
        self.send(line)
        return self.read_until(expect, timeout=timeout)

    def close(self):
        try:
            self.send("quit")
        except OSError:
            pass
        self.sock.close()
