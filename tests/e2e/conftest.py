"""
What the end-to-end tests share: games that are always stopped, and one game that the tests
which don't conflict share.

- `new_game(**options)` makes a `GameServer` that is stopped and removed after the test,
  whatever happened, a failed start included.
- `shared_game` is one mechanical game with its website, started once per test process for
  the tests that use it and stopped after the last of them. Each of those tests logs in its
  own players and makes its own assistants, or talks to the demo's Ada; what a test points
  Ada at (`llm.base_url`, `llm.api_key`) is set back to the game's default after it, and its
  `logs()` start where the test started.

Under `pytest -n` (xdist's `--dist loadgroup`), the tests of one game stay in one worker: the
root conftest groups each e2e module by its name, and the tests of the shared game together.
"""

import pytest
from game_server import GameServer, login, running_game

SHARED = "shared_game"
# the per-assistant settings a shared-game test may point Ada at
ADA_LLM_KEYS = ("llm.base_url", "llm.api_key")
_RUNNING = {}


@pytest.fixture
def new_game():
    """`new_game(**options)`: a `GameServer` (not started yet), stopped and removed after."""
    made = []

    def make(**options):
        server = GameServer(**options)
        made.append(server)
        return server

    yield make
    left = []
    for server in made:
        left += server.stop()
        server.cleanup()
    assert not left, f"server processes left running: {left}"


def _stop_shared():
    context = _RUNNING.pop(SHARED, None)
    if context is not None:
        context.__exit__(None, None, None)


@pytest.fixture(scope="session")
def shared_game():
    """The shared mechanical game (website on), started on first use."""
    if SHARED not in _RUNNING:
        context = running_game(website=True)
        server = context.__enter__()
        _RUNNING[SHARED] = context
        _RUNNING["server"] = server
    yield _RUNNING["server"]
    _stop_shared()


@pytest.fixture(autouse=True)
def _shared_game_test(request):
    """A shared game's test sees the log from its own start on; Ada is reset after it."""
    shared = SHARED in request.fixturenames
    if shared:
        request.getfixturevalue(SHARED).mark_logs()
    yield
    if not shared or SHARED not in _RUNNING:
        return
    client = login(_RUNNING["server"])
    try:
        for key in ADA_LLM_KEYS:
            client.command(f"@assistant/config Ada = {key} default",
                           rf"Ada: {key} reset[^\n]*\n")
    finally:
        client.close()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    # the shared game is stopped as soon as the tests that use it are done (the root conftest
    # runs them one after another), not at the end of the run: it would otherwise tick on
    # beside every later test. Last: after the test's own fixtures are torn down.
    if SHARED in getattr(item, "fixturenames", ()) and (
            nextitem is None or SHARED not in getattr(nextitem, "fixturenames", ())):
        _stop_shared()
