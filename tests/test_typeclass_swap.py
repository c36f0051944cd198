"""
A good citizen of an Evennia game: `@typeclass` away from an assistant and back, Evennia's
start-up with an orphaned or failing script, and an admin puppeting the NPC.
"""

from unittest.mock import patch

from django.test import override_settings
from evennia import TICKER_HANDLER
from evennia.commands.default.building import CmdTypeclass
from evennia.scripts.models import ScriptDB
from evennia.scripts.scripts import DefaultScript
from evennia.utils import create
from evennia.utils.test_resources import EvenniaCommandTest

from ai_assistant.admin_commands import all_assistants
from ai_assistant.handler import SCRIPT_KEY, is_assistant
from ai_assistant.plumbing import documents
from ai_assistant.typeclasses import AssistantCharacter, AssistantScript

TEST_SETTINGS = {
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {"base_url": None, "api_key": None},
    "memory": {"enabled": False},
}
ASSISTANT = "ai_assistant.typeclasses.AssistantCharacter"
PLAIN = "typeclasses.characters.Character"
STARTED = []


class RecordingScript(DefaultScript):
    """A game's own script: records that Evennia's start-up reached it."""

    def at_server_start(self):
        STARTED.append(self.key)


def tickers_of(npc_id):
    idstring = f"ai_assistant_{npc_id}"
    return [key for key in TICKER_HANDLER.all_display() if key[4] == idstring]


