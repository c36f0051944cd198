"""
The bounds of the documents that grow with time or with the people met (issue 20, item 2):
memory links, entity profiles, the node graph (nodes and their vectors) and the diary.
"""

from datetime import timedelta

from support import make_ports, result_of
from twisted.internet import defer

from ai_assistant.memory import node_vectors
from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.entities import People, get_profiles
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm.links import MemoryLinks, bound_memory_links
from ai_assistant.memory.nodes import ACTIVE, DEAD, DYING, Nodes
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso
from ai_assistant.sleep import linking
from ai_assistant.sleep.patrol.archive import bound_node_graph
from ai_assistant.sleep.patrol.diary import _store as store_diary

# ----------------------------------------------------------------------------------------------
# memory links


def _record(processed_at):
    return {"linked_to": [], "journal_ids": [], "processed_at": processed_at}


def test_links_bound_drops_the_records_processed_longest_ago():
    ports = make_ports(overrides={"memory.links_max_records": 3})
    links = {"old": _record("2025-01-01T00:00:00Z"), "mid": _record("2025-02-01T00:00:00Z"),
             "new": _record("2025-03-01T00:00:00Z"), "fresh": _record(None),
             "fresher": _record(None)}  # fmt: skip
    assert bound_memory_links(ports, links) == 2
    # the unprocessed records stay: dreaming has still to link their memories
    assert set(links) == {"new", "fresh", "fresher"}
    assert bound_memory_links(ports, links) == 0


class _Store:
    """A semantic port that lists the given memories and finds no neighbours."""

    link_similarity = 0.7

    def __init__(self, memories):
        self.memories = memories

    def list(self, limit=100, filters=None):
        return defer.succeed(list(self.memories))

    def search(self, query, limit=10, filters=None):
        return defer.succeed([])

    def get(self, memory_id):
        return defer.succeed(next((m for m in self.memories if m["id"] == memory_id), None))


def test_a_full_links_document_is_pruned_and_dropped_memories_are_not_linked_again():
    memories = [{"id": f"m{n}", "memory": f"fact {n}", "metadata": {"importance": 8},
                 "created_at": f"2025-01-0{n + 1}T10:00:00+00:00"} for n in range(4)]
    ports = make_ports(overrides={"memory.links_max_records": 2}, semantic=_Store(memories))
    ports.state.set(documents.MEMORY_LINKS,
                    {f"m{n}": _record(f"2025-01-0{n + 1}T12:00:00Z") for n in range(4)})

    result = result_of(MemoryLinks(ports).prune_orphaned())
    assert result["dropped_old"] == 2
    assert set(MemoryLinks(ports).records()) == {"m2", "m3"}
    assert MemoryLinks(ports).horizon() == "2025-01-03T12:00:00Z"
    # m0 and m1 are still in the store, unprocessed in the document: dreaming skips them
    report = result_of(linking.run_dreaming_tick(ports))
    assert report["processed"] == [] and report["remaining"] == 0


def test_links_under_the_bound_keep_every_memory_a_candidate():
    memories = [{"id": "m0", "memory": "fact", "metadata": {"importance": 8},
                 "created_at": "2024-01-01T10:00:00+00:00"}]
    ports = make_ports(semantic=_Store(memories))
    ports.state.set(documents.MEMORY_LINKS, {"other": _record("2025-01-01T12:00:00Z")})
    assert MemoryLinks(ports).horizon() is None
    assert result_of(linking.run_dreaming_tick(ports))["processed"] == ["m0"]


class _OrderedStore(_Store):
    """Lists as local qdrant scrolls: in id order, cut at `limit` (new ids sort anywhere)."""

    def __init__(self, memories):
        super().__init__(memories)
        self.limits = []

    def list(self, limit=100, filters=None):
        self.limits.append(limit)
        return defer.succeed(sorted(self.memories, key=lambda m: m["id"])[:limit])


