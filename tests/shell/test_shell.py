"""
The Evennia shell with the database: typeclasses, the handler and its mixin, ticker, perception,
room messages and the admin commands.
"""

from datetime import UTC, datetime
from unittest.mock import patch

from assistant_npc import WithAda, run_reactor_turns
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from evennia import TICKER_HANDLER
from evennia.commands.cmdhandler import cmdhandler
from evennia.objects.objects import DefaultCharacter
from evennia.utils import create
from evennia.utils.ansi import strip_ansi
from evennia.utils.test_resources import EvenniaCommandTest
from twisted.internet import defer

from ai_assistant.adapters import AttributeState
from ai_assistant.admin_commands import CmdAssistant, all_assistants
from ai_assistant.commands import AssistantToolCmdSet, CmdTalk
from ai_assistant.handler import AssistantHandler, AssistantMixin
from ai_assistant.plumbing import documents
from ai_assistant.typeclasses import AssistantCharacter

TEST_SETTINGS = {
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {"base_url": None, "api_key": None},
    "memory": {"enabled": False},
}


class Librarian(AssistantMixin, DefaultCharacter):
    """A game's own NPC class made an assistant by the mixin; onlookers see a title."""

    def get_display_name(self, looker=None, **kwargs):
        return self.key if looker is self else f"{self.key} the librarian"


LIBRARIAN = f"{Librarian.__module__}.Librarian"


