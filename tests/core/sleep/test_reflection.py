"""Generative reflection: questions, evidence, insights, persona filter, reset, failures."""

import json

from support import FakeLLM, result_of
from support import make_ports as support_ports
from twisted.internet import defer

from ai_assistant.memory import journal
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.reflection_state import ReflectionState
from ai_assistant.plumbing.ports import LLMError
from ai_assistant.sleep import reflection

QUESTIONS = json.dumps(
    {"questions": ["How does Alice treat strangers?", "What threatens the town?"]}
)


class FakeSemantic:
    def __init__(self, hits=None, error=None):
        self.hits = hits or []
        self.error = error
        self.searches = []

    def search(self, query, *, limit=10, filters=None):
        self.searches.append((query, limit))
        if self.error:
            return defer.fail(self.error)
        return defer.succeed(self.hits)


def make_ports(llm=None, semantic=None):
    ports = support_ports(key="ada", llm=llm, semantic=semantic)
    return ports, ports.log


def seed_journal(ports):
    Journal(ports).add("Alice greeted the strangers warmly at the gate", importance=6)
    Journal(ports).add("Wolves attacked the town's sheep at night", importance=8)
    Journal(ports).add("Alice shared bread with a stranger", importance=5)


def insights_reply(*items):
    return json.dumps({"insights": [{"insight": text, "evidence": ev} for text, ev in items]})


def test_a_full_reflection_stores_a_synthesis_and_resets_the_state():
    llm = FakeLLM(
        QUESTIONS,
        insights_reply(
            ("Alice is generous to strangers", [1, 2]),
            ("I should be more patient with players", [1]),
        ),
    )
    ports, _ = make_ports(llm)
    seed_journal(ports)
    ports.clock.advance(hours=3)
    report = result_of(reflection.run_reflection(ports))

    assert report["ran"] is True
    assert report["questions"] == ["How does Alice treat strangers?", "What threatens the town?"]
    assert report["insights"] == ["Alice is generous to strangers"]
    assert report["rejected"] == ["I should be more patient with players"]
    assert [c["purpose"] for c in llm.calls] == ["reflection_questions", "reflection_insights"]
    assert "Wolves attacked" in llm.calls[0]["messages"][-1]["content"]

    entry = Journal(ports).entry(report["entry_id"])
    assert entry["content"].startswith("[SYNTHESIS] Alice is generous to strangers (evidence: #")
    assert "patient" not in entry["content"]
    assert entry["importance"] == 8 and entry["importance_method"] == "manual"
    assert entry["tags"] == ["synthesis", "meta_learning"]
    # evidence numbers in the prompt were mapped back to journal ids
    assert set(entry["evidence"]) <= {1, 2, 3} and entry["evidence"]

    state = ReflectionState(ports).current()
    assert state["cumulative_importance"] == 0.0
    assert state["entries_since_reflection"] == []
    assert state["reflection_count"] == 1
    assert state["threshold"] == 150
    assert state["last_reflection_time"] == "2025-01-01T15:00:00Z"
    assert journal.get_journal(ports)["last_reflection"] == "2025-01-01T15:00:00Z"


def test_evidence_comes_from_the_semantic_tier_when_present():
    semantic = FakeSemantic(
        [{"id": "m1", "memory": "Alice runs the bakery", "score": 0.83, "metadata": {}}]
    )
    llm = FakeLLM(QUESTIONS, insights_reply(("Alice feeds the town", [1])))
    ports, _ = make_ports(llm, semantic)
    seed_journal(ports)
    report = result_of(reflection.run_reflection(ports))
    assert semantic.searches == [
        ("How does Alice treat strangers?", 10),
        ("What threatens the town?", 10),
    ]
    assert "1. Alice runs the bakery" in llm.calls[1]["messages"][-1]["content"]
    assert Journal(ports).entry(report["entry_id"])["evidence"] == ["mem:m1"]


