"""
The handler exposes long-term memory's owners, as Evennia's buffs and traits handlers do:
`npc.assistant.memories` and `npc.assistant.memory_links`, over the NPC's own ports.
"""

from inspector_fixtures import InspectorTestCase

from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.mirror import mirror_of


def fired(deferred):
    found = []
    deferred.addBoth(found.append)
    return found[0]


class TestMemoriesOnTheHandler(InspectorTestCase):
    def test_the_npc_reaches_its_memories_and_their_links_through_its_handler(self):
        memories = self.npc.assistant.memories
        assert isinstance(memories, Memories) and memories.available
        fired(memories.recall_mirror())
        stored = fired(memories.add("The lighthouse keeper hums at night.",
                                    {"source_trust": 0.9}))
        assert stored[0]["event"] == "ADD"
        listed = {memory["memory"] for memory in fired(self.npc.assistant.memories.list())}
        assert "The lighthouse keeper hums at night." in listed
        mirrored = {item["content"] for item in mirror_of(self.npc.assistant.ports()).entries()}
        assert "The lighthouse keeper hums at night." in mirrored
        links = self.npc.assistant.memory_links
        assert isinstance(links, MemoryLinks)
        assert links.memory_ids_for_entry(1) == ["m1"]
