"""
Issue 32's remaining items, each checked against the running inspector (Django's test client):
the timeline binned by day and zoomed into a day; the link graph labelled, clustered and
clickable through to the memory; the relationship course kept through a real entity
consolidation (the dreaming step, with an LLM that answers); a player's 403 from the API a plain
message with no traceback logged; and malformed input a 4xx, never a 500, on every endpoint.
"""

import json
import re
from datetime import UTC, datetime, timedelta
from unittest.mock import patch

from inspector_fixtures import InspectorTestCase
from support import FakeLLM, result_of, sync_runner

from ai_assistant.memory import entities
from ai_assistant.memory.journal import get_journal
from ai_assistant.plumbing import documents
from ai_assistant.sleep.entity_consolidation import consolidate_entity
from ai_assistant.web import charts

DAYS = ("2025-03-01", "2025-03-02", "2025-03-03")


class TestInspectorChecklist(InspectorTestCase):
    def setUp(self):
        super().setUp()
        # the recall preview's ranking in place: the test client runs on the reactor thread
        in_place = patch("ai_assistant.plumbing.threads.run_cpu_bound", sync_runner)
        in_place.start()
        self.addCleanup(in_place.stop)

    def detail(self, query=""):
        return f"/assistants/{self.npc.id}/{query}"

    def api(self, tail=""):
        return f"/api/assistants/{self.npc.id}/{tail}"

    def test_the_timeline_is_binned_by_day_and_zooms_into_a_day_by_hour(self):
        document = get_journal(self.ports)
        start = datetime(2025, 3, 1, 8, tzinfo=UTC)
        document["entries"] = [{
            "id": number, "content": f"Entry {number} about the harbour.",
            "timestamp": (start + timedelta(hours=7 * number)).isoformat(),
            "importance": 5, "source_type": "direct", "source_trust": 0.9}
            for number in range(1, 10)]  # 3 on each of three days
        self.ports.state.set(documents.JOURNAL, document)
        self.client.force_login(self.builder)

        html = self.client.get(self.detail()).content.decode()
        timeline = html.split('aria-label="Journal entries by day"', 1)[1].split("</svg>", 1)[0]
        assert re.findall(r'<a href="\?day=([\d-]+)#journal" class="ai-day">', timeline) == list(
            DAYS)
        assert "2025-03-02: 3 entries" in timeline  # one bar per day, its count in its title

        zoomed = self.client.get(self.detail("?day=2025-03-02")).content.decode()
        chart = zoomed.split('aria-label="Journal entries on 2025-03-02, by hour"', 1)[1]
        bars = re.findall(r"<title>(\d\d:00): 1 entry", chart.split("</svg>", 1)[0])
        assert len(bars) == 3 and bars == sorted(bars)
        shown = re.findall(r'data-entry="(\d+)"', zoomed.split('id="journal-entries"', 1)[1])
        days = {entry["id"]: entry["timestamp"][:10] for entry in document["entries"]}
        assert len(shown) == 3 and {days[int(number)] for number in shown} == {"2025-03-02"}

    def test_the_link_graph_is_labelled_clustered_and_leads_to_the_memory(self):
        store = self.ports.semantic
        for words in ("The ferry leaves at dawn", "The ferry costs a copper",
                      "Tobias keeps the lighthouse"):
            store.add(words)
        self.ports.state.set(documents.MEMORY_LINKS, {
            "m1": {"linked_to": [{"id": "m2", "score": 0.61}], "journal_ids": [1]},
            "m3": {"linked_to": [{"id": "m4", "score": 0.8}], "journal_ids": []},
            "m5": {"linked_to": [{"id": "m4", "score": 0.7}], "journal_ids": []}})
        self.client.force_login(self.builder)
        html = self.client.get(self.detail()).content.decode()
        graph = html.split('aria-label="Links between long-term memories"', 1)[1].split(
            "</svg>", 1)[0]
        nodes = re.findall(r'<a href="\?memory=(m\d)#memories" class="ai-graph-node">'
                           r'<circle cx="([\d.]+)" cy="([\d.]+)"[\s\S]*?<text[^>]*>([^<]+)</text>',
                           graph)
        assert {node[0] for node in nodes} == {"m1", "m2", "m3", "m4", "m5"}
        labels = {node[0]: node[3] for node in nodes}
        assert labels["m3"].startswith("The ferry leaves")  # labelled with its words
        assert labels["m4"] == "The ferry costs a…"
        groups = charts._clusters([{"id": f"m{n}", "links": []} for n in (1, 2)] + [
            {"id": "m3", "links": [{"id": "m4"}]}, {"id": "m4", "links": []},
            {"id": "m5", "links": [{"id": "m4"}]}, {"id": "m1x", "links": [{"id": "m2"}]}])
        assert [sorted(m["id"] for m in group) for group in groups][0] == ["m3", "m4", "m5"]
        where = {node[0]: (float(node[1]), float(node[2])) for node in nodes}

        def apart(a, b):
            return abs(where[a][0] - where[b][0]) + abs(where[a][1] - where[b][1])

        # the cluster of three is drawn together, away from the pair
        assert max(apart("m3", "m4"), apart("m4", "m5")) < apart("m4", "m1")

        followed = self.client.get(self.detail("?memory=m4")).content.decode()
        assert "1 of 5 memories match the filters" in followed
        assert re.findall(r'<tr class="ai-memory[^"]*" data-memory="(m\d)"', followed) == ["m4"]

    def test_the_relationship_course_survives_a_real_entity_consolidation(self):
        people = entities.People(self.ports)
        for text in ("Thanks, you are kind.", "I brought you bread.", "Lovely day, friend.",
                     "Can you help me?", "You are the best."):
            people.observe("#90", "Alice", text, source="direct_message")
        self.client.force_login(self.builder)
        before = self.client.get(self.api("profiles/")).json()["profiles"][0]["course"]
        assert len(before) == 7

        self.ports.llm = FakeLLM(json.dumps({"attributes": {"personality": "kind, brings bread"}}))
        result = result_of(consolidate_entity(self.ports, "#90"))
        assert result["pruned"] >= 5  # the observations the course was drawn from are gone
        profile = self.client.get(self.api("profiles/")).json()["profiles"][0]
        assert profile["attributes"]["personality"] == "kind, brings bread"
        assert profile["course"] == before
        page = self.client.get(self.detail()).content.decode()
        assert page.count('class="ai-chart"') and "Favorability after each interaction" in page

    def test_a_players_403_from_the_api_is_a_plain_message_and_logs_no_traceback(self):
        self.client.force_login(self.player)
        with self.assertLogs("django.request", level="WARNING") as logged:
            response = self.client.get(self.api("journal/"))
        assert response.status_code == 403
        assert response.json() == {
            "detail": "The memory inspector is for staff (Builder or higher)."}
        assert all(record.exc_info is None for record in logged.records)

    def test_malformed_input_is_a_4xx_never_a_500(self):
        self.client.force_login(self.builder)
        reads = ["journal/?limit=x&offset=-3", "journal/?limit=99999999999999999999",
                 "memories/?since=yesterday&until=%00&moffset=abc", "memories/?limit=-1",
                 "memories/?q=" + "x" * 5000, "nodes/?state=%ff", "profiles/?person=%00",
                 "recall/?q=" + "y" * 5000, "recall/?q=hi&speaker=%00"]
        for tail in reads:
            response = self.client.get(self.api(tail))
            assert response.status_code < 500, (tail, response.status_code)
        for query in ("?offset=x&moffset=-9&noffset=1e9&poffset=%00", "?day=31-31-31",
                      "?since=2025-99-99&private=maybe&rq=" + "z" * 3000):
            assert self.client.get(self.detail(query)).status_code == 200, query
        assert self.client.get("/api/assistants/999999/").status_code == 404
        posts = [
            ("not json at all", "application/json"),
            (json.dumps([1, 2, 3]), "application/json"),
            (json.dumps({"action": "edit_journal", "entry_id": 2 ** 70, "text": "x"}),
             "application/json"),
            (json.dumps({"action": "edit_journal", "entry_id": "one", "text": "x"}),
             "application/json"),
            (json.dumps({"action": "explode"}), "application/json"),
            (json.dumps({"action": "edit_journal", "entry_id": 1, "text": "x" * 20001}),
             "application/json"),
            (json.dumps({"action": "undo", "change_id": 424242}), "application/json"),
            (json.dumps({"action": "delete_memory", "memory_id": "nope"}), "application/json"),
            (json.dumps({"action": "pin_node", "node_id": {"a": 1}}), "application/json"),
            (json.dumps({"action": "correct_attribute", "entity_id": "#404",
                         "attribute": "job"}), "application/json"),
            ("action=mark_wrong&entry_id=%00", "application/x-www-form-urlencoded"),
            ("\xff\xfe", "application/json"),
        ]
        for body, kind in posts:
            response = self.client.post(self.api("corrections/"), body, content_type=kind)
            assert 400 <= response.status_code < 500, (body[:60], response.status_code,
                                                       response.content[:200])
        assert self.ports.state.get(documents.CORRECTIONS_AUDIT, None) in (None, [])
        form = self.client.post(self.detail("correct/"), {"action": "edit_journal",
                                                          "entry_id": "x", "row": "<b>"})
        assert form.status_code == 302
