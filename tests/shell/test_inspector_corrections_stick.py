"""
Corrections that stick, with history (issue 32): a journal correction reaches the long-term
memories made from the entry, every change keeps its before and after values and can be undone
(page and API), and the note of a correction never outranks or reaches a player's prompt.
"""

import re

from django.test import Client
from inspector_fixtures import InspectorTestCase

from ai_assistant.memory.audience import visible_to
from ai_assistant.memory.corrections import NOTE_IMPORTANCE, is_wrong
from ai_assistant.memory.journal import Journal
from ai_assistant.plumbing import documents


class TestCorrectionsStick(InspectorTestCase):
    def url(self, tail=""):
        return f"/api/assistants/{self.npc.id}/{tail}"

    def post(self, payload, expect=201):
        response = self.client.post(self.url("corrections/"), payload,
                                    content_type="application/json")
        assert response.status_code == expect, response.content
        return response.json()

    def test_editing_an_entry_replaces_the_memories_made_from_it_and_undo_puts_them_back(self):
        self.client.force_login(self.builder)
        store = self.ports.semantic
        record = self.post({"action": "edit_journal", "entry_id": 1,
                            "text": "Alice said the harbour master lives by the west pier."})
        assert record["derived"] == ["m1"]
        assert record["before"]["content"].endswith("by the east pier.")
        assert record["after"]["content"].endswith("by the west pier.")
        assert is_wrong(store.memories["m1"])
        replacement = store.memories[record["after"]["memory"]]
        assert replacement["memory"].endswith("by the west pier.")
        assert replacement["metadata"]["entry_id"] == 1
        assert replacement["metadata"]["replaces"] == ["m1"]
        # the note: in the journal for the assistant, lowest importance, never in a player's view
        note = Journal(self.ports).entry(record["journal_entry_id"])
        assert note["importance"] == NOTE_IMPORTANCE and not visible_to(note, "#90")

        undo = self.post({"action": "undo", "change_id": record["id"]})
        assert undo["action"] == "undo" and undo["target"] == str(record["id"])
        assert Journal(self.ports).entry(1)["content"].endswith("by the east pier.")
        assert not is_wrong(store.memories["m1"])
        assert record["after"]["memory"] not in store.memories
        again = self.post({"action": "undo", "change_id": record["id"]}, expect=400)
        assert "already undone" in str(again)
        trail = self.client.get(self.url("corrections/")).json()
        assert trail[1]["undone_by"] == undo["id"]
        (memory,) = self.client.get(self.url("memories/?memory=m1")).json()["memories"]
        events = [event["event"] for event in memory["history"]]
        assert events == ["added", "edit_journal", "undo"]
        assert memory["history"][0]["detail"] == "consolidated from journal #1"
        assert memory["history"][1]["before"]["content"].endswith("east pier.")

    def test_deleting_or_marking_an_entry_wrong_marks_its_memories_and_undo_restores(self):
        self.client.force_login(self.builder)
        store = self.ports.semantic
        deleted = self.post({"action": "delete_journal", "entry_id": 1})
        assert deleted["derived"] == ["m1"] and is_wrong(store.memories["m1"])
        assert Journal(self.ports).entry(1) is None
        self.post({"action": "undo", "change_id": deleted["id"]})
        assert Journal(self.ports).entry(1)["content"].startswith("Alice said")
        assert not is_wrong(store.memories["m1"])
        marked = self.post({"action": "mark_wrong", "entry_id": 1, "reason": "moved"})
        assert marked["derived"] == ["m1"] and is_wrong(store.memories["m1"])
        self.post({"action": "undo", "change_id": marked["id"]})
        assert not Journal(self.ports).entry(1).get("wrong")
        assert not is_wrong(store.memories["m1"])

    def test_every_other_correction_keeps_before_and_after_and_undoes(self):
        self.client.force_login(self.builder)
        store = self.ports.semantic
        edit = self.post({"action": "edit_memory", "memory_id": "m2", "text": "Quiet market"})
        assert edit["before"]["memory"] == "The market is noisy at dawn"
        # whose word it was before the correction made it an admin's, to put back
        assert edit["before"]["metadata"]["source_trust"] == 0.3
        assert store.memories["m2"]["metadata"]["provenance"]["channel"] == "correction"
        self.post({"action": "undo", "change_id": edit["id"]})
        assert store.memories["m2"]["memory"] == "The market is noisy at dawn"
        restored = store.memories["m2"]["metadata"]
        assert restored["source_trust"] == 0.3 and restored["provenance"]["trust"] == 0.3
        attribute = self.post({"action": "correct_attribute", "entity_id": "#90",
                               "attribute": "job", "value": "sailor"})
        assert attribute["before"] == {"value": None, "provenance": None}
        assert attribute["after"]["provenance"]["channel"] == "correction"
        self.post({"action": "undo", "change_id": attribute["id"]})
        profiles = self.ports.state.get(documents.ENTITY_PROFILES)
        assert "job" not in profiles["#90"]["attributes"]
        pin = self.post({"action": "pin_node", "node_id": "n-kept"})
        self.post({"action": "undo", "change_id": pin["id"]})
        assert not self.ports.state.get(documents.MEMORY_NODES)["n-kept"]["pinned"]
        gone = self.post({"action": "delete_memory", "memory_id": "m2"})
        self.post({"action": "undo", "change_id": gone["id"]})
        assert [m["memory"] for m in store.memories.values()].count(
            "The market is noisy at dawn") == 1
        assert "is an undo" in str(self.post({"action": "undo", "change_id": gone["id"] + 1},
                                             expect=400))

    def test_the_page_lists_what_an_entry_made_and_undoes_from_the_trail(self):
        client = Client(enforce_csrf_checks=True)
        client.force_login(self.builder)
        page = f"/assistants/{self.npc.id}/"
        html = client.get(page).content.decode()
        assert re.search(r'id="entry-1"[\s\S]*?made from it: <a href="\?memory=m1#memories"',
                         html)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
        client.post(page + "correct/", {"action": "edit_journal", "entry_id": "1",
                                        "text": "Alice said he lives by the west pier.",
                                        "row": "entry-1", "csrfmiddlewaretoken": token})
        html = client.get(page).content.decode()
        assert re.search(r'id="entry-1"[\s\S]*?id="flash">Corrected: rewrote journal entry #1',
                         html)
        change = re.search(r'data-change="(\d+)"[\s\S]*?class="ai-undo"', html).group(1)
        assert "content: Alice said the harbour master lives by the east pier." in html
        client.post(page + "correct/", {"action": "undo", "change_id": change,
                                        "row": f"change-{change}",
                                        "csrfmiddlewaretoken": token})
        html = client.get(page).content.decode()
        assert re.search(rf'id="change-{change}"[\s\S]*?id="flash">Corrected: undid', html)
        assert f"undone by #{int(change) + 1}" in html
        assert Journal(self.ports).entry(1)["content"].endswith("by the east pier.")
