"""
Sleep consolidation (journal -> mem0) and two-stage retrieval, on the real embedded store.

Failures are injected at the port (a wrapper that fails chosen calls); "reload" is a new port
instance over the same data folder with the same state.
"""

import json
import re

import pytest
from support import FakeLLM, result_of, sync_runner
from support import make_ports as support_ports
from twisted.internet import defer

from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.recall.long_term import (
    format_memory_results,
    memory_context_block,
    retrieve_relevant_memories,
)
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import LLMError, LLMReply, MemoryState
from ai_assistant.plumbing.settings import DEFAULTS, Settings
from ai_assistant.sleep.consolidation import extraction_attempts, run_sleep_consolidation


def entry(number, content, importance=6, trust=0.8, source_type="observation", tags=(),
          entity=None):
    return {
        "id": f"entry-{number}",
        "timestamp": "2025-01-01T12:00:00Z",
        "content": content,
        "source_type": source_type,
        "source_trust": trust,
        "source_entity": entity,
        "importance": importance,
        "importance_method": "heuristic",
        "tags": list(tags),
        "related_projects": [],
    }


FACTS = [
    "Alice prefers tea over coffee.",
    "The tavern is in the north wing of the castle.",
    "Bob lost his sword in the swamp.",
    "The blacksmith closes at sunset.",
    "Carol is searching for the ancient map.",
    "The bridge to the east collapsed during the storm.",
    "Dave wants to learn magic from the wizard.",
]


def journal_with(entries):
    return {"entries": entries, "entry_count": len(entries), "max_entries": 100,
            "last_reflection": None, "consolidated_entry_ids": []}


class FailingStore:
    """Delegates to a real store; `fail_add_on` lists which add calls (1-based) fail."""

    def __init__(self, store, fail_add_on=()):
        self.store = store
        self.fail_add_on = set(fail_add_on)
        self.adds = []
        self.listings = []

    def add(self, text, *, metadata=None, infer=False):
        self.adds.append((text, infer))
        if len(self.adds) in self.fail_add_on:
            return defer.fail(ConnectionError("vector store unavailable"))
        return self.store.add(text, metadata=metadata, infer=False)

    def list(self, *, limit=100, filters=None):
        self.listings.append(filters)
        return self.store.list(limit=limit, filters=filters)

    def __getattr__(self, name):
        return getattr(self.store, name)


@pytest.fixture
def make_ports(tmp_path):
    opened = []

    def _make(entries=None, state=None, wrap=None, llm=None, overrides=None):
        settings = Settings(DEFAULTS, overrides)
        store = make_semantic_store(settings, str(tmp_path), "ada", runner=sync_runner)
        opened.append(store)
        state = state or MemoryState({documents.JOURNAL: journal_with(entries or [])})
        ports = support_ports(key="ada", state=state, llm=llm, overrides=overrides,
                              semantic=wrap(store) if wrap else store)
        ports.logs = ports.log
        return ports

    yield _make
    for store in opened:
        store.close()


def test_consolidates_a_batch_per_tick_with_the_specified_metadata(make_ports):
    entries = [entry(i, text, entity="Alice" if i == 0 else None)
               for i, text in enumerate(FACTS)]
    ports = make_ports(entries)

    first = result_of(run_sleep_consolidation(ports))
    assert first["consolidated"] == [f"entry-{i}" for i in range(5)]
    assert first["completed"] is False and first["remaining"] == 2
    assert ports.state.get(documents.JOURNAL)["consolidated_entry_ids"] == first["consolidated"]

    memories = result_of(ports.semantic.list(filters={"entry_id": "entry-0"}))
    assert len(memories) == 1
    assert memories[0]["memory"] == FACTS[0]
    assert memories[0]["metadata"] == {
        "source": "journal", "entry_id": "entry-0", "tags": [], "source_type": "observation",
        "source_trust": 0.8, "source_entity": "Alice", "importance": 6,
        "importance_method": "heuristic",
        "verbatim": True,  # no LLM: the text itself, and it says so
        "timestamp": "2025-01-01T12:00:00Z",  # when it was heard: recall dates it
        # made from the entry: its speaker, channel and trust, and which entry
        "provenance": {"speaker_id": None, "speaker": "Alice", "channel": "seen",
                       "trust": 0.8, "derived_from": ["journal:entry-0"]},
    }
    assert MemoryLinks(ports).memory_ids_for_entry("entry-0") == [memories[0]["id"]]
    assert MemoryLinks(ports).records()[memories[0]["id"]]["journal_ids"] == ["entry-0"]

    second = result_of(run_sleep_consolidation(ports))
    assert second["consolidated"] == ["entry-5", "entry-6"] and second["completed"] is True
    third = result_of(run_sleep_consolidation(ports))
    assert third["completed"] is True and third["consolidated"] == []
    assert len(result_of(ports.semantic.list())) == len(FACTS)
    assert ports.state.get(documents.MEMORY_CONSOLIDATION)["in_flight"] == {}


