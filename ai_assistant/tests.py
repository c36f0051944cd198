"""
The contrib's test suite for Evennia's own test runner, as Evennia's contribs ship theirs: from
the game folder, `evennia test --settings settings.py ai_assistant` runs it.

The suite itself is written for pytest (`tests/` beside this package in a source checkout: its
fixtures, the scripted LLM server, real game servers for the end-to-end tests, `make test`).
This test case runs that suite with pytest in a process of its own, where pytest-django makes
its own test database, shows pytest's report as it goes, and fails when any test fails.

`AI_ASSISTANT_PYTEST_ARGS` (shell words) replaces the default arguments, e.g.
`AI_ASSISTANT_PYTEST_ARGS="-m 'not e2e'"` or a test file's path. Where the package was installed
without its tests, or pytest is missing, the test skips and says why.
"""

import importlib.util
import os
import shlex
import subprocess
import sys
import unittest
from collections import deque
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent
TESTS = SOURCE / "tests"
# how much of pytest's report a failure quotes
REPORT_LINES = 80


def pytest_arguments():
    """The arguments pytest runs with: the environment's, else the suite in parallel."""
    given = os.environ.get("AI_ASSISTANT_PYTEST_ARGS")
    if given is not None:
        return shlex.split(given)
    if importlib.util.find_spec("xdist") is not None:
        return ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]
    return []


class TestPytestSuite(unittest.TestCase):
    """The whole pytest suite of the contrib, as one test of Evennia's runner."""

    def test_the_pytest_suite_passes(self):
        if not (TESTS / "conftest.py").exists():
            self.skipTest(f"no test suite at {TESTS}: the package was installed without it")
        if importlib.util.find_spec("pytest") is None:
            self.skipTest("pytest is not installed (pip install 'ai-assistant[test]')")
        # pytest's configuration (pyproject.toml) names the game's settings module itself
        env = {key: value for key, value in os.environ.items()
               if key != "DJANGO_SETTINGS_MODULE"}
        command = [sys.executable, "-m", "pytest", *pytest_arguments()]
        report = deque(maxlen=REPORT_LINES)
        with subprocess.Popen(command, cwd=SOURCE, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace") as pytest_run:
            for line in pytest_run.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                report.append(line)
        if pytest_run.returncode != 0:
            self.fail(f"pytest exited with {pytest_run.returncode} ({' '.join(command)}):\n"
                      + "".join(report))
