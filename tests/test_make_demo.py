"""
`make demo` tells the truth: it waits for `evennia status` to report the Server, starts it once
more when it did not come up, and fails loudly (non-zero, a clear message) when it still did
not. A stand-in `evennia` plays the launcher; the repository's game is never started.
"""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_EVENNIA = """#!/bin/sh
echo "$*" >> "{calls}"
if [ "$1" = status ]; then
  starts=$(grep -c '^start' "{calls}")
  echo "Portal: RUNNING"
  if [ "$starts" -ge "{up_after}" ]; then echo "Server: RUNNING"
  else echo "Server: NOT RUNNING"; fi
fi
exit 0
"""

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def demo(tmp_path, up_after):
    """Run `make demo` with a launcher whose Server is up after `up_after` starts (0: never)."""
    calls = tmp_path / "calls"
    calls.write_text("")
    fake = tmp_path / "evennia"
    fake.write_text(FAKE_EVENNIA.format(calls=calls, up_after=up_after or 99))
    fake.chmod(0o755)
    log = tmp_path / "server.log"
    log.write_text("Traceback: the Server could not bind its port\n")
    result = subprocess.run(
        ["make", "-s", "-o", "venv", "demo", f"EVENNIA={fake}", "DEMO_WAIT=2",
         f"DEMO_LOG={log}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    commands = [line.split()[0] for line in calls.read_text().splitlines()]
    return result, commands


def test_a_server_that_comes_up_is_reported_once(tmp_path):
    result, commands = demo(tmp_path, up_after=1)
    assert result.returncode == 0, result.stderr
    assert commands == ["migrate", "start", "status"]
    assert "Ada is in Limbo" in result.stdout


def test_a_server_that_does_not_come_up_is_started_once_more(tmp_path):
    result, commands = demo(tmp_path, up_after=2)
    assert result.returncode == 0, result.stderr
    assert commands.count("start") == 2
    assert "starting it once more" in result.stdout
    assert "Ada is in Limbo" in result.stdout


def test_a_server_that_never_comes_up_fails_loudly(tmp_path):
    result, commands = demo(tmp_path, up_after=0)
    assert result.returncode != 0
    assert commands.count("start") == 2  # one retry, no more
    assert "ERROR: the Evennia Server did not start (the game is NOT running)" in result.stderr
    assert "could not bind its port" in result.stderr  # the log's last lines, to act on
    assert "Ada is in Limbo" not in result.stdout