def test_skips_synthesis_and_unimportant_entries(make_ports):
    entries = [
        entry(1, "[SYNTHESIS] Players like quests.", importance=8),
        entry(2, "Patterns about the market.", importance=8, tags=["synthesis"]),
        entry(3, "It was cloudy.", importance=2),
        entry(4, "Alice prefers tea over coffee.", importance=3),
    ]
    ports = make_ports(entries)
    result = result_of(run_sleep_consolidation(ports))
    assert result["consolidated"] == ["entry-4"] and result["completed"] is True
    assert [m["memory"] for m in result_of(ports.semantic.list())] == [
        "Alice prefers tea over coffee."]


def test_failure_mid_batch_keeps_the_rest_pending_and_retries_without_duplicates(make_ports):
    entries = [entry(i, text) for i, text in enumerate(FACTS[:4])]
    ports = make_ports(entries, wrap=lambda store: FailingStore(store, fail_add_on={3}))

    failed = result_of(run_sleep_consolidation(ports))
    assert failed["success"] is False and "vector store unavailable" in failed["error"]
    assert failed["consolidated"] == ["entry-0", "entry-1"]
    assert failed["completed"] is False
    assert ports.state.get(documents.JOURNAL)["consolidated_entry_ids"] == ["entry-0", "entry-1"]
    assert any("entry-2" in line for line in ports.logs)

    retried = result_of(run_sleep_consolidation(ports))
    assert retried["consolidated"] == ["entry-2", "entry-3"] and retried["completed"] is True
    texts = sorted(m["memory"] for m in result_of(ports.semantic.list()))
    assert texts == sorted(FACTS[:4])  # each exactly once


def test_stored_but_unmarked_entry_is_not_stored_again_after_a_reload(make_ports):
    entries = [entry(i, text) for i, text in enumerate(FACTS[:3])]
    ports = make_ports(entries)
    result_of(run_sleep_consolidation(ports))
    stored_ids = {m["id"] for m in result_of(ports.semantic.list())}

    # The reload lost the marking (state from before the tick), but mem0 kept the memories.
    state = MemoryState({documents.JOURNAL: journal_with(entries)})
    ports.semantic.close()
    reloaded = make_ports(state=state, wrap=lambda store: FailingStore(store))
    result = result_of(run_sleep_consolidation(reloaded))

    assert result["reused"] == 3 and result["stored"] == 0 and result["completed"] is True
    assert reloaded.semantic.adds == []
    # what was stored is looked up for the batch at once, not entry by entry
    assert reloaded.semantic.listings == [{"entry_id": {"in": ["entry-0", "entry-1", "entry-2"]}}]
    assert {m["id"] for m in result_of(reloaded.semantic.list())} == stored_ids
    consolidated = state.get(documents.JOURNAL)["consolidated_entry_ids"]
    assert consolidated == ["entry-0", "entry-1", "entry-2"]
    assert set(MemoryLinks(reloaded).records()) == stored_ids


def test_mechanical_mode_stores_the_entry_text_without_inference(make_ports):
    mechanical = make_ports([entry(1, FACTS[0])], wrap=FailingStore)
    result = result_of(run_sleep_consolidation(mechanical))
    assert mechanical.semantic.adds == [(FACTS[0], False)]
    assert result["completed"] is True and result["extracted"] == []


