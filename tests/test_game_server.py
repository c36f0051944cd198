"""
The e2e harness itself (tests/game_server.py), without starting a game: its settings win over
the game's own, and a start that fails leaves no process behind.
"""

import os
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
    """The names a settings file defines, as Django would read it."""
    names = {"__file__": str(path), "__name__": "server.conf.settings"}
    exec(compile(path.read_text(), str(path), "exec"), names)  # noqa: S102 - our own file
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


def test_a_hung_process_is_read_from_outside_native_frames_included():
    # what `stop` prints for a process that will not stop: py-spy reads it without its help,
    # so a process past running Python's signal handlers still tells where it is
    child = subprocess.Popen([sys.executable, "-c", "import time\ndef hung():\n"
                              "    time.sleep(60)\nhung()\n"])
    try:
        time.sleep(1.0)
        dump = game_server._spy_dump(child.pid)
    finally:
        child.kill()
        child.wait()
    if "ermission" in dump:  # no ptrace rights here (Yama's ptrace_scope 1, not root)
        pytest.skip(f"py-spy may not read another process here: {dump}")
    assert f"Process {child.pid}" in dump
    # the Python frame, and the native one below it where the thread waits
    assert "hung (<string>:3)" in dump and "time_sleep" in dump
