"""
Settings and switches an admin can find (issue 34.3, 34.5), in the shell with the database:
`@assistant/config/keys` lists every setting from the settings table, a malformed URL is
refused before it is stored, the admins' persona changes are versioned and reverted like the
assistant's own, and every switch is named where a switch is refused.
"""

import re

from assistant_npc import MECHANICAL, WithAda
from django.test import override_settings
from evennia.utils.ansi import strip_ansi
from evennia.utils.test_resources import EvenniaCommandTest

from ai_assistant.admin_commands import CmdAssistant
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.setting_table import SETTINGS
from ai_assistant.workspace.status import update_system_prompt


@override_settings(AI_ASSISTANT=MECHANICAL)
class TestAdminDiscovery(WithAda, EvenniaCommandTest):
    def state(self):
        return self.npc.assistant.ports().state

    def test_config_keys_lists_every_setting_with_value_default_range_and_doc(self):
        self.call(CmdAssistant(), "/config Ada = ticks.awake 9", "Ada: ticks.awake = 9")
        out = strip_ansi(self.call(CmdAssistant(), "/config/keys Ada"))
        assert f"Settings of Ada ({len(SETTINGS)};" in out
        for row in SETTINGS:
            assert f"{row.key} = " in out and row.doc in out
        assert ("*ticks.awake = 9  (default 5; a whole number from 1 to 86400)\n"
                "     Seconds between awake ticks.") in out
        assert 'react.fallback_line = "Forgive me' in out
        # a section alone, and a prefix that names nothing
        section = strip_ansi(self.call(CmdAssistant(), "/config/keys Ada = react"))
        assert "under react (" in section and "journal." not in section
        started = strip_ansi(self.call(CmdAssistant(), "/config/keys Ada = llm.base"))
        assert "llm.base_url" in started and "llm.model" not in started
        assert "No setting starts with 'nope'" in self.call(CmdAssistant(),
                                                            "/config/keys Ada = nope")
        # the plain listing and an unknown key point at it
        assert "@assistant/config/keys Ada" in self.call(CmdAssistant(), "/config Ada")
        assert "@assistant/config/keys Ada" in self.call(CmdAssistant(),
                                                         "/config Ada = no.such 1")

    def test_a_base_url_that_is_not_a_url_is_refused_and_not_stored(self):
        out = self.call(CmdAssistant(), "/config Ada = llm.base_url not a url")
        assert out.startswith("Ada: not changed: llm.base_url takes an http(s) URL")
        assert "llm.base_url" not in (self.npc.attributes.get("config_overrides") or {})
        self.call(CmdAssistant(), "/config Ada = llm.base_url http://127.0.0.1:9/v1",
                  "Ada: llm.base_url = \"http://127.0.0.1:9/v1\"")

    def test_a_game_wide_setting_is_refused_per_assistant(self):
        out = self.call(CmdAssistant(), "/config Ada = memory.store postgres")
        assert out.startswith("Ada: not changed: memory.store is one for the whole game")
        assert "memory.store" not in (self.npc.attributes.get("config_overrides") or {})

    def test_an_admins_persona_change_is_versioned_and_reverted_like_the_assistants(self):
        self.call(CmdAssistant(), "/persona Ada = You are Ada, the archivist.", "Ada: persona set")
        update_system_prompt(self.npc.assistant.ports(), "Keep answers short.", "brevity")
        self.call(CmdAssistant(), "/persona Ada = You are a pirate.", "Ada: persona set")
        assert self.state().get(documents.USER_SYSTEM_PROMPT) == "You are a pirate."
        history = strip_ansi(self.call(CmdAssistant(), "/persona/history Ada"))
        listed = re.findall(r"^  (\d+) (persona|guidelines)", history, re.M)
        assert [which for _, which in listed][-4:] == ["persona", "persona", "guidelines",
                                                       "persona"]
        archivist = next(number for number, which in listed if which == "persona"
                         and "archivist" in history.split(f"  {number} persona", 1)[1]
                         .split("\n", 2)[1])
        out = self.call(CmdAssistant(), f"/persona/revert Ada = {archivist}")
        assert f"Ada: its persona is back to version {archivist}" in out
        assert self.state().get(documents.USER_SYSTEM_PROMPT) == "You are Ada, the archivist."
        # the assistant's own guidelines were not touched by the persona's revert
        assert self.state().get(documents.ASSISTANT_SYSTEM_PROMPT) == "Keep answers short."
        # the very first persona change can be undone too: back to no persona at all
        first = listed[0][0]
        self.call(CmdAssistant(), f"/persona/revert Ada = {first}", "Ada: its persona is back")
        assert self.state().get(documents.USER_SYSTEM_PROMPT) is None

    def test_every_switch_is_named_when_a_switch_is_refused(self):
        out = self.call(CmdAssistant(), "/dance Ada")
        usage = CmdAssistant.__doc__
        for switch in CmdAssistant.valid_switches:
            assert f"/{switch}" in out and f"@assistant/{switch}" in usage
        for modifier, base in CmdAssistant.modifiers.items():
            assert f"/{base}/{modifier}" in out and f"@assistant/{base}/{modifier}" in usage
        assert "/persona/history" in out and "/persona/revert" in out
        out = self.call(CmdAssistant(), "/sleep/force Ada")
        assert "Use one switch at a time" in out and "/wake/force" in out