def scored(number, content, facts=None, importance=6, **fields):
    """An entry the LLM has scored; `facts` as the scoring call left them (None: none)."""
    item = entry(number, content, importance=importance, **fields)
    item["importance_method"] = "llm"
    if facts is not None:
        item.update(facts=list(facts), facts_method="llm")
    return item


def test_extracted_facts_are_stored_one_memory_each_without_inference(make_ports):
    llm = FakeLLM()  # no reply scripted: any call would fail the test
    entries = [scored(0, "Alice told me at dawn that she likes tea, and Bob lost his sword.",
                      facts=[FACTS[0], FACTS[2]], entity="Alice", tags=["drinks"]),
               scored(1, "I waved at the guard.", facts=[])]
    ports = make_ports(entries, wrap=FailingStore, llm=llm)
    result = result_of(run_sleep_consolidation(ports))

    assert llm.calls == []
    assert ports.semantic.adds == [(FACTS[0], False), (FACTS[2], False)]
    assert result["consolidated"] == ["entry-0", "entry-1"] and result["completed"] is True
    memories = result_of(ports.semantic.list(filters={"entry_id": "entry-0"}))
    assert sorted(m["memory"] for m in memories) == sorted([FACTS[0], FACTS[2]])
    for memory in memories:
        metadata = dict(memory["metadata"])
        # its place among the entry's facts: what a re-run after a crash checks
        assert [FACTS[0], FACTS[2]][metadata.pop("fact_index")] == memory["memory"]
        assert metadata == {
            "source": "journal", "entry_id": "entry-0", "tags": ["drinks"],
            "source_type": "observation", "source_trust": 0.8, "source_entity": "Alice",
            "importance": 6, "importance_method": "llm", "timestamp": "2025-01-01T12:00:00Z",
            "provenance": {"speaker_id": None, "speaker": "Alice", "channel": "seen",
                           "trust": 0.8, "derived_from": ["journal:entry-0"]},
        }
    links = MemoryLinks(ports)
    assert sorted(links.memory_ids_for_entry("entry-0")) == sorted(m["id"] for m in memories)
    # an entry whose facts are all self-referential or absent is done, with no memories
    assert MemoryLinks(ports).memory_ids_for_entry("entry-1") == []
    assert len(result_of(ports.semantic.list())) == 2


def test_entries_without_facts_get_them_in_one_batched_call(make_ports):
    entries = [scored(i, text) for i, text in enumerate(FACTS[:3])]
    entries[0]["importance_method"] = "manual"
    reply = ('{"entries": ['
             f'{{"id": "entry-0", "facts": ["{FACTS[0]}", "The assistant poured the tea."]}}, '
             f'{{"id": "entry-1", "facts": ["{FACTS[1]}"]}}, '
             f'{{"id": "entry-2", "facts": ["{FACTS[2]}"]}}]}}')
    llm = FakeLLM(reply)
    ports = make_ports(entries, wrap=FailingStore, llm=llm)
    result = result_of(run_sleep_consolidation(ports))

    assert len(llm.calls) == 1 and llm.calls[0]["purpose"] == "fact_extraction"
    prompt = llm.calls[0]["messages"][-1]["content"]
    # each entry quoted as data, under its id
    assert all(f"[entry-{i}]\n<<<BEGIN ENTRY entry-{i}>>>\n{FACTS[i]}\n<<<END ENTRY entry-{i}>>>"
               in prompt for i in range(3))
    assert "NEVER extract" in prompt  # ASSISTANT_FACT_EXTRACTION_PROMPT's rules
    assert result["extracted"] == ["entry-0", "entry-1", "entry-2"]
    assert ports.semantic.adds == [(FACTS[0], False), (FACTS[1], False), (FACTS[2], False)]
    stored = ports.state.get(documents.JOURNAL)["entries"][0]
    assert (stored["facts"], stored["facts_method"]) == ([FACTS[0]], "llm")  # persona filter
    assert result["consolidated"] == ["entry-0", "entry-1", "entry-2"]