def tickers_of(npc):
    idstring = f"ai_assistant_{npc.id}"
    return [key for key in TICKER_HANDLER.all_display() if key[4] == idstring]


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestAssistantShell(WithAda, EvenniaCommandTest):
    def test_created_awake_with_one_ticker_at_5s(self):
        assert self.npc.assistant.operating_mode == "awake"
        assert self.script.db.ticker_interval == 5
        keys = tickers_of(self.npc)
        assert len(keys) == 1 and keys[0][3] == 5
        assert self.npc.tags.has("ai_assistant", category="ai_assistant")

    def test_tick_counts_and_a_busy_tick_is_skipped(self):
        self.script.at_assistant_tick()
        self.script.at_assistant_tick()
        assert self.npc.assistant.ports().state.get("tick_count") == 2
        self.script.ndb.busy = True
        assert self.script.at_assistant_tick() is None
        assert self.npc.assistant.ports().state.get("skipped_ticks") == 1
        assert self.npc.assistant.ports().state.get("tick_count") == 2
        # state lives in Attributes: a fresh reader (as after a reload) sees the same
        self.npc.assistant.ports().state.flush()
        self.script.ndb.ai_state_cache = None
        assert AttributeState(self.npc).get("tick_count") == 2
        assert self.script.attributes.get("tick_count") == 2

    def test_a_tick_that_never_ends_is_logged_once_and_shown_by_the_status(self):
        """Its assistant skips every tick until it ends: the admin is told, once, and
        `@assistant` says how long it has run."""
        import time

        from ai_assistant.reports import format_status
        from ai_assistant.workspace.mode import LONG_TICK_SECONDS

        started = []
        with patch.object(self.npc.assistant, "run_tick",
                          side_effect=lambda mode: started.append(mode) or defer.Deferred()):
            self.script._start_work()
        assert started == ["awake"] and self.script.ndb.busy
        with patch("ai_assistant.typeclasses.logger.log_warn") as warned:
            self.script.at_assistant_tick()  # running for a moment: nothing to say
            assert not warned.called
            self.script.ndb.tick_started = time.monotonic() - LONG_TICK_SECONDS - 60
            self.script.at_assistant_tick()
            self.script.at_assistant_tick()
        assert warned.call_count == 1
        assert "Ada: an awake tick has run for 11 min and not ended" in warned.call_args[0][0]
        assert "an awake tick has run for 11 min" in strip_ansi(format_status(self.npc))
        with patch("ai_assistant.typeclasses.logger.log_info") as told:
            self.script._tick_done(None)
        assert "the long tick ended after 11 min" in told.call_args[0][0]
        assert not self.script.ndb.busy and self.script.tick_running() is None
        assert "has run for" not in format_status(self.npc)

    def fresh_state(self):
        """An `AttributeState` reading from the database, as after a reload."""
        self.npc.ndb.ai_state_cache = None
        self.script.ndb.ai_state_cache = None
        return AttributeState(self.npc)

    def test_a_document_reads_back_as_a_plain_copy_of_its_own(self):
        state = self.npc.assistant.ports().state
        document = {"#7": {"name": "Bob", "observations": ["Sells fish."], "trust": 0.5,
                           "first_seen": datetime(2025, 1, 1, tzinfo=UTC)}}
        state.set(documents.ENTITY_PROFILES, document)
        state.flush()
        read = self.fresh_state().get(documents.ENTITY_PROFILES)
        assert read == document
        assert type(read) is dict and type(read["#7"]["observations"]) is list  # no Saver types
        read["#7"]["observations"].append("changed in the cache only")
        stored = self.npc.attributes.get(documents.ENTITY_PROFILES)
        assert stored["#7"]["observations"] == ["Sells fish."]  # Evennia's copy is untouched

    def test_a_fresh_reader_loads_each_objects_light_then_heavy_documents_in_one_query(self):
        state = self.npc.assistant.ports().state
        state.set(documents.ENTITY_PROFILES, {"#7": {"name": "Bob"}})
        state.set(documents.JOURNAL, [{"id": "j1", "text": "Bob sells fish."}])
        state.set(documents.TICK_COUNT, 41)
        state.flush()
        fresh = self.fresh_state()
        fresh.durability()  # opened once per process, before any read
        with CaptureQueriesContext(connection) as queries:
            assert fresh.get(documents.ENTITY_PROFILES) == {"#7": {"name": "Bob"}}
            assert fresh.get(documents.JOURNAL)[0]["text"] == "Bob sells fish."
            assert fresh.get(documents.CURRENT_GOALS) is None  # never stored
            assert fresh.get(documents.TICK_COUNT) == 41
            assert fresh.get(documents.OPERATING_MODE) == "awake"  # stored at creation
        # the character's light documents, then its heavy ones (the journal with the profiles),
        # and the script's light ones (no heavy one of the script was read)
        assert len(queries) == 3
        assert documents.MEMORY_LINKS not in self.script.ndb.ai_state_cache
        # what the shell writes straight to an Attribute is not held in that cache
        assert documents.CONFIG_OVERRIDES not in self.npc.ndb.ai_state_cache
        assert documents.TICKER_INTERVAL not in self.script.ndb.ai_state_cache

    def test_ports_read_the_npcs_straight_documents_in_one_query_and_fresh(self):
        # written by Evennia itself (a builder's @set, a prototype): never a stale copy
        self.npc.attributes.add(documents.CONFIG_OVERRIDES, {"ticks.awake": 7})
        scope = self.npc.attributes.get(documents.MEMORY_SCOPE)
        self.npc.assistant.reset()
        asked = []
        real_get = type(self.npc.attributes).get

        def spy(handler, key=None, *args, **kwargs):
            asked.append(str(key))
            return real_get(handler, key, *args, **kwargs)

        with patch.object(type(self.npc.attributes), "get", spy):
            ports = self.npc.assistant.ports()
        # not through Evennia's cache, which costs two queries each at a server start
        assert not {"config_overrides", "memory_scope"} & set(asked)
        assert ports.settings.get("ticks.awake") == 7 and ports.key == scope
        self.npc.attributes.add(documents.CONFIG_OVERRIDES, {"ticks.awake": 9})
        self.npc.assistant.reset()
        assert self.npc.assistant.ports().settings.get("ticks.awake") == 9
        # read through the state, such a document is read afresh each time, never kept
        state = self.npc.assistant.ports().state
        assert state.get(documents.CONFIG_OVERRIDES) == {"ticks.awake": 9}
        self.npc.attributes.add(documents.CONFIG_OVERRIDES, {"ticks.awake": 11})
        with CaptureQueriesContext(connection) as queries:
            assert state.get(documents.CONFIG_OVERRIDES) == {"ticks.awake": 11}
        assert len(queries) == 0  # Evennia's own cache, which its write just updated
        self.npc.attributes.backend.reset_cache()  # not in Evennia's cache: one query
        with CaptureQueriesContext(connection) as queries:
            assert state.get(documents.CONFIG_OVERRIDES) == {"ticks.awake": 11}
        assert len(queries) == 1
        assert documents.CONFIG_OVERRIDES not in self.npc.ndb.ai_state_cache

    def test_a_value_holding_a_database_object_still_unpacks_it(self):
        self.npc.attributes.add(documents.ENTITY_PROFILES, {"#7": {"met_in": self.room1}})
        read = self.fresh_state().get(documents.ENTITY_PROFILES)
        assert read["#7"]["met_in"] == self.room1 and type(read["#7"]) is dict

    def flush_ticks(self, npc, ticks):
        """The ticks (1-based) of `ticks` awake ticks of `npc` after which its state was written."""
        script, flushed = npc.assistant.script, []
        for tick in range(1, ticks + 1):
            script.at_assistant_tick()
            run_reactor_turns()
            if script.attributes.get("tick_count") == npc.assistant.ports().state.get(
                    "tick_count"):
                flushed.append(tick)
        return flushed

    def test_tick_counters_reach_the_database_in_batches_and_before_a_reload(self):
        flushed = self.flush_ticks(self.npc, 36)
        # every 12 ticks, the first within 12 (where in the cycle depends on the assistant)
        assert len(flushed) == 3 and flushed[0] <= 12
        assert [flushed[1] - flushed[0], flushed[2] - flushed[1]] == [12, 12]
        if flushed[-1] != 36:
            assert self.script.attributes.get("tick_count") == flushed[-1]  # written behind
        self.script.at_server_reload()
        assert self.script.attributes.get("tick_count") == 36
        self.script.set_mode("sleep", "test")
        self.script.at_assistant_tick()  # asleep, every tick is flushed (one a minute)
        run_reactor_turns()
        assert self.script.attributes.get("tick_count") == 37

    def test_assistants_started_together_flush_at_different_ticks(self):
        others = [create.create_object(AssistantCharacter, key=f"Npc{number}",
                                       location=self.room1, home=self.room1)
                  for number in range(3)]  # fmt: skip
        for npc in others:
            npc.assistant.script.unsubscribe()
        first_flush = {self.flush_ticks(npc, 12)[0] for npc in [self.npc, *others]}
        assert len(first_flush) == 4  # four points of the twelve-tick cycle

    def test_a_flush_runs_in_a_reactor_turn_of_its_own(self):
        # TICKER_HANDLER calls every assistant at once: a flush inside that call would make
        # every assistant's flush one block of the reactor's time
        bob = create.create_object(AssistantCharacter, key="Bob", location=self.room1,
                                   home=self.room1)
        bob.assistant.script.unsubscribe()
        for npc in (self.npc, bob):
            npc.assistant.script.ndb.ticks_since_flush = 11  # both flush at the next tick
            npc.assistant.script.at_assistant_tick()
        assert [npc.assistant.script.attributes.get("tick_count") for npc in (self.npc, bob)] \
            == [0, 0]  # not in the ticker's call
        from twisted.internet import reactor

        reactor.runUntilCurrent()  # one pass: the first flush only
        written = [npc.assistant.script.attributes.get("tick_count") for npc in (self.npc, bob)]
        assert written == [1, 0]
        assert run_reactor_turns() >= 3  # Bob's flush and both ticks' work, a pass each
        assert bob.assistant.script.attributes.get("tick_count") == 1

    def test_mode_switch_swaps_the_ticker_and_tells_the_room(self):
        self.script.set_mode("sleep", "test")
        assert self.script.attributes.get("operating_mode") == "sleep"  # written at once
        keys = tickers_of(self.npc)
        assert [key[3] for key in keys] == [60]
        assert self.script.set_mode("sleep", "again") is False
        self.script.set_mode("awake", "test")
        assert [key[3] for key in tickers_of(self.npc)] == [5]
        history = self.npc.assistant.ports().state.get("mode_history")
        assert [(h["from"], h["to"]) for h in history] == [("awake", "sleep"), ("sleep", "awake")]

    def test_a_server_start_keeps_a_live_ticker_and_repairs_a_lost_one(self):
        # a reload restores persistent tickers: re-adding each would re-save the whole store
        with patch.object(TICKER_HANDLER, "save", wraps=TICKER_HANDLER.save) as save:
            self.script.at_server_start()
        assert save.call_count == 0
        assert [key[3] for key in tickers_of(self.npc)] == [5]
        TICKER_HANDLER.remove(5, self.script.at_assistant_tick,
                              idstring=self.script.ticker_idstring, persistent=True)
        assert tickers_of(self.npc) == []
        self.script.at_server_start()
        assert [key[3] for key in tickers_of(self.npc)] == [5]

    def test_a_server_start_drops_a_stray_ticker_the_stored_interval_does_not_name(self):
        # a stop between the ticker store's save and the Attribute's write leaves a second
        # ticker the Attribute never heard of: the ticker store is what is checked
        TICKER_HANDLER.add(60, self.script.at_assistant_tick,
                           idstring=self.script.ticker_idstring, persistent=True)
        assert sorted(key[3] for key in tickers_of(self.npc)) == [5, 60]
        assert self.script.attributes.get("ticker_interval") == 5
        self.script.at_server_start()
        assert [key[3] for key in tickers_of(self.npc)] == [5]
        # and an unsubscribe removes a live ticker whatever the Attribute says
        self.script.attributes.add("ticker_interval", None)
        self.script.unsubscribe()
        assert tickers_of(self.npc) == []

    def test_hearing_speech_queues_classified_events(self):
        self.char1.at_say("Ada, where is the inn?")
        self.char1.at_say("nice weather today")
        events = self.npc.assistant.ports().state.get("pending_events")
        assert [(e["text"], e["classification"]) for e in events] == [
            ("Ada, where is the inn?", "direct_addressing"),
            ("nice weather today", "room_chatter"),
        ]
        assert events[0]["sender_id"] == self.char1.dbref and events[0]["urgent"]

    def test_a_line_heard_by_every_assistant_in_the_room_is_stripped_of_markup_once(self):
        from ai_assistant import heard_line

        other = create.create_object(AssistantCharacter, key="Bob", location=self.room1)
        heard_line.plain_text.cache_clear()
        with patch.object(heard_line, "strip_ansi", wraps=heard_line.strip_ansi) as stripped:
            self.char1.at_say("|rAda|n, where is the |winn|n?")
        for npc in (self.npc, other):
            events = npc.assistant.ports().state.get("pending_events")
            assert events[-1]["text"] == "Ada, where is the inn?"
        assert stripped.call_count == 1
        other.assistant.script.unsubscribe()

    def test_a_speaker_s_admin_lock_is_checked_once_per_reactor_turn(self):
        from twisted.internet import reactor

        from ai_assistant import heard_line

        other = create.create_object(AssistantCharacter, key="Bob", location=self.room1)
        lock_class = type(self.char1.locks)
        with patch.object(reactor, "running", True), \
                patch.object(reactor, "callLater") as call_later, \
                patch.object(lock_class, "check_lockstring", autospec=True,
                             side_effect=lock_class.check_lockstring) as checked:
            self.char1.at_say("Ada and Bob, hello")
            assert checked.call_count == 1  # heard by both, checked once
            ends = [call for call in call_later.call_args_list
                    if call.args == (0, heard_line.admins_this_turn.clear)]
            assert len(ends) == 1
            ends[0].args[1]()  # the turn ends
            self.char1.at_say("Ada, again")
            assert checked.call_count == 2
            # the mocked `callLater` ended no turn: what this turn kept must not leak
            heard_line.admins_this_turn.clear()
            heard_line.lines_this_turn.clear()
        admin = bool(self.char1.locks.check_lockstring(self.char1, "cmd:perm(Admin)"))
        for npc in (self.npc, other):
            events = npc.assistant.ports().state.get("pending_events")
            assert [event["admin"] for event in events] == [admin, admin]
        other.assistant.script.unsubscribe()

    def test_npc_speech_is_heard_but_not_answered(self):
        other = create.create_object(AssistantCharacter, key="Bob", location=self.room1)
        other.at_say("Ada, hello")
        events = self.npc.assistant.ports().state.get("pending_events")
        assert events[-1]["classification"] == "room_chatter"
        other.assistant.script.unsubscribe()

    def test_mechanical_talk_gets_a_notice_and_is_journaled(self):
        self.call(CmdTalk(), "Ada = hello", 'You say to Ada, "hello"')
        self.npc.assistant.run_tick("awake")
        entries = self.npc.assistant.ports().state.get("journal")["entries"]
        assert entries[0]["content"] == f'{self.char1.key} said to me: "hello"'
        assert self.npc.assistant.ports().state.get("pending_events") == []

    def test_status_and_switch_errors(self):
        self.call(CmdAssistant(), "Ada", "Ada (#")
        out = self.call(CmdAssistant(), "Ada")
        assert "mode: awake" in out and "mechanical (no LLM configured)" in out
        self.call(CmdAssistant(), "Nobody", "No assistant called 'Nobody'. Assistants: Ada.")
        self.call(CmdAssistant(), "/dance Ada", "Unknown switch '/dance'.")
        self.call(CmdAssistant(), "/sleep", "Name an assistant.")

    def test_create_validates_names_and_duplicates(self):
        self.call(CmdAssistant(), "/create Bob", "Created assistant Bob")
        self.call(CmdAssistant(), "/create Bob", "There is already an assistant called Bob")
        self.call(CmdAssistant(), "/create <script>", "'<script>' is not a good name")
        self.call(CmdAssistant(), "/create", "Usage: @assistant/create <name>")

    def test_sleep_and_deferred_wake(self):
        self.call(CmdAssistant(), "/sleep Ada",
                  "Ada dozes off.|Ada is now asleep (phase: compacting; ticker 60s)")
        self.call(CmdAssistant(), "/sleep Ada", "Ada is already asleep.")
        self.call(CmdAssistant(), "/wake Ada", "Ada: wake deferred: compacting")
        # nothing to compact: dreaming, then the deferred wake
        self.npc.assistant.run_tick("sleep")
        assert self.npc.assistant.operating_mode == "awake"
        assert self.script.db.ticker_interval == 5

    def test_config_sets_validates_and_resets(self):
        self.call(CmdAssistant(), "/config Ada = ticks.awake 7", "Ada: ticks.awake = 7")
        assert self.script.db.ticker_interval == 7
        self.call(CmdAssistant(), "/config Ada = llm.api_key sk-secret-123456789",
                  "Ada: llm.api_key = (hidden)")
        out = self.call(CmdAssistant(), "/config Ada")
        assert "sk-secret-123456789" not in out
        self.call(CmdAssistant(), "/config Ada = bogus.key 1", "Unknown setting 'bogus.key'")
        self.call(CmdAssistant(), "/config Ada = ticks.awake default",
                  "Ada: ticks.awake reset to the game default.")
        assert self.script.db.ticker_interval == 5

    def test_tools_listing_and_running_a_tool_as_the_npc(self):
        out = self.call(CmdAssistant(), "/tools Ada")
        assert "say" in out and "terminal" in out
        self.call(CmdAssistant(), '/tool Ada = add_journal_entry {"content": "The gate is red"}',
                  "Ada add_journal_entry ->")
        assert self.npc.assistant.ports().state.get("journal")["entries"][0]["content"] == (
            "The gate is red")
        self.call(CmdAssistant(), "/tool Ada = add_journal_entry {bad json",
                  "Ada add_journal_entry ->")
        out = self.call(CmdAssistant(), "/tool Ada = fly {}")
        assert "unknown tool 'fly'" in out

    def test_journal_goals_projects_and_reflect_views(self):
        self.call(CmdAssistant(), '/tool Ada = add_journal_entry {"content": "Alice loves tea"}')
        self.call(CmdAssistant(), '/tool Ada = add_journal_entry {"content": "The gate is red"}')
        out = self.call(CmdAssistant(), "/journal Ada")
        assert "Journal of Ada (2 entries" in out and "Alice loves tea" in out
        out = self.call(CmdAssistant(), "/journal Ada = tea")
        assert out.splitlines()[1].endswith("Alice loves tea")  # best first
        self.call(CmdAssistant(), "/journal Ada = dragons", "No journal entries of Ada match")
        self.call(CmdAssistant(), '/tool Ada = add_goal {"description": "Build a tavern"}')
        out = self.call(CmdAssistant(), "/goals Ada")
        assert "Build a tavern" in out
        self.call(CmdAssistant(),
                  '/tool Ada = create_project {"key": "tavern", "summary": "Build it"}')
        assert "tavern" in self.call(CmdAssistant(), "/projects Ada")
        self.call(CmdAssistant(), "/reflect Ada", "Ada reflects...|Ada did not reflect:")
        self.call(CmdAssistant(), "/memory Ada = tea", "Ada has no semantic memory right now")
        self.call(CmdAssistant(), "/memory Ada", "Usage: @assistant/memory <npc> = <query>")

    def test_profile_patrol_and_nodes_views(self):
        self.call(CmdTalk(), "Ada = thanks for the tea, it was lovely")
        self.npc.assistant.run_tick("awake")
        out = self.call(CmdAssistant(), f"/profile Ada = {self.char1.key}")
        assert "Profile kept by Ada" in out and "stranger" in out
        self.call(CmdAssistant(), "/profile Ada = Nobody", "Ada has no profile of 'Nobody'.")
        self.call(CmdAssistant(), "/profile Ada", "Usage: @assistant/profile")
        out = self.call(CmdAssistant(), "/patrol Ada")
        assert out.startswith("Ada patrols its memories...")
        assert "mechanical (no LLM)" in out and "\n  consolidation: skipped" in out
        nodes = self.call(CmdAssistant(), "/nodes Ada")
        assert nodes.startswith("Memory nodes: 0 (0 active") and "Last patrol: " in nodes

    # --- the mixin on a game's own class ------------------------------------------------------

    def test_the_mixin_makes_any_npc_class_a_working_assistant(self):
        with override_settings(AI_ASSISTANT={**TEST_SETTINGS, "typeclass": LIBRARIAN}):
            self.call(CmdAssistant(), "/create Lin", "Created assistant Lin")
            lin = all_assistants()[-1]
            assert isinstance(lin, Librarian) and isinstance(lin.assistant, AssistantHandler)
            assert lin.tags.has("ai_assistant", category="ai_assistant")
            assert [key[3] for key in tickers_of(lin)] == [5]
            assert lin.cmdset.has(AssistantToolCmdSet)
            listing = self.call(CmdAssistant(), "")
            assert "Ada (#" in listing and "Lin (#" in listing
            self.call(CmdTalk(), "Lin = hello", 'You say to Lin the librarian, "hello"')
            assert lin.assistant.ports().state.get("pending_events")[0]["text"] == "hello"
            lin.assistant.run_tick("awake")
            entries = lin.assistant.ports().state.get("journal")["entries"]
            assert entries[0]["content"] == f'{self.char1.key} said to me: "hello"'
            # one runtime per NPC, kept when the ports are rebuilt after a config change
            runtime = lin.assistant.runtime
            self.call(CmdAssistant(), "/config Lin = ticks.awake 7", "Lin: ticks.awake = 7")
            assert lin.assistant.ports().runtime is runtime
            assert [key[3] for key in tickers_of(lin)] == [7]

    def test_create_refuses_a_typeclass_without_the_mixin(self):
        plain = "evennia.objects.objects.DefaultCharacter"
        with override_settings(AI_ASSISTANT={**TEST_SETTINGS, "typeclass": plain}):
            self.call(CmdAssistant(), "/create Bob", "Could not create an assistant from typeclass")

    # --- room messages: display names, and model text kept literal ----------------------------

    def test_an_emote_reaches_the_room_literally_under_the_npc_display_name(self):
        lin = create.create_object(Librarian, key="Lin", location=self.room1, home=self.room1)
        text = "waves {braces} $You() and $conj(smile) {you} {0} }{"
        with patch.object(self.char2, "msg") as seen:
            lin.assistant.ports().world.emote(text)
        message, options = seen.call_args.kwargs["text"]
        assert message == f"Lin the librarian {text}" and options == {"type": "pose"}
        # another assistant in the room overhears the pose as it was shown (in a reactor turn
        # of its own, `heard_line.overhear`)
        run_reactor_turns()
        events = self.npc.assistant.ports().state.get("pending_events")
        assert events[-1]["text"] == f"Lin the librarian {text}"

    def test_mode_changes_are_told_in_the_actor_stance(self):
        lin = create.create_object(Librarian, key="Lin", location=self.room1, home=self.room1)
        with patch.object(self.char2, "msg") as seen, patch.object(lin, "msg") as own:
            lin.assistant.set_mode("sleep", "test")
            lin.assistant.set_mode("awake", "test")
        assert [c.kwargs["text"][0] for c in seen.call_args_list] == [
            "Lin the librarian dozes off.", "Lin the librarian wakes up."]
        assert [c.kwargs["text"][0] for c in own.call_args_list] == [
            "You doze off.", "You wake up."]

    def test_talk_reaches_the_room_as_typed(self):
        with patch.object(self.char2, "msg") as seen:
            self.call(CmdTalk(), "Ada = {hi} $You() {0}", 'You say to Ada, "{hi} $You() {0}"')
        assert seen.call_args.kwargs["text"][0] == f'{self.char1.key} says to Ada, "{{hi}} ' \
            '$You() {0}"'
        assert self.npc.assistant.ports().state.get("pending_events")[0]["text"] == (
            "{hi} $You() {0}")

    # --- the tool commands when an admin puppets the NPC --------------------------------------

    def _as_puppet(self, line):
        """Run `line` as the admin's session puppeting Ada; return what Ada was sent."""
        with patch.object(self.npc, "msg") as sent:
            cmdhandler(self.session, line, callertype="session", session=self.session)
        return strip_ansi("\n".join(str(c.kwargs.get("text") or (c.args[0] if c.args else ""))
                                    for c in sent.call_args_list))

    def test_tool_commands_do_not_shadow_the_default_commands(self):
        self.account.puppet_object(self.session, self.npc)
        try:
            said = self._as_puppet("say hello")
            assert 'You say, "hello"' in said and "say ->" not in said
            posed = self._as_puppet("emote smiles")
            assert "Ada smiles" in posed and "emote ->" not in posed
            # a tool whose name clashes with nothing is still a command
            ran = self._as_puppet('add_journal_entry {"content": "The gate is red"}')
            assert "Ada add_journal_entry ->" in ran
            entries = self.npc.assistant.ports().state.get("journal")["entries"]
            assert entries[-1]["content"] == "The gate is red"
        finally:
            self.account.unpuppet_object(self.session)

    def test_tool_commands_are_for_admins(self):
        cmdset = AssistantToolCmdSet()
        cmdset.at_cmdset_creation()
        assert cmdset.priority < -10  # below the account's and the character's cmdsets
        keys = {cmd.key for cmd in cmdset.commands}
        assert "recall_scenes" in keys and not keys & {"say", "emote", "whisper", "page"}
        # the former name of the renamed lookup tool still works as a command
        recall = next(cmd for cmd in cmdset.commands if cmd.key == "recall_scenes")
        assert "recall" in recall.aliases
        journal = next(cmd for cmd in cmdset.commands if cmd.key == "add_journal_entry")
        assert journal.locks == "cmd:perm(Admin)"
        assert not journal.access(self.char2, "cmd")
        assert journal.access(self.char1, "cmd")
