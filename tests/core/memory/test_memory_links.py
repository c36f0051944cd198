"""
A-MEM link generation (dreaming) and orphan pruning, on the real embedded store.
"""

import pytest
from support import make_ports, result_of, sync_runner
from twisted.internet import defer

from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.plumbing.ports import iso
from ai_assistant.plumbing.settings import DEFAULTS, Settings
from ai_assistant.sleep.linking import run_dreaming_tick


@pytest.fixture
def ports(tmp_path):
    store = make_semantic_store(Settings(DEFAULTS), str(tmp_path), "ada", runner=sync_runner)
    bundle = make_ports(key="ada", semantic=store)
    bundle.logs = bundle.log
    yield bundle
    store.close()


def remember(ports, text, importance=7):
    stored = result_of(ports.semantic.add(text, metadata={"importance": importance}))
    return stored[0]["id"]


def test_similar_memories_get_bidirectional_links(ports):
    tea = remember(ports, "Alice prefers tea over coffee.")
    tea_again = remember(ports, "Alice likes tea more than coffee.", importance=2)
    bridge = remember(ports, "The bridge to the east collapsed during the storm.")

    result = result_of(run_dreaming_tick(ports))
    assert set(result["processed"]) == {tea, bridge}  # the unimportant one is not a source
    links = MemoryLinks(ports).records()
    assert [link["id"] for link in links[tea]["linked_to"]] == [tea_again]
    score = links[tea]["linked_to"][0]["score"]
    assert score >= 0.5  # the calibrated link similarity
    # bidirectional, but the target is not marked processed by being linked to
    assert links[tea_again]["linked_to"] == [{"id": tea, "score": score}]
    assert links[tea_again]["processed_at"] is None
    assert links[bridge]["linked_to"] == []  # nothing similar enough
    assert links[tea]["processed_at"] == iso(ports.clock.now())
    assert result["links_created"] == 1 and result["remaining"] == 0

    again = result_of(run_dreaming_tick(ports))
    assert again["processed"] == [] and MemoryLinks(ports).records() == links


def test_batch_size_and_importance_order(ports):
    low = remember(ports, "The well is dry.", importance=5)
    high = remember(ports, "The king's crown was stolen last night.", importance=9)
    remember(ports, "Carol is searching for the ancient map.", importance=6)
    first = result_of(run_dreaming_tick(ports, batch_size=2))
    assert first["processed"][0] == high and low not in first["processed"]
    assert first["remaining"] == 1
    second = result_of(run_dreaming_tick(ports, batch_size=2))
    assert second["processed"] == [low]


def test_search_failure_keeps_memories_unprocessed(ports):
    remember(ports, "Alice prefers tea over coffee.")
    real = ports.semantic

    class SearchFails:
        def list(self, **kwargs):
            return real.list(**kwargs)

        def search(self, *args, **kwargs):
            return defer.fail(ConnectionError("store down"))

        link_similarity = real.link_similarity

    ports.semantic = SearchFails()
    result = result_of(run_dreaming_tick(ports))
    assert result["success"] is False and result["processed"] == []
    assert MemoryLinks(ports).records() == {}
    ports.semantic = real
    assert len(result_of(run_dreaming_tick(ports))["processed"]) == 1


def test_prune_removes_links_to_deleted_memories(ports):
    tea = remember(ports, "Alice prefers tea over coffee.")
    tea_again = remember(ports, "Alice likes tea more than coffee.")
    result_of(run_dreaming_tick(ports))
    assert MemoryLinks(ports).records()[tea]["linked_to"]

    result_of(ports.semantic.delete(tea_again))
    result = result_of(MemoryLinks(ports).prune_orphaned())
    assert result == {"success": True, "removed_records": 1, "removed_links": 1}
    links = MemoryLinks(ports).records()
    assert tea_again not in links and links[tea]["linked_to"] == []
    assert result_of(MemoryLinks(ports).prune_orphaned())["removed_records"] == 0


def test_prune_removes_nothing_when_the_store_cannot_answer(ports):
    tea = remember(ports, "Alice prefers tea over coffee.")
    result_of(run_dreaming_tick(ports))

    class Down:
        def list(self, **kwargs):
            return defer.fail(ConnectionError("store down"))

    ports.semantic = Down()
    result = result_of(MemoryLinks(ports).prune_orphaned())
    assert result["success"] is False
    assert tea in MemoryLinks(ports).records()