@pytest.mark.parametrize("failure", [LLMError("endpoint down"), "I cannot do that."])
def test_a_failed_extraction_leaves_everything_pending_and_is_retried(make_ports, failure):
    entries = [scored(i, text) for i, text in enumerate(FACTS[:2])]
    entries.insert(0, scored(9, "Carol spoke.", facts=[FACTS[4]]))
    reply = ('{"entries": [' f'{{"id": "entry-0", "facts": ["{FACTS[0]}"]}}, '
             f'{{"id": "entry-1", "facts": ["{FACTS[1]}"]}}]}}')
    llm = FakeLLM(failure, reply)
    ports = make_ports(entries, wrap=FailingStore, llm=llm)

    failed = result_of(run_sleep_consolidation(ports))
    assert failed["success"] is False and failed["completed"] is False
    assert "fact extraction" in failed["error"]
    # the entry that has its facts is stored; the others wait, one attempt counted each
    assert [text for text, _ in ports.semantic.adds] == [FACTS[4]]
    assert failed["consolidated"] == ["entry-9"]
    assert ports.state.get(documents.JOURNAL)["consolidated_entry_ids"] == ["entry-9"]
    assert all("facts" not in e for e in ports.state.get(documents.JOURNAL)["entries"][1:])
    assert any("will retry" in line for line in ports.logs)
    assert extraction_attempts(ports) == {"entry-0": 1, "entry-1": 1}

    retried = result_of(run_sleep_consolidation(ports))
    assert len(llm.calls) == 2 and retried["completed"] is True
    assert retried["consolidated"] == ["entry-0", "entry-1"]
    assert extraction_attempts(ports) == {}
    assert sorted(m["memory"] for m in result_of(ports.semantic.list())) == sorted(
        [FACTS[4], FACTS[0], FACTS[1]])


def test_entries_the_extraction_reply_leaves_out_stay_pending(make_ports):
    entries = [scored(i, text) for i, text in enumerate(FACTS[:2])]
    llm = FakeLLM(f'{{"entries": [{{"id": "entry-1", "facts": ["{FACTS[1]}"]}}]}}',
                  f'{{"facts": ["{FACTS[0]}"]}}')
    ports = make_ports(entries, wrap=FailingStore, llm=llm)
    first = result_of(run_sleep_consolidation(ports))
    assert first["consolidated"] == ["entry-1"] and first["completed"] is False
    assert first["remaining"] == 1
    second = result_of(run_sleep_consolidation(ports))
    assert "[entry-0]" in llm.calls[1]["messages"][-1]["content"]
    assert "[entry-1]" not in llm.calls[1]["messages"][-1]["content"]
    assert second["consolidated"] == ["entry-0"] and second["completed"] is True


def test_an_entry_the_reply_always_leaves_out_is_stored_verbatim_after_the_limit(make_ports):
    entries = [scored(i, text) for i, text in enumerate(FACTS[:2])]
    only_one = f'{{"entries": [{{"id": "entry-1", "facts": ["{FACTS[1]}"]}}]}}'
    llm = FakeLLM(only_one, "no idea", "still no idea")
    ports = make_ports(entries, wrap=FailingStore, llm=llm,
                       overrides={"memory.extraction_max_attempts": 3})
    reports = [result_of(run_sleep_consolidation(ports)) for _ in range(3)]
    assert [r["completed"] for r in reports] == [False, False, True]
    assert reports[2]["verbatim"] == ["entry-0"]
    assert len(llm.calls) == 3  # one attempt per tick, three in all
    # nothing lost: the entry's own text, marked as stored word for word
    memories = result_of(ports.semantic.list(filters={"entry_id": "entry-0"}))
    assert [m["memory"] for m in memories] == [FACTS[0]]
    assert memories[0]["metadata"]["verbatim"] is True
    stored = {e["id"]: e for e in ports.state.get(documents.JOURNAL)["entries"]}
    assert stored["entry-0"]["consolidated_verbatim"] is True
    assert "consolidated_verbatim" not in stored["entry-1"]
    assert extraction_attempts(ports) == {}
    # done: the next sleep asks nothing more
    assert result_of(run_sleep_consolidation(ports))["completed"] is True
    assert len(llm.calls) == 3