def test_linking_finds_a_new_memory_past_the_first_listing():
    old = [{"id": f"a{n:04d}", "memory": f"fact {n}", "metadata": {"importance": 8},
            "created_at": "2025-01-01T10:00:00+00:00"} for n in range(linking.SCAN_LIMIT + 100)]
    new = {"id": "z-new", "memory": "the newest fact", "metadata": {"importance": 8},
           "created_at": "2025-02-01T10:00:00+00:00"}
    store = _OrderedStore([*old, new])
    ports = make_ports(semantic=store)
    ports.state.set(documents.MEMORY_LINKS,
                    {memory["id"]: _record("2025-01-01T12:00:00Z") for memory in old})
    # every old memory was processed: the only candidate sorts after the first listing's end
    report = result_of(linking.run_dreaming_tick(ports))
    assert report["processed"] == ["z-new"]
    assert store.limits[-1] > len(store.memories)  # the last listing came back complete


def test_links_processed_long_ago_keep_their_strongest_links_only():
    from ai_assistant.memory.longterm.links import age_memory_links

    ports = make_ports(overrides={"memory.links_full_days": 30, "memory.links_old_kept": 2})
    kept_entry = Journal(ports).add("Bob sells bread at the market.")["id"]
    linked = [{"id": f"x{n}", "score": 0.9 - n / 10} for n in range(5)]  # strongest first
    old = iso(ports.clock.now() - timedelta(days=31))
    recent = iso(ports.clock.now() - timedelta(days=29))
    links = {"old": {"linked_to": list(linked), "journal_ids": [kept_entry, "gone"],
                     "processed_at": old},
             "recent": {"linked_to": list(linked), "journal_ids": ["gone"],
                        "processed_at": recent},
             "new": {"linked_to": list(linked), "journal_ids": ["gone"], "processed_at": None}}
    assert age_memory_links(ports, links) == 1
    assert links["old"]["linked_to"] == linked[:2]
    assert links["old"]["journal_ids"] == [kept_entry]  # the entry the journal no longer holds
    assert links["recent"]["linked_to"] == linked and links["new"]["linked_to"] == linked
    assert age_memory_links(ports, links) == 0  # idempotent


def test_aging_keeps_the_entries_merged_into_a_memory():
    from ai_assistant.memory.longterm.links import age_memory_links, link_entry_to_memories

    ports = make_ports(overrides={"memory.links_full_days": 30})
    links = {}
    link_entry_to_memories(links, "origin", ["m1"])
    link_entry_to_memories(links, "said-again", ["m1", "m2"], merged=["m1"])
    assert links["m1"]["merged_journal_ids"] == ["said-again"]
    assert "merged_journal_ids" not in links["m2"]  # m2 was stored for it: its own entry_id
    for record in links.values():
        record["processed_at"] = iso(ports.clock.now() - timedelta(days=31))
    assert age_memory_links(ports, links) == 2  # neither entry is in the journal any more
    assert links["m1"]["journal_ids"] == ["said-again"]
    assert links["m2"]["journal_ids"] == []
    assert age_memory_links(ports, links) == 0


def test_the_link_cleanup_step_ages_old_records():
    held = [{"id": memory_id, "memory": "fact", "metadata": {}}
            for memory_id in ("m", "x0", "x1", "x2", "x3")]
    ports = make_ports(semantic=_Store(held))
    old = iso(ports.clock.now() - timedelta(days=40))
    linked = [{"id": f"x{n}", "score": round(0.9 - n / 10, 4)} for n in range(4)]
    ports.state.set(documents.MEMORY_LINKS,
                    {"m": {"linked_to": linked, "journal_ids": [], "processed_at": old}})
    result = result_of(MemoryLinks(ports).prune_orphaned())
    assert result["aged"] == 1 and result["removed_links"] == 0
    # the default links_old_kept
    assert MemoryLinks(ports).records()["m"]["linked_to"] == linked[:2]


