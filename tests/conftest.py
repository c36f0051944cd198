"""
Test setup: Django + Evennia initialised once, the repository importable as the game dir.

Tests that touch the database take pytest-django's `db` fixture.
"""

import atexit
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
# test modules whose helpers (fakes, builders) other folders' tests import by module name
for shared in ("core/memory", "core/sleep", "core/agent", "e2e"):
    folder = os.path.join(ROOT, "tests", *shared.split("/"))
    if folder not in sys.path:
        sys.path.append(folder)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.conf.settings")
# mem0 must neither phone home nor write to the home folder, whoever imports it first.
os.environ.setdefault("MEM0_TELEMETRY", "False")
# mem0 takes its own folder once per process and writes to it again at every store it makes: a
# folder of this run, not the first test's temporary one, which mem0 would fill again after
# that test removed it
if "MEM0_DIR" not in os.environ:
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="ai_assistant_test_mem0_")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], True)


# Set by tests/test_layers.py: run only the tests marked `core`, with neither Django nor Evennia,
# to prove that the layers below the shell need neither.
CORE_ONLY = os.environ.get("AI_ASSISTANT_CORE_ONLY") == "1"


def pytest_configure(config):
    if CORE_ONLY:
        return
    import pytest_django.plugin

    blocker = config.stash[pytest_django.plugin.blocking_manager_key]
    blocker.unblock()
    try:
        import evennia
        from django.conf import settings

        # as Evennia's own test runner does: objects may lack a home while the DB is flushed
        settings.TEST_ENVIRONMENT = True
        # what the contrib writes (state logs, vector store, mem0's history) goes to a folder of
        # this run, never to a game's server/ai_assistant_data
        settings.AI_ASSISTANT_DATA_DIR = tempfile.mkdtemp(prefix="ai_assistant_test_data_")
        atexit.register(shutil.rmtree, settings.AI_ASSISTANT_DATA_DIR, True)

        evennia._init()
    finally:
        blocker.restore()
pytest_plugins = ["scripted_llm", "memory_store"]


import pytest  # noqa: E402

TESTS = os.path.dirname(os.path.abspath(__file__))
# the marker each folder's tests carry: the house's layers below the shell, and the real game
MARKERS_BY_FOLDER = {"core": "core", "e2e": "e2e"}


def folder_marker(path):
    """The marker of the tests in `path` (a file under tests/), or None."""
    relative = os.path.relpath(str(path), TESTS)
    return MARKERS_BY_FOLDER.get(relative.split(os.sep, 1)[0])


def pytest_ignore_collect(collection_path, config):
    # the shell's test modules import Evennia at the top: in a core-only run, not even collect
    # what lies outside tests/core
    if CORE_ONLY and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return folder_marker(collection_path) != "core"
    return None


# The game the e2e tests share (tests/e2e/conftest.py).
SHARED_GAME = "shared_game"


def run_order(item):
    """The e2e tests first (the shared game's together), the benches next, then the rest: the
    longest first, so that parallel workers (`--dist loadfile --no-loadscope-reorder`, which
    keeps a module's tests, and so its game, in one worker) end together."""
    marker = folder_marker(item.path)
    if marker == "e2e":
        return 0 if SHARED_GAME in item.fixturenames else 1
    return 2 if os.path.relpath(str(item.path), TESTS).startswith("bench") else 3


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # before `-m` selects: a test is marked by the folder it lives in
    for item in items:
        marker = folder_marker(item.path)
        if marker:
            item.add_marker(marker)
    items.sort(key=run_order)
    if not CORE_ONLY:
        return
    kept = [item for item in items if item.get_closest_marker("core")]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def pytest_unconfigure(config):
    if CORE_ONLY or "django.conf" not in sys.modules:
        return
    from django.conf import settings

    folder = getattr(settings, "AI_ASSISTANT_DATA_DIR", None)
    if folder and os.path.basename(folder).startswith("ai_assistant_test_data_"):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    if CORE_ONLY:
        leaked = sorted(name for name in ("django", "evennia") if name in sys.modules)
        if leaked:
            print(f"\nCORE-ONLY RUN IMPORTED {', '.join(leaked)}")
            session.exitstatus = 1


@pytest.fixture
def make_ports():
    """`make_ports(**kwargs)`: the ports of a test assistant (see `support.make_ports`)."""
    from support import make_ports as factory

    return factory