def test_no_duplicates_after_a_failure_part_way_through_an_entrys_facts(make_ports):
    entries = [scored(0, "A long report.", facts=FACTS[:3]),
               scored(1, "Another report.", facts=FACTS[3:5])]
    ports = make_ports(entries, wrap=lambda store: FailingStore(store, fail_add_on={2}),
                       llm=FakeLLM())
    failed = result_of(run_sleep_consolidation(ports))
    assert failed["success"] is False and failed["consolidated"] == []
    assert ports.state.get(documents.JOURNAL)["consolidated_entry_ids"] == []
    assert [m["memory"] for m in result_of(ports.semantic.list())] == [FACTS[0]]

    retried = result_of(run_sleep_consolidation(ports))
    assert retried["consolidated"] == ["entry-0", "entry-1"] and retried["completed"] is True
    # the fact stored before the failure is found by entry_id and not stored again
    assert [text for text, _ in ports.semantic.adds[2:]] == FACTS[1:5]
    texts = sorted(m["memory"] for m in result_of(ports.semantic.list()))
    assert texts == sorted(FACTS[:5])
    assert len(MemoryLinks(ports).memory_ids_for_entry("entry-0")) == 3


def test_waits_for_llm_scoring_until_it_has_failed_too_often(make_ports):
    waiting = entry(0, FACTS[0], importance=2)  # heuristic, below min_importance for now
    ready = scored(1, FACTS[1], facts=[FACTS[1]])
    llm = FakeLLM(f'{{"entries": [{{"id": "entry-0", "facts": ["{FACTS[0]}"]}}]}}')
    ports = make_ports([waiting, ready], wrap=FailingStore, llm=llm,
                       overrides={"journal.scoring_max_attempts": 2})
    result = result_of(run_sleep_consolidation(ports))
    assert result["consolidated"] == ["entry-1"]
    assert result["waiting_for_scoring"] == 1 and result["completed"] is False

    # scoring failed twice for it: consolidation stops waiting and extracts its facts itself
    ports.state.set(documents.IMPORTANCE_SCORING, {"attempts": {"entry-0": 2}})
    ports.state.get(documents.JOURNAL)["entries"][0]["importance"] = 5
    result = result_of(run_sleep_consolidation(ports))
    assert result["consolidated"] == ["entry-0"] and result["completed"] is True
    memory = result_of(ports.semantic.list(filters={"entry_id": "entry-0"}))[0]
    assert memory["metadata"]["importance_method"] == "heuristic"


def test_the_compacting_phase_lasts_until_every_entry_was_llm_scored(make_ports):
    from ai_assistant.sleep.cycle import run_sleep_tick

    class ScoringLLM:
        """Scores every asked entry 7 and gives one fact each (no other calls expected)."""

        def __init__(self):
            self.purposes = []

        def complete(self, messages, *, tools=None, purpose="chat", **params):
            self.purposes.append(purpose)
            ids = re.findall(r"^\[(\d+)\]", messages[-1]["content"], flags=re.M)
            items = [{"id": int(i), "score": 7, "facts": [f"Fact number {i} is true."]}
                     for i in ids]
            return defer.succeed(LLMReply(content=json.dumps({"scores": items})))

    llm = ScoringLLM()
    ports = make_ports(llm=llm, overrides={"journal.scoring_max_per_tick": 1,
                                           "memory.consolidation_per_tick": 5})
    for number in range(3):
        Journal(ports).add(f"Note {number} about the harbour.", source_type="inference")
    ports.state.set(documents.SLEEP_PHASE, "compacting")
    phases = []
    for _ in range(3):
        result_of(run_sleep_tick(ports, lambda target, reason: None))
        phases.append(ports.state.get(documents.SLEEP_PHASE))
    assert phases == ["compacting", "compacting", "dreaming"]
    assert llm.purposes == ["importance"] * 3  # facts came with the scores: no other call
    memories = result_of(ports.semantic.list())
    assert sorted(m["memory"] for m in memories) == [
        f"Fact number {i} is true." for i in (1, 2, 3)]
    assert all(m["metadata"]["importance_method"] == "llm" for m in memories)
    assert all(m["metadata"]["importance"] == 7 for m in memories)


def test_no_semantic_store_means_nothing_to_do():
    ports = support_ports(key="ada")
    assert result_of(run_sleep_consolidation(ports))["completed"] is True
    assert result_of(retrieve_relevant_memories(ports, "anything")) == []


