"""
Tests never touch a game's data: the contrib's folder belongs to the database it runs against,
and a write-ahead log is removed only when it is provably stale (this database's, its writer
gone).
"""

import os
import subprocess
import sys

from django.conf import settings
from django.test import override_settings
from evennia.utils import create
from evennia.utils.test_resources import EvenniaTest

from ai_assistant import durability, game_data
from ai_assistant.adapters import semantic_data_dir
from ai_assistant.admin_commands import all_assistants
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.state_log import StateLog, read_writer
from ai_assistant.typeclasses import AssistantCharacter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_SETTINGS = {
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {"base_url": None, "api_key": None},
    "memory": {"enabled": False},
}


def test_the_folder_follows_the_database():
    game = "/games/castle"
    own = game_data.folder_for("sqlite:/games/castle/server/evennia.db3", game)
    assert own == "/games/castle/server/ai_assistant_data"  # the game's own, as it always was
    other = game_data.folder_for("sqlite:/tmp/bench/bench.db3", game)
    assert other.startswith(own + "/sqlite-bench.db3-") and other != own
    assert other == game_data.folder_for("sqlite:/tmp/bench/bench.db3", game)
    assert other != game_data.folder_for("sqlite:/tmp/other/bench.db3", game)
    live = game_data.folder_for("postgresql://127.0.0.1:5432/evennia", game)
    test = game_data.folder_for("postgresql://127.0.0.1:5432/test_evennia", game)
    assert live == own + "/postgresql-127.0.0.1-5432-evennia" and test != live
    memory = game_data.folder_for(f"sqlite:memory:{os.getpid()}:1", game)
    assert not memory.startswith(game) and os.path.isdir(memory)


def test_a_test_run_writes_into_a_folder_of_its_own():
    folder = settings.AI_ASSISTANT_DATA_DIR
    assert not folder.startswith(ROOT) and os.path.basename(folder).startswith(
        "ai_assistant_test_data_")
    assert game_data.data_folder() == semantic_data_dir() == folder
    assert durability.log_folder() == os.path.join(folder, "state_log")


def test_the_process_start_tells_a_reused_pid_apart():
    pid = os.getpid()
    started = game_data.process_started(pid)
    assert started and game_data.process_alive(pid, started)
    assert not game_data.process_alive(pid, str(int(started) + 1))  # same pid, another process
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert not game_data.process_alive(gone.pid, None)


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestStaleLogs(EvenniaTest):
    def setUp(self):
        super().setUp()
        self.npc = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                        home=self.room1)
        self.npc.assistant.ports().state.durability()
        self.database = game_data.database_identity()
        self.children = []

    def tearDown(self):
        for child in self.children:
            child.kill()
            child.wait()
        for npc in all_assistants():
            if npc.assistant.script:
                npc.assistant.script.unsubscribe()
        super().tearDown()

    def other_log(self, stamp, writer, text="someone else's goal"):
        """A log of another NPC with Ada's id (another creation time), written by `writer`."""
        path = os.path.join(durability.log_folder(), f"assistant_{self.npc.id}_{stamp}.log")
        log = StateLog(path, writer=writer)
        log.append("character", documents.CURRENT_GOALS, [text])
        log.close()
        return path

    def gone_pid(self):
        gone = subprocess.Popen(["true"])
        gone.wait()
        return gone.pid

    def alive_process(self):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        self.children.append(child)
        return child.pid, game_data.process_started(child.pid)

    def cleanup(self):
        durability._remove_stale_logs(self.npc, durability.log_path(self.npc))

    def test_its_own_log_names_this_process_and_database(self):
        # a log is written (and so named) from its first record
        self.npc.assistant.ports().state.set(documents.CURRENT_GOALS, ["find the map"])
        writer = read_writer(durability.log_path(self.npc))
        assert writer == (self.database, os.getpid(), game_data.process_started(os.getpid()))

    def test_a_log_whose_writer_is_alive_is_never_removed(self):
        pid, started = self.alive_process()
        path = self.other_log(1, (self.database, pid, started))
        self.cleanup()
        assert os.path.exists(path)

    def test_a_log_of_another_database_is_never_removed(self):
        path = self.other_log(2, ("sqlite:/games/castle/server/evennia.db3", self.gone_pid(),
                                  None))
        self.cleanup()
        assert os.path.exists(path)

    def test_a_log_that_names_no_writer_is_never_removed(self):
        path = self.other_log(3, None)
        self.cleanup()
        assert os.path.exists(path)

    def test_a_stale_log_of_this_database_is_removed_and_not_replayed(self):
        dead = self.other_log(4, (self.database, self.gone_pid(), None))
        # the pid of a process that is gone, since reused by one that started later
        pid = os.getpid()
        reused = self.other_log(5, (self.database, pid, str(int(game_data.process_started(pid))
                                                              - 1)))
        for name in ("ai_runtime", "ai_ports", "ai_state_cache", "ai_state_dirty"):
            setattr(self.npc.ndb, name, None)  # a new process: the next touch opens the log
        self.npc.assistant.script.ndb.ai_state_cache = None
        assert self.npc.assistant.ports().state.get(documents.CURRENT_GOALS) is None
        assert not os.path.exists(dead) and not os.path.exists(reused)
