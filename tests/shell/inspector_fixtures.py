"""
An assistant with something in every tier, and the accounts that visit the inspector: shared by
tests/shell/test_inspector_api.py and tests/shell/test_inspector_pages.py.
"""

from django.test import override_settings
from evennia.utils import create
from evennia.utils.test_resources import EvenniaTest
from test_corrections import FakeSemantic

from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.nodes import new_node
from ai_assistant.plumbing import documents
from ai_assistant.sleep import reports
from ai_assistant.typeclasses import AssistantCharacter
from ai_assistant.web.api import all_assistants
from ai_assistant.workspace import goals, projects

TEST_SETTINGS = {
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {"base_url": None, "api_key": None},
    "memory": {"enabled": False},
}
PASSWORD = "inspector-pass-1"


def seed(npc):
    """Put something in every tier of `npc`'s memory; returns its ports."""
    ports = npc.assistant.ports()
    ports.semantic = FakeSemantic()
    Journal(ports).add("Alice said the harbour master lives by the east pier.",
                      source_type="direct", source_entity="Alice")
    Journal(ports).add("A gull stole a fish from the market stall.",
                      source_type="environmental")
    store = ports.semantic
    store.add("Alice knows where the harbour master lives", metadata={
        "source_trust": 0.9, "source_type": "direct", "source_entity": "Alice", "entry_id": 1})
    store.add("The market is noisy at dawn", metadata={"source_trust": 0.3})
    ports.state.set(documents.MEMORY_LINKS, {
        "m1": {"linked_to": [{"id": "m2", "score": 0.61}], "journal_ids": [1],
               "processed_at": None}})
    People(ports).observe("#90", "Alice", "Thank you, friend!",
                                source="direct_message", entity_type="player")
    People(ports).observe("#90", "Alice", "Where is the pier?",
                                source="direct_addressing")
    root = goals.Goals(ports).add("Learn the harbour", priority="high")
    goals.Goals(ports).add("Meet the harbour master", parent_id=root["goal"]["id"])
    projects.Projects(ports).create("harbour", "Map the harbour")
    fading = new_node("n-fading", {"scene": {"action": "watched the tide"}},
                      now="2025-01-01T00:00:00Z")
    fading.update(importance=0.4, session_count=60, status="dying")
    kept = new_node("n-kept", {"scene": {"action": "met Alice at the pier"}},
                    now="2025-01-01T00:00:00Z")
    ports.state.set(documents.MEMORY_NODES, {"n-fading": fading, "n-kept": kept})
    reports.note_sleep_tick(ports, {
        "phase": "dreaming", "woke": "rested", "time": "2025-01-02T06:00:00Z",
        "steps": {"memory_links": {"links_created": 2},
                  "patrol": {"steps": {"revival": {"revived": 1}}}}},
        {"started_at": "2025-01-01T22:00:00Z", "reason": "night"})
    return ports


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class InspectorTestCase(EvenniaTest):
    """Ada (seeded), a superuser, a Builder, a player; `self.client` is Django's test client."""

    def setUp(self):
        super().setUp()
        self.npc = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                        home=self.room1)
        self.ports = seed(self.npc)
        self.builder = create.create_account("Bo", "bo@example.com", PASSWORD,
                                             permissions=["Builder"])
        self.player = create.create_account("Pat", "pat@example.com", PASSWORD,
                                            permissions=["Player"])
        self.admin = create.create_account("Root", "root@example.com", PASSWORD,
                                           is_superuser=True)

    def tearDown(self):
        for npc in all_assistants():
            if npc.assistant.script:
                npc.assistant.script.unsubscribe()
        super().tearDown()
