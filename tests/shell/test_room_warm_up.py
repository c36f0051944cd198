"""
`room_warm_up.warm_room`: what the first command said in an assistant's room reads is read ahead,
on the reactor in small steps, and nothing a player sees changes.
"""

from unittest.mock import patch

from assistant_npc import WithAda, run_reactor_turns
from django.db import connection
from django.test.utils import CaptureQueriesContext
from evennia.commands.cmdhandler import generate_cmdset_providers, get_and_merge_cmdsets
from evennia.typeclasses.attributes import Attribute
from evennia.utils import create
from evennia.utils.test_resources import EvenniaCommandTest

from ai_assistant import room_warm_up
from ai_assistant.room_warm_up import room_steps, warm_room
from ai_assistant.typeclasses import AssistantCharacter


class TestRoomWarmUp(WithAda, EvenniaCommandTest):
    def setUp(self):
        super().setUp()
        self.account.puppet_object(self.session, self.char1)  # a player in Ada's room
        room_warm_up._heavy_read.clear()

    def tearDown(self):
        self.account.unpuppet_object(self.session)  # before Evennia's teardown deletes them
        room_warm_up._heavy_read.clear()
        super().tearDown()

    def warm(self, npc=None):
        done = []
        warm_room(npc or self.npc).addCallback(done.append)
        run_reactor_turns()
        assert done, "the warm-up did not finish"
        return done[0]

    def first_command_reads(self):
        """What `talk Ada = hello` reads before the assistant hears it: the input line's nicks,
        the merged command sets, the search among the room's assistants (the queries)."""
        with CaptureQueriesContext(connection) as queries:
            self.char1.nicks.nickreplace("talk Ada = hello", categories=("inputline"),
                                         include_account=True)
            _, providers, _, caller, _ = generate_cmdset_providers(self.session,
                                                                   session=self.session)
            merged = []
            get_and_merge_cmdsets(caller, providers, "session", "talk Ada = hello").addCallback(
                merged.append)
            found = self.char1.search(self.npc.key, candidates=[self.npc], use_nicks=True)
        assert merged and merged[0].get("talk") is not None and found == self.npc
        return [query["sql"] for query in queries.captured_queries]

    def test_a_first_command_reads_less_once_the_room_is_warmed(self):
        cold = self.first_command_reads()  # a command in a room nothing has read yet
        assert len(cold) > 1
        # the same room, as fresh as after a reload: a second assistant's room, warmed first
        room = create.create_object("evennia.objects.objects.DefaultRoom", key="Hall")
        bob = create.create_object(AssistantCharacter, key="Bob", location=room, home=room)
        self.char1.location = room
        self.npc = bob
        self.warm(bob)
        warmed = self.first_command_reads()
        # only the search's own query is left (a search always asks the database)
        assert len(warmed) == 1 and "DISTINCT" in warmed[0]

    def test_nothing_is_written_or_sent(self):
        attributes = Attribute.objects.count()
        with patch.object(self.session, "data_out") as sent, \
                patch.object(type(self.char1), "msg") as told:
            steps = self.warm()
        assert steps > 3
        sent.assert_not_called()
        told.assert_not_called()
        assert Attribute.objects.count() == attributes
        assert not self.npc.ndb.ai_state_dirty
        assert not (self.script.ndb.ai_state_dirty or ())

    def test_one_object_or_one_kind_of_read_a_step(self):
        objects = [self.room1, *self.room1.contents]
        players = [obj for obj in self.room1.contents
                   if obj is not self.npc and obj.sessions.count()]
        assert players == [self.char1]
        steps = list(room_steps(self.npc, log=print))
        # the contents; each object; the nicks, command sets and search of each player; and
        # the assistant's own reads: every step waits for the reactor's next turn
        assert len(steps) == 1 + len(objects) + 3 * len(players) + 1

    def test_the_heavy_documents_are_read_where_a_player_is_there_to_talk(self):
        for owner in (self.npc, self.script):
            for name in ("journal", "conversation_history"):
                (owner.ndb.ai_state_cache or {}).pop(name, None)
        self.warm()
        assert "journal" in self.npc.ndb.ai_state_cache
        assert "conversation_history" in self.script.ndb.ai_state_cache

    def test_no_heavy_read_in_an_empty_room_nor_past_the_resident_bound(self):
        room = create.create_object("evennia.objects.objects.DefaultRoom", key="Cellar")
        bob = create.create_object(AssistantCharacter, key="Bob", location=room, home=room)
        (bob.ndb.ai_state_cache or {}).pop("journal", None)
        self.warm(bob)
        assert "journal" not in bob.ndb.ai_state_cache  # nobody there to talk to
        self.char1.location = room
        room_warm_up._heavy_read.extend(range(100))  # the bound reached by other assistants
        self.warm(bob)
        assert "journal" not in bob.ndb.ai_state_cache

    def test_a_read_that_fails_is_logged_and_the_rest_still_runs(self):
        logged = []

        def broken(player, npc):
            raise RuntimeError("no such table")

        with patch.object(room_warm_up, "_search_read", broken):
            done = []
            warm_room(self.npc, log=logged.append).addCallback(done.append)
            run_reactor_turns()
        assert done and "broken" in logged[0] and "no such table" in logged[0]
        assert "-inputline" in self.char1.nicks.backend._catcache  # the reads around it ran

    def test_a_room_that_cannot_be_read_stops_the_warm_up_with_a_log_line(self):
        logged, done = [], []
        with patch.object(type(self.room1), "contents", property(lambda room: 1 / 0)):
            warm_room(self.npc, log=logged.append).addCallback(done.append)
            run_reactor_turns()
        assert done == [0] and "warm-up of the room stopped" in logged[0]

    def test_an_assistant_nowhere_warms_nothing(self):
        self.npc.location = None
        assert self.warm() == 0

    def test_the_handlers_warm_up_warms_its_room(self):
        with patch("ai_assistant.room_warm_up.warm_room") as warmed, \
                patch("ai_assistant.agent.warmup.warm_up_in_turn") as replies:
            self.npc.assistant.warm_up()
        replies.assert_called_once()
        warmed.assert_called_once()
        assert warmed.call_args.args[0] == self.npc