def test_gather_evidence_normalises_and_falls_back_to_the_journal():
    ports, logs = make_ports(semantic=FakeSemantic(error=RuntimeError("store offline")))
    seed_journal(ports)
    evidence = result_of(reflection.gather_evidence(ports, "What did the wolves attack?"))
    assert evidence[0]["id"] == 2
    # with where it came from, so a synthesis is sourced to its evidence's speakers
    assert set(evidence[0]) <= {"id", "content", "score", "source_entity", "source_trust",
                                "provenance"}
    assert {"id", "content", "score"} <= set(evidence[0])
    assert any("store offline" in line for line in logs)


def _assert_untouched(ports):
    state = ReflectionState(ports).current()
    assert state["cumulative_importance"] == 19.0
    assert state["reflection_count"] == 0
    assert len(Journal(ports).entries()) == 3
    assert journal.get_journal(ports)["last_reflection"] is None


def test_a_failed_question_call_resets_nothing():
    ports, logs = make_ports(FakeLLM(LLMError("timeout")))
    seed_journal(ports)
    report = result_of(reflection.run_reflection(ports))
    assert report["ran"] is False and "timeout" in report["reason"]
    _assert_untouched(ports)


def test_a_failed_insight_call_resets_nothing_and_a_retry_works():
    llm = FakeLLM(QUESTIONS, LLMError("boom"), QUESTIONS, insights_reply(("Wolves hunt", [2])))
    ports, _ = make_ports(llm)
    seed_journal(ports)
    assert result_of(reflection.run_reflection(ports))["ran"] is False
    _assert_untouched(ports)
    assert result_of(reflection.run_reflection(ports))["ran"] is True
    assert ReflectionState(ports).current()["reflection_count"] == 1


def test_garbled_replies_reset_nothing():
    ports, _ = make_ports(FakeLLM("I am not sure what to ask."))
    seed_journal(ports)
    assert result_of(reflection.run_reflection(ports))["ran"] is False
    ports.llm = FakeLLM(QUESTIONS, "no idea at all")
    assert result_of(reflection.run_reflection(ports))["ran"] is False
    _assert_untouched(ports)


def test_only_self_referential_insights_store_nothing_but_complete():
    llm = FakeLLM(QUESTIONS, insights_reply(("I need to rest more", [1])))
    ports, _ = make_ports(llm)
    seed_journal(ports)
    report = result_of(reflection.run_reflection(ports))
    assert report["ran"] is True and report["entry_id"] is None
    assert len(Journal(ports).entries()) == 3
    assert ReflectionState(ports).current()["reflection_count"] == 1


def test_entries_written_during_reflection_count_toward_the_next():
    def write_meanwhile(call_number):
        if call_number == 2:
            Journal(ports).add("A dragon landed on the hill", importance=9)

    llm = FakeLLM(QUESTIONS, insights_reply(("Alice is kind", [1])), on_call=write_meanwhile)
    ports, _ = make_ports(llm)
    seed_journal(ports)
    result_of(reflection.run_reflection(ports))
    state = ReflectionState(ports).current()
    assert state["entries_since_reflection"] == [4]
    assert state["cumulative_importance"] == 9.0


def test_mechanical_mode_skips_with_a_log_line():
    ports, logs = make_ports()
    seed_journal(ports)
    report = result_of(reflection.run_reflection(ports))
    assert report["ran"] is False and report["reason"] == "mechanical mode"
    assert len(logs) == 1 and "mechanical" in logs[0]
    _assert_untouched(ports)


def test_an_empty_journal_makes_no_llm_call():
    llm = FakeLLM()
    ports, _ = make_ports(llm)
    assert result_of(reflection.run_reflection(ports))["ran"] is False
    assert llm.calls == []


def test_parsers_accept_plain_lists():
    assert reflection.parse_questions("1. Who is Alice?\n2) Why wolves?\nnot a question", 3) == [
        "Who is Alice?",
        "Why wolves?",
    ]
    assert reflection.parse_insights("- Alice trusts Bob (because of 1, 5)\n- Wolves roam") == [
        {"insight": "Alice trusts Bob", "evidence": [1, 5]},
        {"insight": "Wolves roam", "evidence": []},
    ]


def test_check_reflection_trigger_is_exported():
    ports, _ = make_ports()
    for _ in range(15):
        Journal(ports).add("big news", importance=10)
    assert ReflectionState(ports).due()
