"""
The memory inspector's REST API (`ai_assistant/web/api.py`) through Django's test client: every
endpoint, and who may use it (staff 200, player 403, anonymous 401/403).
"""

import base64
import json

from inspector_fixtures import PASSWORD, InspectorTestCase

from ai_assistant.memory.journal import Journal
from ai_assistant.plumbing import documents

ENDPOINTS = ("", "journal/", "memories/", "profiles/", "goals/", "projects/", "nodes/",
             "sleeps/", "corrections/")


def basic(username):
    token = base64.b64encode(f"{username}:{PASSWORD}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


class TestInspectorAPI(InspectorTestCase):
    def url(self, tail=""):
        return f"/api/assistants/{self.npc.id}/{tail}"

    def get(self, path, **extra):
        response = self.client.get(path, **extra)
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
        return response.json()

    # --- who may use it -----------------------------------------------------------------------

    def test_staff_get_every_endpoint_players_get_403_and_anonymous_401(self):
        paths = ["/api/assistants/"] + [self.url(tail) for tail in ENDPOINTS]
        for path in paths:
            assert self.client.get(path).status_code == 401, path  # Basic auth asks for login
        self.client.force_login(self.player)
        for path in paths:
            assert self.client.get(path).status_code == 403, path
        for account in (self.builder, self.admin):
            self.client.force_login(account)
            for path in paths:
                assert self.client.get(path).status_code == 200, (account, path)

    def test_http_basic_authentication_works_and_checks_the_permission(self):
        assert self.client.get("/api/assistants/", **basic("Bo")).status_code == 200
        assert self.client.get("/api/assistants/", **basic("Pat")).status_code == 403
        wrong = {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(b"Bo:nope").decode()}
        assert self.client.get("/api/assistants/", **wrong).status_code == 401

    def test_a_player_cannot_correct_and_an_unknown_assistant_is_404(self):
        self.client.force_login(self.player)
        response = self.client.post(self.url("corrections/"),
                                    {"action": "pin_node", "node_id": "n-kept"})
        assert response.status_code == 403
        assert not self.ports.state.get(documents.MEMORY_NODES)["n-kept"]["pinned"]
        self.client.force_login(self.builder)
        assert self.client.get("/api/assistants/999999/").status_code == 404
        assert self.client.get("/api/assistants/999999/journal/").status_code == 404
        # an object that is not an assistant is not one here either
        assert self.client.get(f"/api/assistants/{self.char1.id}/").status_code == 404

    # --- reads --------------------------------------------------------------------------------

    def test_list_and_status(self):
        self.client.force_login(self.builder)
        (row,) = [a for a in self.get("/api/assistants/") if a["id"] == self.npc.id]
        assert row == {"id": self.npc.id, "key": "Ada", "mode": "awake", "phase": None,
                       "location": self.room1.key}
        status = self.get(self.url())
        assert status["mode"] == "awake" and status["mechanical"] is True
        assert status["provider"] == "mechanical (no LLM configured)"
        assert status["emergency_stop"] is False and status["llm"]["calls"] == 0
        counts = status["counts"]
        assert counts["journal_entries"] == 2 and counts["long_term_memories"] == 2
        assert counts["entity_profiles"] == 1 and counts["goals"] == 2
        assert counts["memory_nodes"] == 2
        assert counts["memory_nodes_by_status"] == {"dying": 1, "active": 1}

    def test_journal_is_paginated_and_searched_with_scores(self):
        self.client.force_login(self.builder)
        page = self.get(self.url("journal/") + "?limit=1")
        assert page["count"] == 2 and page["next"] and page["previous"] is None
        assert [entry["id"] for entry in page["results"]] == [2]  # newest first
        second = self.get(self.url("journal/") + "?limit=1&offset=1")
        assert [entry["id"] for entry in second["results"]] == [1]
        found = self.get(self.url("journal/") + "?q=harbour+master")
        assert found["query"] == "harbour master"
        assert found["results"][0]["id"] == 1 and found["results"][0]["score"] > 0
        assert found["results"][0]["source_entity"] == "Alice"

    def test_memories_profiles_goals_projects_nodes_sleeps(self):
        self.client.force_login(self.builder)
        memories = self.get(self.url("memories/"))
        assert memories["available"] is True
        by_id = {memory["id"]: memory for memory in memories["memories"]}
        assert by_id["m1"]["trust"] == 0.9 and by_id["m1"]["source"]["source_entity"] == "Alice"
        assert by_id["m1"]["links"] == [{"id": "m2", "score": 0.61,
                                         "memory": "The market is noisy at dawn"}]
        assert by_id["m1"]["journal_ids"] == [1]
        scored = self.get(self.url("memories/") + "?q=harbour+master")
        assert scored["memories"][0]["id"] == "m1" and "recalled" in scored["memories"][0]

        people = self.get(self.url("profiles/"))
        (alice,) = people["profiles"]
        assert alice["name"] == "Alice" and alice["relationship"]["interaction_count"] == 2
        assert [point["state"] for point in alice["course"]]
        assert alice["course"][0]["favorability"] < alice["course"][-1]["favorability"]
        assert [band for band, _ in people["bands"]][0] == "stranger"

        (root,) = self.get(self.url("goals/"))
        assert root["description"] == "Learn the harbour"
        assert [child["description"] for child in root["children"]] == [
            "Meet the harbour master"]
        (project,) = self.get(self.url("projects/"))
        assert project["key"] == "harbour"

        nodes = self.get(self.url("nodes/"))
        states = {node["id"]: node["state"] for node in nodes["nodes"]}
        assert states == {"n-fading": "dying", "n-kept": "active"}
        fading = next(node for node in nodes["nodes"] if node["id"] == "n-fading")
        assert 0 < fading["effective_importance"] < 0.4

        (sleep,) = self.get(self.url("sleeps/"))
        assert sleep["woke"] == "rested" and sleep["counts"]["memory_links.links_created"] == 2
        assert self.get(self.url("corrections/")) == []

    # --- corrections --------------------------------------------------------------------------

    def post(self, payload, expect=201):
        response = self.client.post(self.url("corrections/"), json.dumps(payload),
                                    content_type="application/json")
        assert response.status_code == expect, response.content
        return response.json()

    def test_corrections_through_the_api(self):
        self.client.force_login(self.admin)
        record = self.post({"action": "pin_node", "node_id": "n-fading"})
        assert record["action"] == "pin_node" and record["by"] == "Root"
        # flushed: the database holds it at once
        assert self.npc.attributes.get(documents.MEMORY_NODES)["n-fading"]["pinned"] is True
        self.post({"action": "mark_wrong", "entry_id": 1, "reason": "he moved"})
        found = self.get(self.url("journal/") + "?q=harbour+master+pier")
        assert 1 not in [entry["id"] for entry in found["results"]]
        self.post({"action": "edit_journal", "entry_id": 2, "text": "A gull stole bread."})
        assert Journal(self.ports).entry(2)["content"] == "A gull stole bread."
        self.post({"action": "correct_attribute", "entity_id": "#90", "attribute": "job",
                   "value": "sailor"})
        self.post({"action": "edit_memory", "memory_id": "m2", "text": "The market opens late."})
        self.post({"action": "mark_wrong", "memory_id": "m1"})
        self.post({"action": "delete_memory", "memory_id": "m2"})
        self.post({"action": "delete_journal", "entry_id": 2})
        self.post({"action": "unpin_node", "node_id": "n-fading"})
        trail = self.get(self.url("corrections/"))
        assert [record["action"] for record in trail] == [
            "unpin_node", "delete_journal", "delete_memory", "mark_wrong", "edit_memory",
            "correct_attribute", "edit_journal", "mark_wrong", "pin_node"]
        # each one is in the assistant's journal too
        entries = {entry["id"]: entry for entry in Journal(self.ports).entries()}
        assert all("correction" in entries[record["journal_entry_id"]]["tags"]
                   for record in trail)
        profile = self.get(self.url("profiles/"))["profiles"][0]
        assert profile["attributes"] == {"job": "sailor"}

    def test_bad_corrections_get_400_with_a_reason(self):
        self.client.force_login(self.builder)
        assert "action" in self.post({"action": "dance"}, expect=400)
        assert "node_id" in str(self.post({"action": "pin_node"}, expect=400))
        assert "entry_id or memory_id" in str(self.post({"action": "mark_wrong"}, expect=400))
        missing = self.post({"action": "pin_node", "node_id": "nope"}, expect=400)
        assert missing == {"detail": "There is no memory node 'nope'."}
        assert "no journal entry #42" in self.post(
            {"action": "delete_journal", "entry_id": 42}, expect=400)["detail"]
        assert self.get(self.url("corrections/")) == []

    def test_a_session_post_needs_its_csrf_token(self):
        from django.test import Client

        client = Client(enforce_csrf_checks=True)
        client.force_login(self.builder)
        response = client.post(self.url("corrections/"), {"action": "pin_node",
                                                          "node_id": "n-kept"})
        assert response.status_code == 403 and "CSRF" in response.json()["detail"]
        assert not self.ports.state.get(documents.MEMORY_NODES)["n-kept"]["pinned"]
