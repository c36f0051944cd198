"""
End-to-end: the suite run next to a running game leaves the game's files alone.

A real demo game runs with Ada talking (her write-ahead log holds what she heard); the suite's
shell tests that flush and clean up state logs run in another process with the game's folder
as their working directory (so Evennia resolves it as their GAME_DIR, as it did when a test run
deleted a live game's log). The game's logs must be exactly as they were, and the test run
must leave no file in the game's folder nor in the repository's `server/ai_assistant_data`.
"""

import glob
import os
import re
import subprocess
import sys
import time

from game_server import GameServer, login

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def files_under(folder):
    """{relative path: (size, mtime_ns)} of every file under `folder`."""
    found = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue
            found[os.path.relpath(path, folder)] = (stat.st_size, stat.st_mtime_ns)
    return found


def settled(folder, quiet=3.0, timeout=60):
    """The files under `folder` once nothing has changed for `quiet` seconds."""
    last, since, deadline = files_under(folder), time.time(), time.time() + timeout
    while time.time() < deadline:
        time.sleep(0.5)
        now = files_under(folder)
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return now
    raise AssertionError(f"{folder} kept changing: {last}")


def test_the_suite_next_to_a_running_game_leaves_its_logs_alone():
    server = GameServer()
    client = None
    repo_data = os.path.join(ROOT, "server", "ai_assistant_data")
    repo_before = files_under(repo_data)
    try:
        server.start()
        client = login(server)
        # no tick during the test: what is in her log stays there until we look again
        client.command("@assistant/config Ada = ticks.awake 3600", r"ticks.awake[^\n]*\n")
        client.command("talk Ada = remember the swordfish", r"Ada[^\n]*\n", timeout=40)
        # the game's own folder of its database (a subfolder when that is PostgreSQL)
        logs = max(glob.glob(os.path.join(server.dir, "server", "ai_assistant_data", "**",
                                          "state_log"), recursive=True),
                   key=lambda folder: len(os.listdir(folder)))
        before = settled(logs)
        assert any(name.startswith("assistant_") for name in before), before
        assert any(size > 0 for size, _ in before.values())

        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             os.path.join(ROOT, "tests", "shell", "test_shell.py"),
             os.path.join(ROOT, "tests", "shell", "test_durability.py"),
             "-k", "tick_counts or earlier_npc or flush_empties"],
            cwd=server.dir, capture_output=True, text=True, timeout=600,
            # under `make test-postgres` its test database is a name of its own (pytest-django's
            # suffix for parallel environments): `evennia test` in another worker drops and
            # makes again the plain `test_<name>` one
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TOX_PARALLEL_ENV": "isolation"},
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert re.search(r"\b3 passed", run.stdout), run.stdout[-2000:]

        assert files_under(logs) == before  # same names, sizes and times
        assert files_under(repo_data) == repo_before
    finally:
        if client is not None:
            client.close()
        left = server.stop()
        server.cleanup()
    assert not left, f"server processes left running: {left}"
