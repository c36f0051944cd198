"""
The set-up the shell's tests share: assistants whose computing work runs in place, an assistant
NPC in Evennia's test room, and every assistant's ticker subscription dropped after each test.

Mix these into Evennia's test cases (`EvenniaTest`, `EvenniaCommandTest`), ahead of them:
`class TestX(WithAda, EvenniaCommandTest)`. They are mixins rather than pytest fixtures
because Evennia's test cases build their rooms in `setUp`, which runs after pytest's fixtures,
and because they must work the same under Evennia's own test runner.
"""

import atexit
import shutil
import tempfile
from unittest.mock import patch

from evennia.utils import create
from support import sync_runner
from twisted.internet import reactor

from ai_assistant import reactor_turns
from ai_assistant.admin_commands import all_assistants
from ai_assistant.typeclasses import AssistantCharacter

# A game's settings for an assistant in mechanical mode with long-term memory off.
MECHANICAL = {
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {"base_url": None, "api_key": None},
    "memory": {"enabled": False},
}


def game_dir(name):
    """A game folder for one test module (its state logs), removed when the process ends."""
    folder = tempfile.mkdtemp(prefix=f"ai_assistant_{name}_")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def run_reactor_turns(limit=100):
    """
    Run the reactor's due calls pass by pass, as a running reactor would (no reactor runs in
    a test), until none is due: work spread one piece per turn (`reactor_turns`) all runs.

    Returns:
        int: The passes that found something to run.
    """
    passes = 0
    while passes < limit and any(call.getTime() <= reactor.seconds()
                                 for call in reactor.getDelayedCalls()):  # fmt: skip
        reactor.runUntilCurrent()
        passes += 1
    return passes


class AssistantsInPlace:
    """
    An assistant's computing work (`ports.run_cpu_bound`: the worker pool in a game) runs in
    place, since no reactor runs in a test to hand the pool's results back; every assistant's
    ticker subscription is dropped after the test (before Evennia's teardown).
    """

    def setUp(self):
        super().setUp()
        in_place = patch("ai_assistant.plumbing.threads.run_cpu_bound", sync_runner)
        in_place.start()
        self.addCleanup(in_place.stop)

    def tearDown(self):
        for npc in all_assistants():
            if npc.assistant.script:
                npc.assistant.script.unsubscribe()
        reactor_turns.ticks.clear()  # flushes and tick work of assistants now gone
        reactor_turns.overheard.clear()  # and the lines they overheard
        super().tearDown()


class WithAda(AssistantsInPlace):
    """`self.npc`: Ada, an assistant at home in `room1`; `self.script`: her script."""

    def setUp(self):
        super().setUp()
        self.npc = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                        home=self.room1)
        self.script = self.npc.assistant.script
