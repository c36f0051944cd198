"""
The e2e harness itself (tests/game_server.py), without starting a game: its settings win over
the game's own, and a start that fails leaves no process behind.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import game_server
import pytest
from game_server import GameServer

GAME_SETTINGS = '''
from evennia.settings_default import *  # noqa

try:
    from server.conf.secret_settings import *  # noqa
except ImportError:
    pass

# a game maker's own ports, after everything else
TELNET_PORTS = [4000]
AMP_PORT = 4006
WEBSERVER_ENABLED = True
WEBSERVER_PORTS = [(4001, 4005)]
'''


def settings_of(path):
    """The names a settings file defines, as Django would read it (the stack dump on SIGUSR2
    that the harness's lines set up is undone: this is the test's process, not a game's)."""
    import faulthandler

    names = {"__file__": str(path), "__name__": "server.conf.settings"}
    exec(compile(path.read_text(), str(path), "exec"), names)  # noqa: S102 - our own file
    if "_STACKS" in names:
        faulthandler.unregister(signal.SIGUSR2)
        names["_STACKS"].close()
    return names


def test_the_harness_settings_win_over_the_games_own(tmp_path, monkeypatch):
    game = tmp_path / "game"
    for part in game_server.GAME_PARTS:
        (game / part).mkdir(parents=True)
    (game / "server" / "conf").mkdir()
    (game / "server" / "conf" / "settings.py").write_text(GAME_SETTINGS)
    monkeypatch.setattr(game_server, "ROOT", str(game))
    server = GameServer(settings="MAX_CHAR_LIMIT = 1234")
    try:
        server._write_game()
        written = settings_of(Path(server.dir) / "server" / "conf" / "settings.py")
    finally:
        server.cleanup()
    assert written["TELNET_PORTS"] == [server.telnet_port] != [4000]
    assert written["AMP_PORT"] == server.amp_port != 4006
    assert written["WEBSERVER_ENABLED"] is False
    assert written["MAX_CHAR_LIMIT"] == 1234  # the test's own lines come last of all


def test_a_start_that_fails_stops_what_it_started(monkeypatch):
    server = GameServer()
    started, commands = [], []

    def failing_start():
        # a process of this game (its folder on its command line), then the failure
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                                         server.dir]))
        deadline = time.time() + 30  # until it runs as itself (just forked, it is the parent)
        while time.time() < deadline and started[0].pid not in server.processes():
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def run(*args, timeout=240):
        commands.append(args)
        if args == ("stop",):  # what `evennia stop` does: the game's processes end
            for process in started:
                os.kill(process.pid, signal.SIGTERM)
                process.wait(timeout=30)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(server, "_start", failing_start)
    monkeypatch.setattr(server, "_run", run)
    try:
        with pytest.raises(RuntimeError, match="did not start"):
            server.start()
        assert commands == [("stop",)]
        assert server.processes() == []
        assert started[0].poll() is not None
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
        server.cleanup()


def read_from_outside(command, read):
    """`(pid, read(pid))` of a process running `command`, killed afterwards."""
    child = subprocess.Popen(command)
    try:
        time.sleep(1.0)  # until it runs what it was started for
        return child.pid, read(child.pid)
    finally:
        child.kill()
        child.wait()


def test_a_hung_process_is_read_from_outside_native_frames_included():
    # what `stop` prints for a process that will not stop: py-spy reads it without its help,
    # so a process past running Python's signal handlers still tells where it is
    pid, dump = read_from_outside(
        [sys.executable, "-c", "import time\ndef hung():\n    time.sleep(60)\nhung()\n"],
        game_server._spy_dump)
    if "ermission" in dump:  # no ptrace rights here (Yama's ptrace_scope 1, not root)
        pytest.skip(f"py-spy may not read another process here: {dump}")
    assert f"Process {pid}" in dump
    # the Python frame, and the native one below it where the thread waits
    assert "hung (<string>:3)" in dump and "time_sleep" in dump


