"""
Evennia's own tests, run with the demo game's settings in a throwaway copy of the game.

    python tests/evennia_suite.py [test labels...]

Copies the game directory as `game_server.GameServer` does (no database, logs, secrets or
ai_assistant_data of the repository's game), then runs `evennia test --settings settings.py`
there. With no labels it runs the server tests that the demo's initial setup (which spawns
Ada) must leave clean: `test_initial_setup`, then `test_amp_connection`, which fails with a
DirtyReactorAggregateError if the setup left a pending reactor call.
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from game_server import GAME_PARTS, IGNORED, ROOT  # noqa: E402

DEFAULT_LABELS = ("evennia.server.tests.test_initial_setup",
                  "evennia.server.tests.test_amp_connection")


def run(labels=DEFAULT_LABELS, timeout=600):
    """
    Run Evennia's tests `labels` in a copy of the game.

    Returns:
        subprocess.CompletedProcess: The `evennia test` run (stdout and stderr together).
    """
    folder = tempfile.mkdtemp(prefix="ai_assistant_evennia_suite_")
    try:
        for part in GAME_PARTS:
            shutil.copytree(os.path.join(ROOT, part), os.path.join(folder, part), ignore=IGNORED)
        os.makedirs(os.path.join(folder, "server", "logs"), exist_ok=True)
        bin_dir = os.path.dirname(sys.executable)
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("OPENAI_", "AI_ASSISTANT_", "DJANGO_SETTINGS", "MEM0_DIR"))}
        env.update(MEM0_TELEMETRY="False", PATH=bin_dir + os.pathsep + env.get("PATH", ""))
        return subprocess.run(
            [os.path.join(bin_dir, "evennia"), "test", "--settings", "settings.py", *labels],
            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=timeout, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    result = run(tuple(sys.argv[1:]) or DEFAULT_LABELS)
    print(result.stdout)
    sys.exit(result.returncode)
