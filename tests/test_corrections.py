"""
Corrections staff make through the memory inspector (`memory/corrections.py`), the per-sleep
reports (`sleep/reports.py`), and the recall rule they add: a memory marked wrong is never
recalled again.
"""

import pytest
from support import make_ports, result_of, sync_runner
from twisted.internet import defer

from ai_assistant.memory import corrections, journal
from ai_assistant.memory.corrections import CorrectionError
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.memory.nodes import new_node
from ai_assistant.memory.recall.long_term import retrieve_relevant_memories
from ai_assistant.memory.search.journal_search import search_journal
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.settings import DEFAULTS, Settings
from ai_assistant.sleep import reports

pytestmark = pytest.mark.core


class FakeSemantic:
    """A semantic port over a dict; every call returns a fired Deferred, as the port does."""

    relevance_threshold = 0.1

    def __init__(self):
        self.memories = {}

    def add(self, text, *, metadata=None, infer=False):
        memory_id = f"m{len(self.memories) + 1}"
        self.memories[memory_id] = {"id": memory_id, "memory": text,
                                    "metadata": dict(metadata or {})}
        return defer.succeed([{"id": memory_id, "memory": text, "event": "ADD"}])

    def get(self, memory_id):
        memory = self.memories.get(memory_id)
        return defer.succeed(dict(memory) if memory else None)

    def update(self, memory_id, text, *, metadata=None):
        memory = self.memories.get(memory_id)
        if memory is None:
            return defer.succeed(None)
        memory["memory"] = text
        memory["metadata"] = {**memory["metadata"], **(metadata or {})}
        return defer.succeed(dict(memory))

    def delete(self, memory_id):
        self.memories.pop(memory_id, None)
        return defer.succeed(None)

    def search(self, query, *, limit=10, filters=None):
        words = set(query.lower().split())
        hits = [{**memory, "score": len(words & set(memory["memory"].lower().split())) / 5}
                for memory in self.memories.values()]
        return defer.succeed(sorted(hits, key=lambda hit: -hit["score"])[:limit])

    def list(self, *, limit=100, filters=None):
        return defer.succeed(list(self.memories.values())[:limit])


QUESTION = "where does the harbour master live"


def journal_with(ports, *texts):
    return [Journal(ports).add(text, source_entity="Alice") for text in texts]


def audit_and_journal(ports):
    trail = corrections.audit_trail(ports)
    last = Journal(ports).entries()[-1]
    return trail, last


def test_a_journal_entry_marked_wrong_is_never_recalled_but_stays_visible():
    ports = make_ports()
    wrong, right = journal_with(ports, "The harbour master lives on the west pier.",
                                "The harbour master lives by the east pier.")
    found = [entry["id"] for _, entry in search_journal(ports, QUESTION)]
    assert wrong["id"] in found

    record = result_of(corrections.mark_journal_entry_wrong(ports, wrong["id"], "he moved",
                                                            by="Builder Bo"))
    found = [entry["id"] for _, entry in search_journal(ports, QUESTION)]
    assert wrong["id"] not in found and right["id"] in found
    # still in the journal, with the mark
    kept = Journal(ports).entry(wrong["id"])
    assert kept["wrong"]["reason"] == "he moved" and kept["wrong"]["by"] == "Builder Bo"
    trail, last = audit_and_journal(ports)
    assert trail == [record]
    assert record["action"] == "mark_wrong" and record["target"] == f"journal:{wrong['id']}"
    assert last["id"] == record["journal_entry_id"] and "correction" in last["tags"]
    assert last["source_entity"] == "Builder Bo" and "he moved" in last["content"]


def test_editing_a_journal_entry_replaces_it_and_the_search_sees_the_new_text():
    ports = make_ports()
    (entry,) = journal_with(ports, "Bob owes me three coins.")
    assert search_journal(ports, "coins")
    before = Journal(ports).entries()[0]
    result_of(corrections.edit_journal_entry(ports, entry["id"], "Bob owes me a lantern.",
                                             by="admin"))
    after = Journal(ports).entry(entry["id"])
    assert after is not before  # a new object: the search index is keyed by entry identity
    assert after["content"] == "Bob owes me a lantern." and after["corrected"]["by"] == "admin"
    # the entry; the journal's note of the correction (id 2) is never ranked (issue 29)
    assert [e["id"] for _, e in search_journal(ports, "lantern")] == [entry["id"]]
    assert "lantern" in Journal(ports).entry(2)["content"]
    assert entry["id"] not in [e["id"] for _, e in search_journal(ports, "coins")]
    with pytest.raises(CorrectionError, match="cannot be empty"):
        result_of(corrections.edit_journal_entry(ports, entry["id"], "  ", by="admin"))
    with pytest.raises(CorrectionError, match="no journal entry #99"):
        result_of(corrections.edit_journal_entry(ports, 99, "x", by="admin"))
    with pytest.raises(CorrectionError, match="is a number"):
        result_of(corrections.delete_journal_entry(ports, "abc", by="admin"))