def seed_memories(ports):
    store = ports.semantic
    result_of(store.add("Alice prefers tea over coffee.",
                        metadata={"source_trust": 0.9, "source_entity": "Alice",
                                  "tags": ["drinks"]}))
    result_of(store.add("Alice secretly hates tea, says the gossip.",
                        metadata={"source_trust": 0.3}))
    result_of(store.add("The bridge to the east collapsed during the storm.",
                        metadata={"source_trust": 0.8}))


def test_two_stage_retrieval_filters_relevance_then_trust(make_ports):
    ports = make_ports()
    seed_memories(ports)

    hits = result_of(retrieve_relevant_memories(ports, "Does Alice like tea?"))
    assert [hit["memory"] for hit in hits] == ["Alice prefers tea over coffee."]
    threshold = Memories(ports).threshold("relevance_threshold")
    assert hits[0]["trust"] == 0.9 and hits[0]["score"] > threshold

    trusting = result_of(retrieve_relevant_memories(ports, "Does Alice like tea?",
                                                    min_source_trust=0.0))
    assert len(trusting) == 2  # the gossip is relevant, only its trust kept it out
    assert result_of(retrieve_relevant_memories(ports, "How do dragons fly?")) == []

    from_events = result_of(retrieve_relevant_memories(
        ports, events=[{"content": "A traveller asks about the eastern bridge."}]))
    assert [hit["memory"] for hit in from_events] == [
        "The bridge to the east collapsed during the storm."]


def test_calibrated_threshold_replaces_only_the_specified_default(make_ports):
    ports = make_ports()
    assert Memories(ports).threshold("relevance_threshold") == 0.3
    assert Memories(ports).threshold("link_similarity") == 0.5
    strict = make_ports(overrides={"memory.relevance_threshold": 0.95})
    seed_memories(strict)
    assert Memories(strict).threshold("relevance_threshold") == 0.95
    assert result_of(retrieve_relevant_memories(strict, "Does Alice like tea?")) == []


def test_memory_context_block_and_its_failure(make_ports):
    ports = make_ports()
    seed_memories(ports)
    block = result_of(memory_context_block(ports, "Does Alice like tea?"))
    assert block.splitlines()[0] == "## Relevant memories"
    assert "- Alice prefers tea over coffee. (relevance " in block
    assert "trust 0.90, from Alice)" in block

    class Broken:
        def search(self, *args, **kwargs):
            return defer.fail(ConnectionError("store down"))

    ports.semantic = Broken()
    assert result_of(memory_context_block(ports, "Does Alice like tea?")) == ""
    assert any("store down" in line for line in ports.logs)


def test_format_memory_results_for_the_admin_command(make_ports):
    ports = make_ports()
    seed_memories(ports)
    hits = result_of(retrieve_relevant_memories(ports, "Does Alice like tea?"))
    text = format_memory_results("Does Alice like tea?", hits)
    lines = text.splitlines()
    assert lines[0] == "Memories for 'Does Alice like tea?' (1):"
    assert lines[1].startswith(" 1. score 0.")
    assert "trust 0.90 from Alice | Alice prefers tea over coffee. [drinks]" in lines[1]
    assert format_memory_results("dragons", []) == "No memories match 'dragons'."


@pytest.mark.parametrize("failures, limit", [(1, 3), (3, 3)])
def test_an_unavailable_llm_does_not_keep_the_assistant_asleep(make_ports, failures, limit):
    from ai_assistant.plumbing.ports import LLMUnavailable

    entries = [scored(i, text) for i, text in enumerate(FACTS[:2])]
    # breaker open: store verbatim at once; a plain error: only after `limit` failed calls
    error = LLMUnavailable("circuit breaker open") if failures == 1 else LLMError("boom")
    llm = FakeLLM(*([error] * failures))
    ports = make_ports(entries, wrap=FailingStore, llm=llm)
    for _ in range(failures - 1):
        assert result_of(run_sleep_consolidation(ports))["completed"] is False
    result = result_of(run_sleep_consolidation(ports))
    assert result["completed"] is True and result["verbatim"] == ["entry-0", "entry-1"]
    assert sorted(text for text, _ in ports.semantic.adds) == sorted(FACTS[:2])
    assert any("storing 2 entries verbatim" in line for line in ports.logs)
