"""
Each long-term memory's history on the inspector's page and in its API (issue 32), with the
real mem0 store: mem0's own history of the memory (added, text changed, marked: the text before
and after, when) merged, oldest first, with what only the assistant knows (the journal entries it
was made from, the corrections of the audit trail that touched it, and by whom).
"""

import shutil
import tempfile

from inspector_fixtures import InspectorTestCase
from support import result_of, sync_runner

from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.plumbing.ports import parse_iso
from ai_assistant.plumbing.settings import DEFAULTS, Settings

ELEVEN = "The crew of the Gull is eleven sailors."
TWELVE = "The crew of the Gull is twelve sailors."


class TestMemoryHistory(InspectorTestCase):
    def setUp(self):
        super().setUp()
        folder = tempfile.mkdtemp(prefix="ai_assistant_history_page_")
        self.addCleanup(shutil.rmtree, folder, True)
        self.store = make_semantic_store(Settings(DEFAULTS), folder, "npc-ada",
                                         runner=sync_runner)
        self.ports.semantic = self.store
        self.memory_id = result_of(Memories(self.ports).add(ELEVEN, metadata={
            "source_type": "direct", "source_entity": "Alice"}))[0]["id"]

    def tearDown(self):
        self.store.close()
        super().tearDown()

    def correct(self, payload):
        response = self.client.post(f"/api/assistants/{self.npc.id}/corrections/", payload,
                                    content_type="application/json")
        assert response.status_code == 201, response.content
        return response.json()

    def history(self):
        response = self.client.get(f"/api/assistants/{self.npc.id}/memories/",
                                   {"memory": self.memory_id})
        assert response.status_code == 200, response.content
        (memory,) = response.json()["memories"]
        return memory["history"]

    def test_mem0s_history_and_the_audit_trail_in_the_api_and_on_the_page(self):
        self.client.force_login(self.builder)
        edit = self.correct({"action": "edit_memory", "memory_id": self.memory_id,
                             "text": TWELVE})
        self.correct({"action": "mark_wrong", "memory_id": self.memory_id,
                      "reason": "the crew was counted twice"})

        history = self.history()
        assert [(event["event"], event["by"]) for event in history] == [
            ("added", "mem0"), ("text changed", "mem0"), ("edit_memory", "Bo"),
            ("marked", "mem0"), ("mark_wrong", "Bo")]
        assert history[0]["after"] == ELEVEN
        assert (history[1]["before"], history[1]["after"]) == (ELEVEN, TWELVE)
        assert history[2]["detail"].startswith(f"#{edit['id']}: ")
        assert (history[2]["before"]["memory"], history[2]["after"]["memory"]) == (ELEVEN,
                                                                                   TWELVE)
        times = [parse_iso(event["time"]) for event in history]
        assert None not in times and times == sorted(times)

        html = self.client.get(f"/assistants/{self.npc.id}/",
                               {"memory": self.memory_id}).content.decode()
        row = html.split(f'id="memory-{self.memory_id}"', 1)[1].split("</tr>", 1)[0]
        assert "history (5)" in row
        assert row.index('data-event="added"') < row.index('data-event="text changed"') < row.index(
            'data-event="mark_wrong"')
        assert f"{ELEVEN} -&gt; {TWELVE}" in row

    def test_a_history_that_cannot_be_read_says_so_and_the_rest_still_shows(self):
        self.client.force_login(self.builder)

        def broken(memory_ids):
            raise OSError("history.db is locked")

        self.store._histories = broken
        history = self.history()
        assert [event["event"] for event in history] == ["added"]
        html = self.client.get(f"/assistants/{self.npc.id}/").content.decode()
        assert "mem0&#x27;s history could not be read: history.db is locked" in html


def test_the_games_lazy_store_offers_every_verb_of_the_store():
    """The game's store opens on first use (`adapters.LazySemanticStore`): it passes each verb
    on, the history included, or the page would silently show none of mem0's."""
    from ai_assistant.adapters import LazySemanticStore
    from ai_assistant.memory.longterm.mem0_store import Mem0Store

    verbs = {name for name, value in vars(Mem0Store).items()
             if callable(value) and not name.startswith("_")} - {"close"}
    assert "histories" in verbs
    assert verbs <= set(dir(LazySemanticStore)), verbs - set(dir(LazySemanticStore))


def test_the_games_lazy_store_ranks_in_the_database_when_the_game_chose_postgres():
    """Recall asks the store for its candidates before the store has opened: the lazy store
    must say from the settings alone whether the database ranks, or a postgres game would
    look in a mirror this store never fills and recall no long-term memory at all."""
    from ai_assistant.adapters import LazySemanticStore

    def lazy(store):
        settings = Settings(DEFAULTS, {"memory.store": store})
        return LazySemanticStore(settings, "ada", log=lambda message: None)

    assert lazy("postgres").ranks_in_database is True
    assert lazy("embedded").ranks_in_database is False
