"""
What the end-to-end tests share: games that are always stopped, and one game that the tests
which don't conflict share.

- `new_game(**options)` makes a `GameServer` that is stopped and removed after the test,
  whatever happened, a failed start included.
- `shared_game` is one mechanical game with its website, started once per test process (per
  xdist worker) for the tests that use it, and stopped when the process ends. Each of those
  tests logs in its own players and makes its own assistants, or talks to the demo's Ada; what
  a test points Ada at (`llm.base_url`, `llm.api_key`) is set back to the game's default after
  it, and its `logs()` start where the test started.

Under `make test` (xdist's `--dist loadfile`) a module's tests, and so its own game, stay in one
worker; the root conftest runs the e2e modules first, the shared game's first of all.
"""

import os

import pytest
from game_server import GameServer, _where, login, running_game

SHARED = "shared_game"
# the per-assistant settings a shared-game test may point Ada at
ADA_LLM_KEYS = ("llm.base_url", "llm.api_key")


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


@pytest.fixture(scope="session")
def shared_game():
    """The shared mechanical game (website on), started on first use."""
    with running_game(website=True) as server:
        yield server


@pytest.fixture(autouse=True)
def _shared_game_test(request):
    """A shared game's test sees the log from its own start on; Ada is reset after it."""
    if SHARED not in request.fixturenames:
        yield
        return
    server = request.getfixturevalue(SHARED)
    server.mark_logs()
    yield
    client = login(server)
    try:
        for key in ADA_LLM_KEYS:
            client.command(f"@assistant/config Ada = {key} default",
                           rf"Ada: {key} reset[^\n]*\n")
    finally:
        client.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed end-to-end test shows the end of each game's logs and where its Server's
    threads are (CI keeps nothing else)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for server in GameServer.made:
        for name, tail in server.log_tails().items():
            report.sections.append((f"{os.path.basename(server.dir)} {name} (last lines)", tail))
        # where the live Server's threads are (a turn waiting on a worker, a worker stuck)
        for pid in server.servers():
            report.sections.append((f"{os.path.basename(server.dir)} Server's threads",
                                    _where(pid)))