# ----------------------------------------------------------------------------------------------
# conversation history


def test_a_sleep_condenses_the_lines_older_than_history_days():
    from ai_assistant.sleep import compaction

    ports = make_ports(overrides={"compaction.history_days": 7,
                                  "compaction.preserve_messages": 2})
    for day in range(10):
        Conversation(ports).append("user", "Bob", f"Line of day {day}.")
        ports.clock.advance(days=1)
    # the window is far from full: only the age rule makes a sleep compact, never an awake tick
    assert Conversation(ports).usage() < 0.1
    assert compaction.is_due(ports) and not compaction.is_due(ports, threshold=0.8)
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["compacted"] and report["messages"] == 3
    history = Conversation(ports).history()
    assert history[0]["summary"]
    assert [m["content"] for m in history[1:]] == [f"Line of day {d}." for d in range(3, 10)]
    # the next sleep finds nothing older than the marker: nothing to do
    assert not compaction.is_due(ports)
    ports.clock.advance(days=1)  # a day later, the line of day 3 has aged too
    assert result_of(compaction.compact_conversation_history(ports))["messages"] == 2


def test_history_days_zero_keeps_the_old_rule():
    from ai_assistant.sleep import compaction

    ports = make_ports(overrides={"compaction.history_days": 0,
                                  "compaction.preserve_messages": 2})
    for _ in range(10):
        Conversation(ports).append("user", "Bob", "Hello.")
        ports.clock.advance(days=1)
    assert not compaction.is_due(ports)
    assert result_of(compaction.compact_conversation_history(ports))["reason"] == (
        "below threshold")


# ----------------------------------------------------------------------------------------------
# entity profiles


def test_passers_by_are_forgotten_and_known_people_kept():
    ports = make_ports()
    People(ports).observe("#1", "Stranger", "Hello there.")
    People(ports).observe("#2", "Regular", "Good morning, Ada.")
    for _ in range(4):
        People(ports).observe("#2", "Regular", "Nice weather.")
    People(ports).observe("#3", "Told", "I am a smith.")
    profiles = get_profiles(ports)
    profiles["#3"]["attributes"] = {"occupation": "smith"}
    ports.state.set(documents.ENTITY_PROFILES, profiles)

    ports.clock.advance(days=29)
    assert People(ports).prune()["forgotten"] == 0  # not yet long enough unseen
    ports.clock.advance(days=2)
    result = People(ports).prune()
    # the stranger seen once goes; five observations or a learnt attribute keep a profile
    assert result == {"success": True, "forgotten": 1, "capped": 0, "kept": 2}
    assert set(get_profiles(ports)) == {"#2", "#3"}


def test_profiles_past_the_cap_lose_the_least_known_first():
    ports = make_ports(overrides={"entities.max_profiles": 2})
    People(ports).observe("#1", "Once", "Hi.")
    for _ in range(5):
        People(ports).observe("#2", "Often", "Hi again.")
    ports.clock.advance(hours=1)
    People(ports).observe("#3", "Recent", "Hello.")
    result = People(ports).prune()
    assert result["capped"] == 1 and result["forgotten"] == 0
    assert set(get_profiles(ports)) == {"#2", "#3"}  # the one seen least, longest ago, goes


# ----------------------------------------------------------------------------------------------
# the node graph and the diary


def _graph(ports, statuses):
    nodes, vectors = {}, {"dims": 2, "revision": None, "nodes": {}, "clusters": {}}
    for number, (status, pinned) in enumerate(statuses):
        node_id = f"n{number}"
        nodes[node_id] = {"id": node_id, "status": status, "pinned": pinned, "importance": 0.5,
                          "session_count": 0, "reactivation_count": 0, "cluster_id": "c1",
                          "created_at": iso(ports.clock.now() + timedelta(days=number))}
        vectors["nodes"][node_id] = node_vectors.encode_vector([1.0, float(number)])
    ports.state.set(documents.MEMORY_NODES, nodes)
    Nodes(ports).save_graph(vectors=vectors)


