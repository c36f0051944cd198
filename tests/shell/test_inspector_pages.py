"""
The memory inspector's pages (`ai_assistant/web/views.py`, its templates and SVG charts) through
Django's test client: who sees them, what they show, and corrections through CSRF forms.
"""

import re

from django.test import Client
from inspector_fixtures import InspectorTestCase

from ai_assistant.memory.journal import Journal
from ai_assistant.plumbing import documents
from ai_assistant.web import charts


class TestInspectorPages(InspectorTestCase):
    def page(self, path, client=None):
        response = (client or self.client).get(path)
        assert response.status_code == 200, (path, response.status_code)
        return response.content.decode()

    def detail(self, query=""):
        return f"/assistants/{self.npc.id}/" + (f"?q={query}" if query else "")

    def test_staff_only(self):
        for path in ("/assistants/", self.detail()):
            response = self.client.get(path)
            assert response.status_code == 302 and response["Location"].startswith(
                "/auth/login/?next="), path
            self.client.force_login(self.player)
            assert self.client.get(path).status_code == 403
            self.client.force_login(self.builder)
            assert self.client.get(path).status_code == 200
            self.client.logout()
        self.client.force_login(self.player)
        assert self.client.post(f"/assistants/{self.npc.id}/correct/",
                                {"action": "pin_node", "node_id": "n-kept"}).status_code == 403
        assert not self.ports.state.get(documents.MEMORY_NODES)["n-kept"]["pinned"]

    def test_the_list_links_each_assistant(self):
        self.client.force_login(self.builder)
        html = self.page("/assistants/")
        assert f'href="/assistants/{self.npc.id}/"' in html and ">Ada<" in html
        assert "website/css/website.css" in html  # Evennia's website template
        assert "ai_assistant/inspector.css" in html

    def test_the_page_shows_every_tier(self):
        self.client.force_login(self.builder)
        html = self.page(self.detail())
        for section in ("status", "journal", "search", "memories", "people", "goals",
                        "projects", "nodes", "sleeps", "corrections"):
            assert f'id="{section}"' in html, section
        assert 'id="status-mode">awake<' in html
        assert "mechanical (no LLM configured)" in html
        assert html.count('class="ai-entry') == 2
        assert "Journal entries by day" in html and '<a href="?day=' in html
        assert "Links between long-term memories" in html and "similarity 0.61" in html
        assert "Alice" in html and "Favorability after each interaction" in html
        assert "Meet the harbour master" in html and 'data-goal="' in html
        assert "Map the harbour" in html
        assert re.search(r'data-node="n-fading"[\s\S]*?dying', html)
        assert "Decay of node n-fading" in html
        assert "2 links made" in html and "1 nodes revived" in html
        assert "No corrections yet." in html

    def test_search_shows_the_scores_of_the_assistants_own_search(self):
        self.client.force_login(self.builder)
        html = self.page(self.detail("harbour+master"))
        assert re.search(r'\d+ matching entr(y|ies) for "harbour master"', html)
        # best first: the entry about the harbour master, with its hybrid score
        first = re.search(r'class="ai-entry" data-entry="(\d+)"[\s\S]*?class="ai-score">'
                          r'(0\.\d{3})<', html)
        assert first.group(1) == "1" and float(first.group(2)) > 0
        assert "recalled when relevance" in html
        empty = self.page(self.detail("zebra+xylophone"))
        assert "Nothing in the journal matches." in empty

    def test_the_journal_pages(self):
        for number in range(30):
            Journal(self.ports).add(f"Filler entry {number}.")
        self.client.force_login(self.builder)
        html = self.page(self.detail())
        assert html.count('class="ai-entry') == 25 and 'id="journal-older"' in html
        older = self.page(self.detail() + "?offset=25")
        assert older.count('class="ai-entry') == 7 and "newer" in older

    def csrf_client(self):
        client = Client(enforce_csrf_checks=True)
        client.force_login(self.builder)
        html = self.page(self.detail(), client)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
        return client, token

    def test_a_form_correction_needs_csrf_and_shows_on_the_page(self):
        client, token = self.csrf_client()
        url = f"/assistants/{self.npc.id}/correct/"
        refused = client.post(url, {"action": "pin_node", "node_id": "n-kept"})
        assert refused.status_code == 403
        response = client.post(url, {"action": "pin_node", "node_id": "n-kept",
                                     "back": "nodes", "csrfmiddlewaretoken": token})
        assert response.status_code == 302
        assert response["Location"] == f"/assistants/{self.npc.id}/#nodes"  # no `next` sent
        html = self.page(self.detail(), client)
        assert "Corrected: pinned memory node n-kept" in html
        assert re.search(r'data-node="n-kept"[\s\S]*?<b class="ai-pinned">pinned</b>', html)
        assert re.search(r'data-action="pin_node"[\s\S]*?Bo', html)
        assert self.npc.attributes.get(documents.MEMORY_NODES)["n-kept"]["pinned"] is True

    def test_a_refused_correction_says_why(self):
        client, token = self.csrf_client()
        client.post(f"/assistants/{self.npc.id}/correct/",
                    {"action": "edit_journal", "entry_id": "77", "text": "x",
                     "csrfmiddlewaretoken": token})
        html = self.page(self.detail(), client)
        assert "Not corrected: There is no journal entry #77." in html

    def test_forms_for_every_correction_are_on_the_page(self):
        self.client.force_login(self.builder)
        html = self.page(self.detail())
        for action in ("pin_node", "edit_journal", "delete_journal", "edit_memory",
                       "delete_memory", "correct_attribute", "mark_wrong"):
            assert f'name="action" value="{action}"' in html, action
        assert html.count('name="csrfmiddlewaretoken"') >= 10


def test_chart_text_is_escaped():
    from datetime import UTC, datetime

    entry = {"id": 1, "content": "<script>alert(1)</script>", "source_type": "direct"}
    svg = charts.importance_timeline([(datetime(2025, 1, 1, tzinfo=UTC), 5.0, entry)])
    assert "<script>" not in svg and "2025-01-01: 1 entry, mean importance 5.0" in svg
    graph = charts.link_graph([{"id": "a\"b", "memory": "<b>x</b>", "links": [{"id": "c"}]},
                               {"id": "c", "memory": "c", "links": []}])
    assert "<b>x</b>" not in graph and 'data-memory="a&quot;b"' in graph
    assert "&lt;b&gt;x&lt;/b&gt;" in graph  # the label, escaped
    assert "No journal entries yet." in charts.importance_timeline([])
    assert "No links between long-term memories yet." in charts.link_graph([])


def test_the_pages_assets_ship_in_the_package_with_their_licence():
    from pathlib import Path

    static = Path(charts.__file__).parent / "static" / "ai_assistant"
    vendored = static / "vendor" / "bootstrap-4.6.0"
    trimmed = (vendored / "bootstrap.inspector.min.css").read_text()
    assert trimmed.startswith("/*!\n * Bootstrap v4.6.0")
    assert "MIT License" in (vendored / "LICENSE").read_text()
    assert (static / "inspector.css").exists()
    templates = Path(charts.__file__).parent / "templates" / "ai_assistant"
    base = (templates / "inspector_base.html").read_text()
    assert "ai_assistant/vendor/bootstrap-4.6.0/bootstrap.inspector.min.css" in base
    for page in templates.glob("*.html"):
        text = page.read_text()
        assert "http://" not in text and "https://" not in text  # nothing from a CDN
        assert page.name == "inspector_base.html" or 'extends "website/' not in text