def test_deleting_a_journal_entry_removes_it_and_its_consolidation_mark():
    ports = make_ports()
    first, second = journal_with(ports, "First thing.", "Second thing.")
    Journal(ports).mark_consolidated([first["id"]])
    result_of(corrections.delete_journal_entry(ports, first["id"], by="admin"))
    doc = journal.get_journal(ports)
    assert first["id"] not in [e["id"] for e in doc["entries"]]
    assert first["id"] not in doc["consolidated_entry_ids"]
    trail, _ = audit_and_journal(ports)
    assert trail[-1]["action"] == "delete_journal"


def test_pinning_a_node_keeps_it_from_dying():
    from ai_assistant.sleep.patrol.decay import flag_dying_nodes

    ports = make_ports()
    doomed = new_node("n1", {"scene": {"action": "fed the cat"}}, now="2025-01-01T00:00:00Z")
    doomed.update(importance=0.1, session_count=500)
    kept = dict(doomed, id="n2")
    ports.state.set(documents.MEMORY_NODES, {"n1": doomed, "n2": kept})
    corrections.set_node_pinned(ports, "n2", True, by="admin")
    flag_dying_nodes(ports)
    nodes = ports.state.get(documents.MEMORY_NODES)
    assert nodes["n1"]["status"] == "dying" and nodes["n2"]["status"] == "active"
    assert nodes["n2"]["pinned"] is True
    record = corrections.set_node_pinned(ports, "n2", False, by="admin")
    assert ports.state.get(documents.MEMORY_NODES)["n2"]["pinned"] is False
    assert record["action"] == "unpin_node" and "fed the cat" in record["detail"]
    with pytest.raises(CorrectionError, match="no memory node"):
        corrections.set_node_pinned(ports, "nope", True, by="admin")


def test_correcting_an_entity_attribute():
    ports = make_ports()
    ports.state.set(documents.ENTITY_PROFILES, {
        "#5": {"entity_id": "#5", "name": "Alice", "attributes": {"job": "baker"}}})
    corrections.correct_entity_attribute(ports, "#5", "job", "smith", by="admin")
    corrections.correct_entity_attribute(ports, "#5", "home", "the mill", by="admin")
    assert ports.state.get(documents.ENTITY_PROFILES)["#5"]["attributes"] == {
        "job": "smith", "home": "the mill"}
    corrections.correct_entity_attribute(ports, "#5", "home", "", by="admin")
    assert ports.state.get(documents.ENTITY_PROFILES)["#5"]["attributes"] == {"job": "smith"}
    with pytest.raises(CorrectionError, match="no attribute"):
        corrections.correct_entity_attribute(ports, "#5", "home", "", by="admin")
    with pytest.raises(CorrectionError, match="no profile"):
        corrections.correct_entity_attribute(ports, "#9", "job", "x", by="admin")
    with pytest.raises(CorrectionError, match="needs a name"):
        corrections.correct_entity_attribute(ports, "#5", " ", "x", by="admin")
    assert [r["action"] for r in corrections.audit_trail(ports)] == ["correct_attribute"] * 3


def test_long_term_memory_edit_delete_and_wrong():
    store = FakeSemantic()
    ports = make_ports(semantic=store)
    result_of(store.add("alice likes tea", metadata={"source_trust": 0.9}))
    result_of(store.add("alice likes coffee", metadata={"source_trust": 0.9}))
    recalled = result_of(retrieve_relevant_memories(ports, "what does alice like"))
    assert {hit["id"] for hit in recalled} == {"m1", "m2"}

    result_of(corrections.mark_memory_wrong(ports, "m2", "she hates coffee", by="admin"))
    recalled = result_of(retrieve_relevant_memories(ports, "what does alice like"))
    assert [hit["id"] for hit in recalled] == ["m1"]
    assert store.memories["m2"]["metadata"]["wrong_reason"] == "she hates coffee"

    result_of(corrections.edit_memory(ports, "m1", "alice likes green tea", by="admin"))
    assert store.memories["m1"]["memory"] == "alice likes green tea"
    assert store.memories["m1"]["metadata"]["corrected_by"] == "admin"
    result_of(corrections.delete_memory(ports, "m1", by="admin"))
    assert "m1" not in store.memories
    assert [r["action"] for r in corrections.audit_trail(ports)] == [
        "mark_wrong", "edit_memory", "delete_memory"]
    with pytest.raises(CorrectionError, match="no long-term memory"):
        result_of(corrections.delete_memory(ports, "m1", by="admin"))
    with pytest.raises(CorrectionError, match="no long-term memory"):
        result_of(corrections.edit_memory(make_ports(), "m1", "x", by="admin"))


