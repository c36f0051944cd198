"""
Evennia's own suite passes with the demo's settings: the initial setup (which spawns Ada) leaves
no pending reactor call behind.
"""

import re

import pytest
from django.test import override_settings
from evennia.utils.test_resources import EvenniaTest

from ai_assistant.admin_commands import all_assistants


class TestInitialSetupLeavesNoTimer(EvenniaTest):
    @override_settings(AI_ASSISTANT={"typeclass": "typeclasses.assistants.Assistant",
                                     "llm": {"base_url": None, "api_key": None},
                                     "memory": {"enabled": False}})
    def test_building_the_demo_world_leaves_no_pending_call(self):
        from twisted.internet import reactor

        from world.build import build_world

        assert not reactor.running
        before = set(reactor.getDelayedCalls())
        try:
            npc, created = build_world()
            assert created and npc.assistant.script is not None
            npc.assistant.ports().state.set("current_goals", ["a change to log"])
            left = [call for call in reactor.getDelayedCalls()
                    if call not in before and call.active()]
            assert not left, left
            # the ticker is in the store, for Evennia to restore when its server starts
            assert len(npc.assistant.script._live_intervals()) == 1
        finally:
            for npc in all_assistants():
                if npc.assistant.script:
                    npc.assistant.script.unsubscribe()


@pytest.mark.e2e
def test_evennias_server_tests_pass_with_the_demos_settings():
    from evennia_suite import run

    result = run()
    assert result.returncode == 0, result.stdout[-4000:]
    assert re.search(r"Ran \d+ tests", result.stdout) and "\nOK" in result.stdout
    assert "DirtyReactor" not in result.stdout
