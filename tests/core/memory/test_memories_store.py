"""
Long-term memory has one owner: `Memories` (and `MemoryLinks` for the links document).

- Every write through the owner reaches the recall mirror at once (add, update, delete, forget
  all), so no writer can leave recall behind; the owner is the only code that touches the
  store port (`ports.semantic`), which this file checks over the whole package.
- The policy on a new claim is one function (`policy.judge_claim`): keep an existing memory,
  supersede what it corrects, or store it beside; the mem0 adapter applies whatever verdict it
  is given (checked against the real mem0 with a judge of the test's own).
- `MemoryLinks` keeps the links document: which entry each memory came from, links both ways,
  what dreaming processed.
"""

import ast
from pathlib import Path

from support import make_ports, result_of, sync_runner
from twisted.internet import defer

from ai_assistant.memory.longterm import policy
from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.mem0_store import close_all_stores, make_semantic_store
from ai_assistant.memory.longterm.memories import LongTermMemoryOff, Memories
from ai_assistant.memory.longterm.mirror import mirror_of
from ai_assistant.memory.longterm.supersede import NEGATION, is_superseded
from ai_assistant.plumbing.settings import DEFAULTS, Settings

PACKAGE = Path(__file__).resolve().parents[3] / "ai_assistant"


class DictStore:
    """A `SemanticPort` over a dict: stores every text, as a store without a judge does."""

    def __init__(self, memories=()):
        self.memories = {memory["id"]: dict(memory) for memory in memories}
        self.next_id = len(self.memories)
        self.listed = []

    def add(self, text, *, metadata=None, infer=False):
        self.next_id += 1
        memory_id = f"m{self.next_id}"
        self.memories[memory_id] = {"id": memory_id, "memory": text,
                                    "metadata": dict(metadata or {})}
        return defer.succeed([{"id": memory_id, "memory": text, "event": "ADD"}])

    def update(self, memory_id, text, *, metadata=None):
        if memory_id not in self.memories:
            return defer.succeed(None)
        memory = self.memories[memory_id]
        memory.update(memory=text, metadata={**memory["metadata"], **(metadata or {})})
        return defer.succeed(dict(memory))

    def delete(self, memory_id):
        self.memories.pop(memory_id, None)
        return defer.succeed(None)

    def delete_all(self):
        count = len(self.memories)
        self.memories.clear()
        return defer.succeed(count)

    def get(self, memory_id):
        return defer.succeed(self.memories.get(memory_id))

    def list(self, *, limit=100, filters=None):
        self.listed.append(limit)
        return defer.succeed(list(self.memories.values())[:limit])

    def search(self, query, *, limit=10, filters=None):
        return defer.succeed([{**memory, "score": 0.5} for memory in self.memories.values()
                              if query.lower() in memory["memory"].lower()][:limit])


def mirrored(ports):
    return [item["content"] for item in mirror_of(ports).entries()]


# ----------------------------------------------------------------------------------------------
# Memories: every write reaches the mirror


def test_every_write_through_the_owner_reaches_the_recall_mirror():
    store = DictStore([{"id": "m0", "memory": "Orla keeps bees.", "metadata": {}}])
    ports = make_ports(semantic=store)
    memories = Memories(ports)
    assert result_of(memories.recall_mirror()).loaded and mirrored(ports) == ["Orla keeps bees."]

    added = result_of(memories.add("Orla sells honey.", {"entry_id": 7}))
    assert store.memories[added[0]["id"]]["metadata"] == {"entry_id": 7}
    assert mirrored(ports) == ["Orla keeps bees.", "Orla sells honey."]
    assert mirror_of(ports).source_entries() == frozenset({"7"})

    result_of(memories.update("m0", "Orla keeps three hives.", {"wrong": True}))
    item = next(item for item in mirror_of(ports).entries() if item["id"] == "m0")
    assert item["content"] == "Orla keeps three hives." and item["metadata"]["wrong"]

    result_of(memories.delete(added[0]["id"]))
    assert mirrored(ports) == ["Orla keeps three hives."]
    assert result_of(memories.forget_all()) == 1 and mirrored(ports) == []
    assert store.listed == [DEFAULTS["recall"]["mirror_max"]]  # read once, followed since


def test_a_kept_duplicate_adds_nothing_and_a_correction_marks_the_old_memory_in_the_mirror():
    class JudgedStore(DictStore):
        verdicts = []

        def add(self, text, *, metadata=None, infer=False):
            verdict = self.verdicts.pop(0)
            if verdict == "duplicate":
                return defer.succeed([{"id": "m0", "memory": "x", "event": "DUPLICATE"}])
            stored = super().add(text, metadata=metadata).result
            mark = {"superseded_by": stored[0]["id"], "superseded_how": NEGATION}
            self.memories["m0"]["metadata"].update(mark)
            return defer.succeed([{**stored[0], "marked": {"m0": mark}}])

    store = JudgedStore([{"id": "m0", "memory": "Alice is allergic to peanuts.", "metadata": {}}])
    ports = make_ports(semantic=store)
    memories = Memories(ports)
    result_of(memories.recall_mirror())
    store.verdicts = ["duplicate", "supersede"]
    result_of(memories.add("Alice is allergic to peanuts!"))
    assert mirrored(ports) == ["Alice is allergic to peanuts."]
    result_of(memories.add("Alice is not allergic to peanuts."))
    items = {item["id"]: item for item in mirror_of(ports).entries()}
    assert is_superseded(items["m0"]) and items["m0"]["metadata"]["superseded_how"] == NEGATION
    assert len(items) == 2