def tool_cmdsets(obj):
    return [cmdset for cmdset in obj.cmdset.all() if cmdset.key == "AssistantToolCmdSet"]


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestTypeclassSwap(EvenniaCommandTest):
    def setUp(self):
        super().setUp()
        self.npc = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                        home=self.room1)
        self.npc.attributes.add(documents.CONFIG_OVERRIDES, {"ticks.awake": 7})
        self.npc.assistant.reset()
        self.npc.assistant.script.subscribe()
        state = self.npc.assistant.ports().state
        state.set(documents.JOURNAL, [{"id": "j1", "text": "Bob sells fish."}])
        state.set(documents.CURRENT_GOALS, [{"id": "g1", "description": "Map the harbour"}])
        state.set(documents.CONVERSATION_HISTORY, [{"role": "user", "content": "hello"}])
        self.scope = self.npc.assistant.memory_scope
        self.script_id = self.npc.assistant.script.id
        STARTED.clear()

    def tearDown(self):
        for npc in all_assistants():
            if npc.assistant.script:
                npc.assistant.script.unsubscribe()
        super().tearDown()

    def swap(self, typeclass):
        self.call(CmdTypeclass(), f"Ada = {typeclass}", "Ada changed typeclass")
        self.npc = self.room1.search("Ada")  # the same object, its class changed

    def assert_retired(self):
        assert not is_assistant(self.npc)
        assert not ScriptDB.objects.filter(id=self.script_id).exists()
        assert not self.npc.scripts.get(SCRIPT_KEY)
        assert not tickers_of(self.npc.id)
        assert not tool_cmdsets(self.npc)
        assert "AssistantToolCmdSet" not in str(self.npc.cmdset_storage)
        assert not self.npc.tags.has("ai_assistant", category="ai_assistant")
        # what makes it the same assistant if it becomes one again stays
        assert self.npc.attributes.get(documents.MEMORY_SCOPE) == self.scope
        assert self.npc.attributes.get(documents.CONFIG_OVERRIDES) == {"ticks.awake": 7}
        # its state, flushed before the script went
        assert self.npc.attributes.get(documents.JOURNAL)[0]["text"] == "Bob sells fish."

    def test_the_next_tick_after_a_swap_away_removes_script_ticker_tools_and_tag(self):
        self.swap(PLAIN)
        script = ScriptDB.objects.get(id=self.script_id)
        with patch("ai_assistant.typeclasses.logger") as logger, \
                patch("ai_assistant.handler.logger") as hook_logger:
            assert script.at_assistant_tick() is None
        hook_logger.log_trace.assert_not_called()
        logger.log_info.assert_called_once()
        assert "is no longer an assistant" in logger.log_info.call_args[0][0]
        self.assert_retired()

    def test_evennias_start_up_retires_an_orphaned_script_and_runs_the_rest(self):
        self.swap(PLAIN)
        create.create_script(RecordingScript, key="later_script", persistent=True)
        with patch("ai_assistant.handler.logger") as hook_logger:
            ScriptDB.objects.update_scripts_after_server_start()
        hook_logger.log_trace.assert_not_called()
        assert STARTED == ["later_script"]
        self.assert_retired()

    def test_a_failing_start_hook_is_logged_once_and_evennias_start_up_goes_on(self):
        create.create_script(RecordingScript, key="later_script", persistent=True)
        with patch("ai_assistant.typeclasses.AssistantScript.subscribe",
                   side_effect=RuntimeError("ticker store unreadable")), \
                patch("ai_assistant.handler.logger") as logger:
            ScriptDB.objects.update_scripts_after_server_start()
        assert STARTED == ["later_script"]
        logger.log_trace.assert_called_once()
        assert "at_server_start" in logger.log_trace.call_args[0][0]

    def test_a_failing_reload_or_shutdown_hook_is_logged_not_raised(self):
        script = self.npc.assistant.script
        with patch("ai_assistant.handler.AssistantHandler.flush",
                   side_effect=RuntimeError("database gone")), \
                patch("ai_assistant.handler.logger") as logger:
            for hook in (self.npc.at_server_reload, self.npc.at_server_shutdown,
                         script.at_server_reload, script.at_server_shutdown):
                assert hook() is None
        assert logger.log_trace.call_count == 4

    def test_swapping_back_keeps_scope_overrides_and_memories(self):
        self.swap(PLAIN)
        ScriptDB.objects.get(id=self.script_id).at_assistant_tick()
        self.swap(ASSISTANT)
        assert is_assistant(self.npc)
        assert self.npc.assistant.memory_scope == self.scope
        assert self.npc.assistant.ports().key == self.scope
        assert self.npc.attributes.get(documents.CONFIG_OVERRIDES) == {"ticks.awake": 7}
        state = self.npc.assistant.ports().state
        assert state.get(documents.JOURNAL)[0]["id"] == "j1"
        # what lived on the deleted script comes back on the new one
        assert state.get(documents.CURRENT_GOALS)[0]["id"] == "g1"
        assert state.get(documents.CONVERSATION_HISTORY)[0]["content"] == "hello"
        assert not self.npc.attributes.has("script_documents", category="ai_assistant_retired")
        assert len(self.npc.scripts.get(SCRIPT_KEY)) == 1
        assert len(tool_cmdsets(self.npc)) == 1
        assert self.npc.tags.has("ai_assistant", category="ai_assistant")
        ticks = tickers_of(self.npc.id)
        assert len(ticks) == 1 and ticks[0][3] == 7  # its own override, not the default 5

    def test_swapping_back_before_any_tick_adds_nothing_twice(self):
        self.swap(PLAIN)
        self.swap(ASSISTANT)
        scripts = self.npc.scripts.get(SCRIPT_KEY)
        assert [script.id for script in scripts] == [self.script_id]
        assert len(tool_cmdsets(self.npc)) == 1
        assert self.npc.assistant.memory_scope == self.scope
        assert self.npc.attributes.get(documents.CONFIG_OVERRIDES) == {"ticks.awake": 7}
        assert len(tickers_of(self.npc.id)) == 1
        # and it goes on ticking as an assistant
        assert isinstance(scripts[0], AssistantScript)
        scripts[0].at_assistant_tick()
        assert self.npc.assistant.ports().state.get(documents.TICK_COUNT) == 1


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestPuppeting(EvenniaCommandTest):
    def tearDown(self):
        for npc in all_assistants():
            if npc.assistant.script:
                npc.assistant.script.unsubscribe()
        super().tearDown()

    def test_unpuppeting_leaves_the_npc_where_it_was_and_ticking(self):
        npc = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                   home=self.room2)
        heard = []
        with patch.object(type(self.char2), "msg",
                          lambda obj, text=None, **kwargs: heard.append(str(text))):
            self.account.puppet_object(self.session, npc)  # @ic Ada
            assert self.session.puppet == npc
            self.account.puppet_object(self.session, self.char1)  # @ic admin
        assert self.session.puppet == self.char1
        assert npc.location == self.room1
        assert not any("Ada has left the game" in line for line in heard)
        assert any("Char has left the game" in line for line in heard)  # a player's does
        npc.assistant.script.at_assistant_tick()
        assert npc.location == self.room1
        assert npc.assistant.ports().state.get(documents.TICK_COUNT) == 1
        assert len(tickers_of(npc.id)) == 1