def test_the_graph_past_its_bound_drops_dead_then_dying_never_pinned():
    ports = make_ports(overrides={"nodes.max_nodes": 3})
    _graph(ports, [(ACTIVE, False), (DEAD, True), (DYING, False), (DEAD, False),
                   (ACTIVE, False), (DEAD, False)])  # fmt: skip
    result = bound_node_graph(ports)
    assert result["dropped"] == 3
    nodes = ports.state.get(documents.MEMORY_NODES)
    # the two unpinned dead nodes and the dying one go; the pinned dead node stays
    assert set(nodes) == {"n0", "n1", "n4"}
    vectors = Nodes(ports).vectors()
    assert set(vectors["nodes"]) == {"n0", "n1", "n4"}
    assert "c1" in vectors["clusters"]  # the centroid of what is left
    assert bound_node_graph(ports) == {"dropped": 0, "kept": 3}


def test_old_nodes_keep_their_vectors_as_int8():
    import numpy as np

    ports = make_ports(overrides={"nodes.vectors_full_days": 30})
    rng = np.random.default_rng(3)
    nodes, vectors = {}, {"dims": 64, "revision": None, "nodes": {}, "clusters": {}}
    full = {}
    for number, age in enumerate((40, 31, 29, 1)):
        node_id = f"n{number}"
        nodes[node_id] = {"id": node_id, "status": ACTIVE, "pinned": False, "importance": 0.5,
                          "session_count": 0, "reactivation_count": 0, "cluster_id": "c1",
                          "created_at": iso(ports.clock.now() - timedelta(days=age))}
        full[node_id] = node_vectors.unit(rng.normal(size=64))
        vectors["nodes"][node_id] = node_vectors.encode_vector(full[node_id])
    ports.state.set(documents.MEMORY_NODES, nodes)
    Nodes(ports).save_graph(vectors=vectors)
    before = {k: len(v) for k, v in vectors["nodes"].items()}

    assert bound_node_graph(ports) == {"dropped": 0, "kept": 4, "compacted": 2}
    stored = Nodes(ports).vectors()["nodes"]
    for node_id in ("n0", "n1"):  # older than 30 days: a quarter of the size, same direction
        assert stored[node_id].startswith(node_vectors.COMPACT_PREFIX)
        assert len(stored[node_id]) < before[node_id] / 3
        decoded = node_vectors.decode_vector(stored[node_id])
        assert float(node_vectors.unit(decoded) @ full[node_id]) > 0.999
    for node_id in ("n2", "n3"):
        assert stored[node_id] == vectors["nodes"][node_id]
    assert bound_node_graph(ports) == {"dropped": 0, "kept": 4}  # nothing left to compact


def test_the_diary_keeps_its_last_days():
    ports = make_ports(overrides={"nodes.diary_kept": 3})
    for day in range(1, 6):
        store_diary(ports, f"2025-01-0{day}", [f"Day {day}."], [], [])
    assert sorted(ports.state.get(documents.DIARY)) == ["2025-01-03", "2025-01-04", "2025-01-05"]


def test_the_patrol_keeps_the_graph_within_its_bound():
    from ai_assistant.sleep.patrol import run_patrol
    from ai_assistant.workspace.status import format_patrol_report

    ports = make_ports(overrides={"nodes.max_nodes": 2})
    _graph(ports, [(DEAD, False), (ACTIVE, False), (ACTIVE, False), (DEAD, False)])
    report = result_of(run_patrol(ports))
    assert report["steps"]["bound"]["dropped"] == 2
    assert set(ports.state.get(documents.MEMORY_NODES)) == {"n1", "n2"}
    assert "bound (nodes.max_nodes): dropped 2, kept 2" in format_patrol_report(report)
