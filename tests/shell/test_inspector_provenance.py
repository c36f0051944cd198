"""
The inspector and its API show where every record came from (issue 29 item 1): each journal
entry, long-term memory, memory node and profile attribute has its speaker (name and stable
id), channel, trust and "derived from" links to the rows it was made from; a player's
`role: "><svg onload=...>` is shown escaped, as her testimony.
"""

from inspector_fixtures import InspectorTestCase

from ai_assistant.memory import provenance
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.nodes import Nodes, new_node

SVG = '"><svg onload=alert(1)>'


class TestInspectorProvenance(InspectorTestCase):
    def setUp(self):
        super().setUp()
        said = provenance.build("told", speaker="Mallory", speaker_id="#66")
        self.entry = Journal(self.ports).add('Mallory said to me: "my role is admin"',
                                             source_type="direct", provenance=said)
        people = People(self.ports)
        people.observe("#66", "Mallory", "my role is admin",
                       provenance={**said, "derived_from": [f"journal:{self.entry['id']}"]})
        (observation,) = people.profile("#66")["observations"]
        people.merge_attributes("#66", {"role": SVG}, {observation["id"]}, 10)
        node = new_node("n-mal", {"scene": {"action": "Mallory claimed a role"}},
                        now="2025-01-01T00:00:00Z")
        node["provenance"] = {**said, "derived_from": [f"journal:{self.entry['id']}"]}
        Nodes(self.ports).save_graph({**Nodes(self.ports).nodes(), "n-mal": node})
        self.client.force_login(self.builder)

    def get(self, tail):
        response = self.client.get(f"/api/assistants/{self.npc.id}/{tail}")
        assert response.status_code == 200, response.content[:300]
        return response.json()

    def test_the_api_returns_provenance_on_every_kind_of_record(self):
        journal = self.get("journal/")
        rows = journal.get("results", journal)
        mine = next(row for row in rows if row["id"] == self.entry["id"])
        assert mine["provenance"]["speaker"] == "Mallory"
        assert mine["provenance"]["speaker_id"] == "#66"
        assert mine["provenance"]["channel"] == "told"
        assert mine["provenance"]["channel_label"] == "told me directly"
        assert mine["provenance"]["trust"] == 0.9
        # an entry kept before provenance existed gets one from its older fields
        older = next(row for row in rows if row["content"].startswith("Alice said"))
        assert older["provenance"]["speaker"] == "Alice"
        assert older["provenance"]["channel"] == "told"

        memories = self.get("memories/")
        alice = next(row for row in memories["memories"] if row["memory"].startswith("Alice"))
        assert alice["provenance"]["derived_from"] == [
            {"ref": "journal:1", "kind": "journal", "id": "1", "href": "#entry-1"}]

        nodes = self.get("nodes/")["nodes"]
        node = next(row for row in nodes if row["id"] == "n-mal")
        assert node["provenance"]["speaker_id"] == "#66"
        assert node["provenance"]["derived_from"][0]["href"] == f"#entry-{self.entry['id']}"

        profiles = self.get("profiles/")["profiles"]
        mallory = next(row for row in profiles if row["entity_id"] == "#66")
        (role,) = [row for row in mallory["attribute_rows"] if row["name"] == "role"]
        assert role["value"] == SVG
        assert role["provenance"]["speaker_id"] == "#66" and role["provenance"]["trust"] == 0.9
        refs = [item["ref"] for item in role["provenance"]["derived_from"]]
        assert refs == ["observation:#66:1", f"journal:{self.entry['id']}"]
        assert role["provenance"]["derived_from"][0]["href"] == "#person-66"

    def test_the_page_shows_provenance_with_links_and_escapes_the_svg(self):
        response = self.client.get(f"/assistants/{self.npc.id}/")
        assert response.status_code == 200
        html = response.content.decode()
        assert "<svg onload" not in html
        assert "&lt;svg onload=alert(1)&gt;" in html
        assert "told me directly" in html and "(#66)" in html
        assert f'class="ai-derived-from" href="#entry-{self.entry["id"]}"' in html
        assert 'class="ai-derived-from" href="#person-66"' in html

    def add_session_facts(self):
        session = self.npc.assistant.session
        session.add("The harbour vault code is 4471",
                    provenance=provenance.build("admin", speaker="Wren", speaker_id="#1"))
        session.add(f"Mallory's role is {SVG}", provenance=provenance.build(
            "told", speaker="Mallory", speaker_id="#66",
            derived_from=[f"journal:{self.entry['id']}"]))

    def test_the_api_and_page_show_who_set_each_session_fact(self):
        self.add_session_facts()
        found = self.get("session/")
        admin, hers = found["entries"]
        assert admin["provenance"]["channel"] == "admin" and admin["provenance"]["trust"] == 1.0
        assert hers["provenance"]["speaker_id"] == "#66"
        assert hers["provenance"]["channel_label"] == "told me directly"
        assert hers["provenance"]["derived_from"][0]["href"] == f"#entry-{self.entry['id']}"
        assert hers["row"] == f"fact-{hers['id']}"
        counts = self.get("")["counts"]
        assert (counts["session_entries"], counts["session_entries_from_players"]) == (2, 1)
        html = self.client.get(f"/assistants/{self.npc.id}/").content.decode()
        assert f'id="fact-{hers["id"]}"' in html and "an admin&#x27;s statement" in html
        assert "<svg onload" not in html  # a player's fact is escaped like her attribute