def test_the_audit_trail_keeps_the_last_n():
    ports = make_ports(overrides={"inspector.audit_kept": 2})
    journal_with(ports, "One.")
    for attempt in range(3):
        result_of(corrections.edit_journal_entry(ports, 1, f"One, take {attempt}.", by="admin"))
    trail = corrections.audit_trail(ports)
    assert [record["id"] for record in trail] == [2, 3]


def test_the_real_store_updates_a_memory_in_place(tmp_path):
    store = make_semantic_store(Settings(DEFAULTS), str(tmp_path), "npc-1", runner=sync_runner)
    try:
        (added,) = result_of(store.add("Alice prefers tea over coffee.",
                                       metadata={"source_trust": 0.9}))
        updated = result_of(store.update(added["id"], "Alice prefers coffee over tea.",
                                         metadata={"wrong": True}))
        assert updated["id"] == added["id"]
        assert updated["memory"] == "Alice prefers coffee over tea."
        assert updated["metadata"]["wrong"] is True and updated["metadata"]["source_trust"] == 0.9
        hits = result_of(store.search("What does Alice drink?", limit=3))
        assert hits[0]["metadata"]["wrong"] is True
        assert result_of(store.update("00000000-0000-0000-0000-000000000000", "x")) is None
    finally:
        store.close()


# ----------------------------------------------------------------------------------------------
# Sleep reports


def tick(phase, steps, woke=None, time="2025-01-01T13:00:00Z"):
    return {"phase": phase, "steps": steps, "woke": woke, "time": time}


def test_a_sleep_report_adds_up_its_ticks_and_closes_on_wake():
    ports = make_ports()
    asleep = {"started_at": "2025-01-01T12:00:00Z", "reason": "tired"}
    reports.note_sleep_tick(ports, tick("compacting", {
        "importance_scoring": {"scored": [1, 2], "remaining": 5, "mechanical": False},
        "consolidation": {"consolidated": [1], "stored": 2, "completed": True},
    }), asleep)
    reports.note_sleep_tick(ports, tick("dreaming", {
        "memory_links": {"links_created": 3, "remaining": 0},
        "reflection": {"ran": True, "insights": ["a", "b"]},
        "entity_consolidation": {"error": "LLM down"},
        "patrol": {"steps": {"revival": {"revived": 1, "ids": ["n1"]},
                             "consolidation": {"merged": 2, "made_dead": 1}}},
    }, woke="rested"), asleep)
    (report,) = reports.recent_sleeps(ports, asleep_now=False)
    assert report["started_at"] == "2025-01-01T12:00:00Z" and report["reason"] == "tired"
    assert report["woke"] == "rested" and report["ended_at"] == "2025-01-01T13:00:00Z"
    assert report["ticks"] == 2 and report["phases"] == {"compacting": 1, "dreaming": 1}
    assert report["counts"] == {
        "importance_scoring.scored": 2, "consolidation.consolidated": 1,
        "consolidation.stored": 2, "memory_links.links_created": 3, "reflection.ran": 1,
        "reflection.insights": 2, "patrol.revival.revived": 1, "patrol.consolidation.merged": 2,
        "patrol.consolidation.made_dead": 1,
    }
    assert report["errors"] == ["entity_consolidation: LLM down"]
    assert ports.state.get(documents.SLEEP_REPORTS)["current"] is None


def test_only_the_last_sleeps_are_kept_and_a_sleep_ended_outside_a_tick_is_closed():
    ports = make_ports(overrides={"sleep.reports_kept": 2})
    for number in range(3):
        asleep = {"started_at": f"2025-01-0{number + 1}T00:00:00Z", "reason": "night"}
        reports.note_sleep_tick(ports, tick("dreaming", {"x": {"done": number + 1}}), asleep)
        under_way = reports.recent_sleeps(ports, asleep_now=True)[0]
        assert under_way["under_way"] and under_way["counts"] == {"x.done": number + 1}
    # the first two sleeps were woken by an admin between ticks: closed when the next began
    shown = reports.recent_sleeps(ports, asleep_now=False)
    assert [r["started_at"][:10] for r in shown] == ["2025-01-03", "2025-01-02", "2025-01-01"]
    assert not shown[0]["under_way"] and shown[1]["ended_at"] is None
    assert len(ports.state.get(documents.SLEEP_REPORTS)["recent"]) == 2