def test_without_a_store_the_owner_says_so_and_stores_nothing():
    ports = make_ports()
    memories = Memories(ports)
    assert not memories.available
    failures = []
    memories.add("Alice likes tea.").addErrback(failures.append)
    memories.search("tea").addErrback(failures.append)
    assert [failure.check(LongTermMemoryOff) for failure in failures] == [LongTermMemoryOff] * 2
    assert "memory.enabled" in failures[0].getErrorMessage()


def test_list_all_grows_its_listing_until_it_comes_back_short():
    store = DictStore([{"id": f"m{n}", "memory": f"fact {n}", "metadata": {}}
                       for n in range(5)])  # fmt: skip
    listed = result_of(Memories(make_ports(semantic=store)).list_all(at_least=2))
    assert len(listed) == 5 and store.listed == [2, 4, 8]


def test_only_the_long_term_package_touches_the_store_port():
    strangers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "longterm" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "semantic":
                strangers.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not strangers, "go through memory.longterm.memories.Memories: " + ", ".join(strangers)


# ----------------------------------------------------------------------------------------------
# the policy


def hit(memory_id, text, score=0.5, **metadata):
    return {"id": memory_id, "memory": text, "score": score, "metadata": metadata}


def test_the_policy_keeps_a_same_fact_and_a_near_identical_one_that_corrects_nothing():
    same = policy.judge_claim("alice LIKES tea!", {}, [hit("1", "Alice likes tea.")],
                              duplicate_similarity=0.97)
    assert same.action == policy.KEEP_EXISTING and same.existing["id"] == "1"
    assert not same.stores
    near = policy.judge_claim("Bob lost his old sword in the swamp.", {},
                              [hit("2", "Bob lost his sword in the swamp.", score=0.98)],
                              duplicate_similarity=0.97)
    assert near.action == policy.KEEP_EXISTING and near.existing["id"] == "2"


def test_the_policy_supersedes_what_a_claim_corrects_and_says_how():
    verdict = policy.judge_claim("Potions cost 50 gold.", {"source_trust": 0.9},
                                 [hit("1", "Potions cost 10 gold."), hit("2", "Swords are sharp.")],
                                 duplicate_similarity=0.97)  # fmt: skip
    assert verdict.action == policy.SUPERSEDE and verdict.stores
    assert verdict.new_metadata({"source_trust": 0.9}) == {"source_trust": 0.9,
                                                           "supersedes": ["1"]}
    [(memory, mark)] = verdict.marks("9", "2025-01-01T12:00:00Z")
    assert memory["id"] == "1"
    assert mark == {"superseded_by": "9", "superseded_at": "2025-01-01T12:00:00Z",
                    "superseded_how": "quantity"}


def test_the_policy_stores_another_fact_beside_and_never_compares_across_audiences():
    beside = policy.judge_claim("Bob likes tea.", {}, [hit("1", "Alice likes tea.", 0.9)],
                                duplicate_similarity=0.97)
    assert beside.action == policy.STORE and beside.marks("9", "now") == []
    assert beside.new_metadata({"a": 1}) == {"a": 1}
    private = policy.judge_claim("The vault code is 9876.", {"audience": "#12"},
                                 [hit("1", "The vault code is 1234.")],
                                 duplicate_similarity=0.97)
    assert private.action == policy.STORE


def test_the_mem0_adapter_applies_the_verdict_its_judge_gives(tmp_path):
    asked = []

    def judge(text, metadata, existing, *, duplicate_similarity):
        asked.append((text, [memory["memory"] for memory in existing]))
        if not existing:
            return policy.Verdict(policy.STORE)
        return policy.Verdict(policy.SUPERSEDE, superseded=((existing[0], "update"),))

    store = make_semantic_store(Settings(DEFAULTS), str(tmp_path), "ada", judge=judge,
                                runner=sync_runner)
    try:
        first = result_of(store.add("The ferry leaves at dawn."))[0]
        second = result_of(store.add("Goblins fear the lighthouse keeper."))[0]
        assert asked == [("The ferry leaves at dawn.", []),
                         ("Goblins fear the lighthouse keeper.", ["The ferry leaves at dawn."])]
        assert second["supersedes"] == [first["id"]]
        assert second["marked"][first["id"]]["superseded_by"] == second["id"]
        old = result_of(store.get(first["id"]))
        assert old["metadata"]["superseded_how"] == "update"
        # a store given no judge stores every text as it comes, duplicates included
        plain = make_semantic_store(Settings(DEFAULTS), str(tmp_path), "bert", judge=None,
                                    runner=sync_runner)
        try:
            events = [result_of(plain.add("Same words."))[0]["event"] for _ in range(2)]
            assert events == ["ADD", "ADD"] and len(result_of(plain.list())) == 2
        finally:
            plain.close()
    finally:
        store.close()
        close_all_stores()


# ----------------------------------------------------------------------------------------------
# MemoryLinks


def test_memory_links_record_sources_and_link_both_ways():
    ports = make_ports()
    links = MemoryLinks(ports)
    links.link_entry("entry-1", ["a", "b"])
    links.link_entry("entry-1", ["a"])  # recorded once
    assert links.memory_ids_for_entry("entry-1") == ["a", "b"]
    assert links.memory_ids_for_entry("entry-2") == []
    made = links.connect({"a": [{"id": "c", "score": 0.81234}]}, max_links=5)
    records = MemoryLinks(ports).records()
    assert made == 1 and records["a"]["linked_to"] == [{"id": "c", "score": 0.8123}]
    assert records["c"]["linked_to"] == [{"id": "a", "score": 0.8123}]
    assert links.processed_ids() == {"a"} and records["a"]["processed_at"]
    assert links.connect({}, max_links=5) == 0
    assert links.horizon() is None  # far from `memory.links_max_records`
