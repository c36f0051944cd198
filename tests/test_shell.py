"""
The Evennia shell with the database: typeclasses, ticker, perception and the admin commands.
"""

from django.test import override_settings
from evennia import TICKER_HANDLER
from evennia.utils import create
from evennia.utils.test_resources import EvenniaCommandTest

from ai_assistant.adapters import AttributeState
from ai_assistant.commands import CmdAssistant, CmdTalk
from ai_assistant.typeclasses import AssistantCharacter

TEST_SETTINGS = {
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {"base_url": None, "api_key": None},
    "memory": {"enabled": False},
}


def tickers_of(npc):
    idstring = f"ai_assistant_{npc.id}"
    return [key for key in TICKER_HANDLER.all_display() if key[4] == idstring]


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestAssistantShell(EvenniaCommandTest):
    def setUp(self):
        super().setUp()
        self.npc = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                        home=self.room1)
        self.script = self.npc.assistant_script

    def tearDown(self):
        for npc in AssistantCharacter.objects.all():
            if npc.assistant_script:
                npc.assistant_script.unsubscribe()
        super().tearDown()

    def test_created_awake_with_one_ticker_at_5s(self):
        assert self.npc.operating_mode == "awake"
        assert self.script.db.ticker_interval == 5
        keys = tickers_of(self.npc)
        assert len(keys) == 1 and keys[0][3] == 5
        assert self.npc.tags.has("ai_assistant", category="ai_assistant")

    def test_tick_counts_and_a_busy_tick_is_skipped(self):
        self.script.at_assistant_tick()
        self.script.at_assistant_tick()
        assert self.npc.ai_ports().state.get("tick_count") == 2
        self.script.ndb.busy = True
        assert self.script.at_assistant_tick() is None
        assert self.npc.ai_ports().state.get("skipped_ticks") == 1
        assert self.npc.ai_ports().state.get("tick_count") == 2
        # state lives in Attributes: a fresh reader (as after a reload) sees the same
        self.npc.ai_ports().state.flush()
        self.script.ndb.ai_state_cache = None
        assert AttributeState(self.npc).get("tick_count") == 2
        assert self.script.attributes.get("tick_count") == 2

    def test_tick_counters_reach_the_database_in_batches_and_before_a_reload(self):
        for _ in range(13):
            self.script.at_assistant_tick()
        assert self.script.attributes.get("tick_count") == 12  # flushed every 12 ticks
        assert self.npc.ai_ports().state.get("tick_count") == 13
        self.script.at_server_reload()
        assert self.script.attributes.get("tick_count") == 13
        self.script.set_mode("sleep", "test")
        self.script.at_assistant_tick()  # asleep, every tick is flushed (one a minute)
        assert self.script.attributes.get("tick_count") == 14

    def test_mode_switch_swaps_the_ticker_and_tells_the_room(self):
        self.script.set_mode("sleep", "test")
        assert self.script.attributes.get("operating_mode") == "sleep"  # written at once
        keys = tickers_of(self.npc)
        assert [key[3] for key in keys] == [60]
        assert self.script.set_mode("sleep", "again") is False
        self.script.set_mode("awake", "test")
        assert [key[3] for key in tickers_of(self.npc)] == [5]
        history = self.npc.ai_ports().state.get("mode_history")
        assert [(h["from"], h["to"]) for h in history] == [("awake", "sleep"), ("sleep", "awake")]

    def test_hearing_speech_queues_classified_events(self):
        self.char1.at_say("Ada, where is the inn?")
        self.char1.at_say("nice weather today")
        events = self.npc.ai_ports().state.get("pending_events")
        assert [(e["text"], e["classification"]) for e in events] == [
            ("Ada, where is the inn?", "direct_addressing"),
            ("nice weather today", "room_chatter"),
        ]
        assert events[0]["sender_id"] == self.char1.dbref and events[0]["urgent"]

    def test_npc_speech_is_heard_but_not_answered(self):
        other = create.create_object(AssistantCharacter, key="Bob", location=self.room1)
        other.at_say("Ada, hello")
        events = self.npc.ai_ports().state.get("pending_events")
        assert events[-1]["classification"] == "room_chatter"
        other.assistant_script.unsubscribe()

    def test_mechanical_talk_gets_a_notice_and_is_journaled(self):
        self.call(CmdTalk(), "Ada = hello", 'You say to Ada, "hello"')
        self.npc.run_tick("awake")
        entries = self.npc.ai_ports().state.get("journal")["entries"]
        assert entries[0]["content"] == f'{self.char1.key} said to me: "hello"'
        assert self.npc.ai_ports().state.get("pending_events") == []

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
        self.npc.run_tick("sleep")  # nothing to compact: dreaming, then the deferred wake
        assert self.npc.operating_mode == "awake"
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
        assert self.npc.ai_ports().state.get("journal")["entries"][0]["content"] == (
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
        self.npc.run_tick("awake")
        out = self.call(CmdAssistant(), f"/profile Ada = {self.char1.key}")
        assert "Profile kept by Ada" in out and "stranger" in out
        self.call(CmdAssistant(), "/profile Ada = Nobody", "Ada has no profile of 'Nobody'.")
        self.call(CmdAssistant(), "/profile Ada", "Usage: @assistant/profile")
        out = self.call(CmdAssistant(), "/patrol Ada")
        assert out.startswith("Ada patrols its memories...")
        assert "mechanical (no LLM)" in out and "❹ consolidation: skipped" in out
        nodes = self.call(CmdAssistant(), "/nodes Ada")
        assert nodes.startswith("Memory nodes: 0 (0 active") and "Last patrol: " in nodes
