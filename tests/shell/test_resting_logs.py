"""
An assistant out of residency keeps no file open for its write-ahead log while the log holds
nothing the database lacks: a world of a thousand assistants would otherwise hold a thousand
open files (past a default `ulimit -n` of 1,024). Its next change opens the log again, and a
crash after it loses nothing.
"""

import os
import shutil

from assistant_npc import MECHANICAL, WithAda, game_dir
from django.test import override_settings
from evennia.utils import create
from evennia.utils.test_resources import EvenniaTest
from test_durability import crash

from ai_assistant import durability
from ai_assistant.plumbing import documents, residency
from ai_assistant.plumbing.residency import Residency
from ai_assistant.plumbing.state_log import read_log
from ai_assistant.typeclasses import AssistantCharacter

GAME_DIR = game_dir("resting_logs")
TEST_SETTINGS = {**MECHANICAL, "memory": {"enabled": False, "resident_assistants": 1}}


def open_files():
    """The paths this process holds open."""
    folder = f"/proc/{os.getpid()}/fd"
    paths = set()
    for fd in os.listdir(folder):
        try:
            paths.add(os.readlink(os.path.join(folder, fd)))
        except OSError:  # closed while listed
            pass
    return paths


@override_settings(AI_ASSISTANT=TEST_SETTINGS, GAME_DIR=GAME_DIR)
class TestRestingLogs(WithAda, EvenniaTest):
    def setUp(self):
        shutil.rmtree(durability.log_folder(), ignore_errors=True)
        super().setUp()
        saved = residency.RESIDENCY
        residency.RESIDENCY = Residency(capacity=1)
        self.addCleanup(setattr, residency, "RESIDENCY", saved)
        self.bob = create.create_object(AssistantCharacter, key="Bob", location=self.room1,
                                        home=self.room1)

    def use(self, npc):
        """What a reply does first: it reads the journal (and so makes `npc` resident)."""
        return npc.assistant.ports().state.get(documents.JOURNAL)

    def test_a_released_assistant_with_a_flushed_log_holds_no_file_open(self):
        ada_log = durability.log_path(self.npc)
        self.use(self.npc)
        self.npc.assistant.hear(self.char1, "Ada, the ferry leaves at dawn", "talk")
        assert ada_log in open_files()
        self.use(self.bob)  # Ada is released with a change the database lacks: the log stays
        assert ada_log in open_files()
        self.npc.assistant.flush()  # flushed out of residency: it rests at once
        assert ada_log not in open_files()
        assert read_log(ada_log) == ({}, 0, False)  # its header, naming its writer, is kept

    def test_a_resting_log_opens_again_on_the_next_change_and_a_crash_loses_nothing(self):
        ada_log = durability.log_path(self.npc)
        self.use(self.npc)
        self.npc.assistant.hear(self.char1, "Ada, the ferry leaves at dawn", "talk")
        self.npc.assistant.flush()
        self.use(self.bob)
        assert ada_log not in open_files()
        self.npc.assistant.hear(self.char1, "Ada, the mill burned down", "talk")
        assert ada_log in open_files()
        crash(self.npc)
        pending = self.npc.assistant.ports().state.get(documents.PENDING_EVENTS)
        assert [event["text"] for event in pending][-1] == "Ada, the mill burned down"

    def test_a_reload_leaves_the_empty_logs_of_assistants_not_in_use_unopened(self):
        ada_log = durability.log_path(self.npc)
        self.npc.assistant.hear(self.char1, "Ada, the ferry leaves at dawn", "talk")
        self.npc.assistant.flush()
        crash(self.npc)  # what a reload leaves: nothing in memory, an empty log on disk
        written = os.stat(ada_log).st_mtime_ns
        self.script.at_server_start()
        assert ada_log not in open_files() and os.stat(ada_log).st_mtime_ns == written
        self.npc.assistant.hear(self.char1, "Ada, the mill burned down", "talk")
        crash(self.npc)
        self.script.at_server_start()  # the line is replayed from the log it opened
        pending = self.npc.assistant.ports().state.get(documents.PENDING_EVENTS)
        assert [event["text"] for event in pending][-1] == "Ada, the mill burned down"