def test_a_start_that_hangs_says_where_the_games_processes_are(monkeypatch, tmp_path):
    # `evennia start` waits, without a bound of its own, for the Server to tell the Portal it
    # is up: a Server that hangs while starting leaves the launcher waiting, and the failure
    # must say where (the game's folder, and so its logs, are removed right after)
    server = GameServer()
    launcher = tmp_path / "evennia"
    launcher.write_text(
        f"#!{sys.executable}\n"
        "import os, signal, subprocess, sys, time\n"
        "pidfile = os.path.join('server', 'server.pid')\n"
        "if sys.argv[1] == 'stop':\n"
        "    os.kill(int(open(pidfile).read()), signal.SIGTERM)\n"
        "    os.remove(pidfile)\n"  # as twistd does when it ends
        "    sys.exit(0)\n"
        "logs = os.path.join('server', 'logs')\n"
        "os.makedirs(logs, exist_ok=True)\n"
        "with open(os.path.join(logs, 'server.log'), 'a') as log:\n"
        "    log.write('Server starting ...\\n')\n"
        # a 'server' of this game (its folder on its command line), hung in a function
        "code = 'import time\\ndef starting_hung():\\n    time.sleep(120)\\nstarting_hung()\\n'\n"
        "hung = subprocess.Popen([sys.executable, '-c', code, os.getcwd()])\n"
        "open(pidfile, 'w').write(str(hung.pid))\n"
        "time.sleep(120)\n")
    launcher.chmod(0o755)
    monkeypatch.setattr(server, "evennia", str(launcher))
    monkeypatch.setattr(server, "START_TIMEOUT", 3)
    monkeypatch.setattr(server, "_own_database", lambda: None)
    try:
        with pytest.raises(RuntimeError) as raised:
            server.start()
        said = str(raised.value)
        assert "evennia start did not return in 3 s" in said
        assert "--- server.log (last lines)\nServer starting ..." in said
        assert "-c import time" in said and server.dir in said  # the hung process, named
        if "ermission" not in said:  # py-spy may read another process here
            assert "starting_hung (<string>:3)" in said
        assert server.processes() == []  # and stopped
    finally:
        for pid in server.processes():
            os.kill(pid, signal.SIGKILL)
        server.cleanup()


def test_a_start_waits_for_the_server_it_replaced_and_kills_one_that_stays():
    # the first start restarts the Server after the initial setup: the game is started when
    # the replaced one has gone; one that stays is reported with where its threads are and
    # killed, the newer kept
    server = GameServer()
    marker = os.path.join(server.dir, "server", "server.py")  # on a Server's command line

    def fake_server(seconds, name):
        code = f"import time\ndef {name}():\n    time.sleep({seconds})\n{name}()\n"
        process = subprocess.Popen([sys.executable, "-c", code, marker])
        deadline = time.time() + 30
        while time.time() < deadline and process.pid not in server.servers():
            time.sleep(0.05)
        return process

    lingering = fake_server(60, "lingering_server")
    started = [lingering, fake_server(1.5, "replaced_server")]
    time.sleep(0.05)  # a later start tick than the two before
    started.append(fake_server(60, "new_server"))
    try:
        assert len(server.servers()) == 3
        with pytest.warns(game_server.LingeringServerWarning) as warned:
            server._wait_for_the_replaced_server(timeout=5)
        assert server.servers() == [started[2].pid]  # the newest kept, the replaced one gone
        assert lingering.wait(timeout=10) == -signal.SIGKILL
        [report] = [str(warning.message) for warning in warned]
        assert "still there 5 s after the restart; killed" in report
        assert f"process {lingering.pid}:" in report
        if "ermission" not in report:  # py-spy may read another process here
            assert "lingering_server (<string>:3)" in report
    finally:
        for process in started:
            process.kill()
            process.wait()
        server.cleanup()


def test_a_process_py_spy_cannot_read_is_read_by_gdb():
    # a Server past its interpreter's finalisation has no interpreter for py-spy to find:
    # its native stacks and its threads' names still say where it is (here: not Python)
    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed here")
    pid, where = read_from_outside(["sleep", "60"], game_server._where)
    if "ermission" in where:
        pytest.skip(f"no ptrace rights here: {where[:300]}")
    assert f"process {pid}: sleep 60" in where
    assert f"threads: {pid} sleep" in where
    assert "gdb, every thread's native stack" in where and "sleep" in where.split("gdb,")[1]
    assert "#0" in where  # a frame of the native backtrace
