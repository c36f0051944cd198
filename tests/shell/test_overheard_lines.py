"""
A line said in a room of assistants (`heard_line`): what every listener shares is worked out
once, the assistant a line is said to takes it at once - its write-ahead log record written
before anyone is shown the line - and the others overhear it in reactor turns of their own,
each in the order the lines were said.
"""

import shutil
from unittest.mock import patch

from assistant_npc import MECHANICAL, WithAda, game_dir, run_reactor_turns
from django.test import override_settings
from evennia.utils import create
from evennia.utils.test_resources import EvenniaTest
from test_durability import crash
from twisted.internet import reactor

from ai_assistant import durability, heard_line
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.state_log import read_log
from ai_assistant.typeclasses import AssistantCharacter

GAME_DIR = game_dir("overheard")
TEST_SETTINGS = MECHANICAL


def logged_lines(npc):
    """The texts of the queued events that `npc`'s write-ahead log holds (what a replay gives)."""
    documents_logged = read_log(durability.log_path(npc))[0]
    events = documents_logged.get((durability.CHARACTER, documents.PENDING_EVENTS), [])
    return [event["text"] for event in events]


@override_settings(AI_ASSISTANT=TEST_SETTINGS, GAME_DIR=GAME_DIR)
class TestOverheardLines(WithAda, EvenniaTest):
    def setUp(self):
        shutil.rmtree(durability.log_folder(), ignore_errors=True)
        super().setUp()
        # Ada (self.npc), Bob and Cy stand in room1; char1 is a player
        self.bob, self.cy = (create.create_object(AssistantCharacter, key=key,
                                                  location=self.room1, home=self.room1)
                             for key in ("Bob", "Cy"))
        for npc in (self.npc, self.bob, self.cy):
            npc.assistant.flush()  # each starts from an empty log

    def heard(self, npc):
        return [event["text"] for event in
                npc.assistant.ports().state.get(documents.PENDING_EVENTS) or []]

    def test_an_assistant_s_line_is_overheard_one_listener_per_reactor_turn(self):
        self.npc.at_say("The well is dry again.")
        # nobody it was not said to takes it inside the speaker's turn
        assert self.heard(self.bob) == [] and self.heard(self.cy) == []
        assert logged_lines(self.bob) == [] and logged_lines(self.cy) == []
        reactor.runUntilCurrent()  # one pass: one listener
        taken = [npc for npc in (self.bob, self.cy) if self.heard(npc)]
        assert len(taken) == 1
        run_reactor_turns()
        for npc in (self.bob, self.cy):
            # each listener's own queue and its own log record
            assert self.heard(npc) == ["The well is dry again."]
            assert logged_lines(npc) == ["The well is dry again."]
        assert self.heard(self.npc) == []  # the speaker's own echo is not perceived

    def test_a_line_said_to_an_assistant_is_in_its_log_before_the_turn_ends(self):
        self.npc.at_say("Bob, the inn is north of the mill.")
        # Bob is named: his record is written now; Cy only overhears it, turns later
        assert logged_lines(self.bob) == ["Bob, the inn is north of the mill."]
        assert logged_lines(self.cy) == []
        for npc in (self.npc, self.bob, self.cy):
            crash(npc)  # kill -9 before the next reactor turn
        run_reactor_turns()  # the restarted server: what was queued in memory is gone
        assert self.heard(self.bob) == ["Bob, the inn is north of the mill."]  # replayed
        # what Cy had not taken yet is lost: nothing was acknowledged about it (see heard_line)
        assert self.heard(self.cy) == []

    def test_a_player_s_line_to_the_room_is_taken_at_once_by_every_assistant(self):
        self.char1.at_say("Good evening, everyone.")
        for npc in (self.npc, self.bob, self.cy):
            assert logged_lines(npc) == ["Good evening, everyone."]
            crash(npc)
        for npc in (self.npc, self.bob, self.cy):
            assert self.heard(npc) == ["Good evening, everyone."]

    def test_each_listener_takes_its_lines_in_the_order_they_were_said(self):
        self.npc.at_say("first, overheard")
        self.cy.at_say("Bob, second, said to Bob")
        # the line said to Bob took what he overheard before it first, in the same turn
        assert self.heard(self.bob) == ["first, overheard", "Bob, second, said to Bob"]
        assert logged_lines(self.bob) == ["first, overheard", "Bob, second, said to Bob"]
        self.bob.at_say("third, overheard")
        run_reactor_turns()
        assert self.heard(self.bob) == ["first, overheard", "Bob, second, said to Bob"]
        assert self.heard(self.cy) == ["first, overheard", "third, overheard"]
        assert self.heard(self.npc) == ["Bob, second, said to Bob", "third, overheard"]

    def test_a_flush_takes_what_was_overheard_first(self):
        # a reload or shutdown flushes every assistant: no overheard line is left behind
        self.npc.at_say("The ferry leaves at dawn.")
        self.bob.assistant.flush()
        assert self.bob.attributes.get(documents.PENDING_EVENTS)[-1][
            "text"] == "The ferry leaves at dawn."
        run_reactor_turns()  # its turn finds nothing left to take
        assert self.heard(self.bob) == ["The ferry leaves at dawn."]

    def test_a_listener_deleted_before_its_turn_takes_nothing(self):
        self.npc.at_say("Who left the gate open?")
        self.cy.delete()
        run_reactor_turns()
        assert self.heard(self.bob) == ["Who left the gate open?"]

    def test_what_every_listener_shares_is_worked_out_once_per_line(self):
        clock = type(self.npc.assistant.ports().clock)
        run_reactor_turns()  # what earlier tests left due runs now, not among this test's counts
        heard_line.lines_this_turn.clear()
        heard_line.admins_this_turn.clear()
        with patch.object(reactor, "running", True), \
                patch.object(clock, "now", autospec=True, side_effect=clock.now) as now:
            self.npc.at_say("Bob and Cy, the bell rang twice.")
            assert now.call_count == 1  # one time for the line, not one per listener
            run_reactor_turns()  # ends the turn: the next line gets a time of its own
            self.npc.at_say("Bob and Cy, and then once more.")
            assert now.call_count == 2
            run_reactor_turns()
        assert not heard_line.lines_this_turn and not heard_line.admins_this_turn
        first, second = ([npc.assistant.ports().state.get(documents.PENDING_EVENTS)[number]
                          for npc in (self.bob, self.cy)] for number in (0, 1))
        for events in (first, second):
            assert len({(event["time"], event["heard_at"], event["admin"])
                        for event in events}) == 1
