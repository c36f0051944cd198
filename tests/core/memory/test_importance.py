"""Importance: the heuristic arithmetic, batched LLM scoring, the reflection state."""

import pytest
from support import FakeLLM, result_of
from support import make_ports as support_ports

from ai_assistant.memory.importance import score_importance_heuristic
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.reflection_state import ReflectionState
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import LLMError
from ai_assistant.sleep import facts, scoring
from ai_assistant.sleep.scoring import parse_scores


def make_ports(llm=None, overrides=None):
    ports = support_ports(key="ada", llm=llm, overrides=overrides)
    return ports, ports.log


# ----------------------------------------------------------------------------------------------
# Tier 1: the specification's heuristic


@pytest.mark.parametrize(
    "content, source_type, expected",
    [
        # 5 base +2 direct +2 "player" = 9
        ("Player Alice prefers formal address and dislikes jokes", "direct", 9),
        # 5 -1 environmental -1 "walked" = 3
        ("Bob walked into the tavern", "environmental", 3),
        # substring matches, as in the specification: "quest" in "question", "war" in "reward" -> +4
        ("A question about the reward", "observation", 10),
        # five keywords would be +10, capped at +4: 5 + 0 + 4 = 9
        ("urgent danger: attack, war and betrayal", "inference", 9),
        # 5 -1 -5 low keywords = -1, clamped to 1
        ("routine: walked, moved, entered the ordinary room", "environmental", 1),
        # 5 + 0 inference +1 (> 200 chars) +1 ("!") = 7
        ("x" * 201 + "!", "inference", 7),
        # exactly 200 chars gets no length bonus; "?" gives +1: 5 + 1 + 1 = 7
        ("y" * 199 + "?", "observation", 7),
        # unknown source types get no modifier: 5
        ("a plain remark", "rumour", 5),
    ],
)
def test_heuristic_worked_examples(content, source_type, expected):
    assert score_importance_heuristic(content, source_type, []) == expected


def test_heuristic_is_case_insensitive_for_keywords():
    assert score_importance_heuristic("A SECRET was REVEALED", "inference") == 9


# ----------------------------------------------------------------------------------------------
# Parsing LLM scores


def test_parse_scores_json_object():
    text = '```json\n{"scores": [{"id": 3, "score": 7}, {"id": "4", "score": "9"}]}\n```'
    assert parse_scores(text, [3, 4]) == {3: 7, 4: 9}


def test_parse_scores_clamps_and_ignores_unasked_ids():
    text = '[{"id": 1, "score": 0}, {"id": 2, "score": 15}, {"id": 99, "score": 5}]'
    assert parse_scores(text, [1, 2]) == {1: 1, 2: 10}


def test_parse_scores_id_to_score_mapping():
    assert parse_scores('{"5": 6, "6": 2.6}', [5, 6]) == {5: 6, 6: 3}


def test_parse_scores_lines():
    text = "Here you go:\n3: 7\n#4 - 2\n[5] 10\nid 6: score 8"
    assert parse_scores(text, [3, 4, 5, 6]) == {3: 7, 4: 2, 5: 10, 6: 8}


def test_parse_scores_bare_number_only_for_a_single_entry():
    assert parse_scores("7", [12]) == {12: 7}
    assert parse_scores("7", [12, 13]) == {}


def test_parse_scores_garbage():
    assert parse_scores("I cannot rate these events.", [1, 2]) == {}
    assert parse_scores("", [1]) == {}


# ----------------------------------------------------------------------------------------------
# Tier 2: score_pending_entries


def _fill(ports, count=5):
    return [Journal(ports).add(f"event number {i}", source_type="inference")
            for i in range(count)]  # fmt: skip


def test_scores_one_batch_of_the_oldest_heuristic_entries_per_tick():
    llm = FakeLLM(
        '{"scores": [{"id": 1, "score": 2}, {"id": 2, "score": 9}, {"id": 3, "score": 4}]}'
    )
    ports, _ = make_ports(llm)
    _fill(ports)
    report = result_of(scoring.score_pending_entries(ports))
    assert len(llm.calls) == 1
    assert llm.calls[0]["purpose"] == "importance"
    assert report["scored"] == [1, 2, 3]
    assert report["remaining"] == 2
    entries = Journal(ports).entries()
    assert [(e["importance"], e["importance_method"]) for e in entries] == [
        (2, "llm"), (9, "llm"), (4, "llm"), (5, "heuristic"), (5, "heuristic"),
    ]  # fmt: skip


def test_the_per_tick_cap_is_a_setting_bounded_by_the_batch_size():
    ports, _ = make_ports(
        FakeLLM("1: 3\n2: 3\n3: 3\n4: 3"),
        {"journal.scoring_max_per_tick": 10, "journal.scoring_batch_size": 4},
    )
    _fill(ports)
    report = result_of(scoring.score_pending_entries(ports))
    assert report["scored"] == [1, 2, 3, 4]
    assert report["remaining"] == 1


def test_manual_and_llm_entries_are_never_rescored():
    llm = FakeLLM('{"scores": [{"id": 2, "score": 1}]}')
    ports, _ = make_ports(llm)
    Journal(ports).add("set by hand", importance=6)
    Journal(ports).add("pending", source_type="inference")
    report = result_of(scoring.score_pending_entries(ports))
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "set by hand" not in prompt and "[2]\n<<<BEGIN EVENT 2>>>\npending\n" in prompt
    assert report["scored"] == [2]
    assert Journal(ports).entry(1)["importance"] == 6


def test_a_failed_call_keeps_heuristic_scores_and_is_retried_next_tick():
    llm = FakeLLM(LLMError("endpoint down"), '{"scores": [{"id": 1, "score": 8}]}')
    ports, logs = make_ports(llm, {"journal.scoring_max_per_tick": 1})
    _fill(ports, 1)
    report = result_of(scoring.score_pending_entries(ports))
    assert "endpoint down" in report["error"]
    assert report["unscored"] == [1]
    assert Journal(ports).entry(1)["importance_method"] == "heuristic"
    assert any("retry" in line for line in logs)
    report = result_of(scoring.score_pending_entries(ports))
    assert report["scored"] == [1]
    assert Journal(ports).entry(1)["importance"] == 8


def test_a_garbled_reply_changes_nothing():
    ports, _ = make_ports(FakeLLM("these are all very interesting events"))
    _fill(ports, 2)
    before = [dict(e) for e in Journal(ports).entries()]
    report = result_of(scoring.score_pending_entries(ports))
    assert report["scored"] == [] and report["error"]
    assert Journal(ports).entries() == before


def test_entries_deleted_while_the_llm_thinks_are_skipped():
    def delete_first(_calls):
        Journal(ports).remove(1)

    llm = FakeLLM("1: 9\n2: 9", on_call=delete_first)
    ports, _ = make_ports(llm)
    _fill(ports, 2)
    report = result_of(scoring.score_pending_entries(ports))
    assert report["skipped"] == [1]
    assert report["scored"] == [2]
    assert [e["id"] for e in Journal(ports).entries()] == [2]


def test_llm_scores_adjust_the_reflection_total():
    ports, _ = make_ports(FakeLLM("1: 9"))
    _fill(ports, 1)  # heuristic 5
    assert ReflectionState(ports).current()["cumulative_importance"] == 5
    result_of(scoring.score_pending_entries(ports))
    assert ReflectionState(ports).current()["cumulative_importance"] == 9


def test_mechanical_mode_skips_with_one_log_line():
    ports, logs = make_ports(None)
    _fill(ports, 2)
    report = result_of(scoring.score_pending_entries(ports))
    assert report["mechanical"] is True and report["scored"] == []
    assert report["remaining"] == 2
    assert len(logs) == 1 and "mechanical" in logs[0]


# ----------------------------------------------------------------------------------------------
# Reflection state


def test_every_entry_updates_the_reflection_state():
    ports, _ = make_ports()
    Journal(ports).add("one", importance=4)
    Journal(ports).add("two", importance=7)
    state = ports.state.get(documents.REFLECTION_STATE)
    assert state["cumulative_importance"] == 11.0
    assert state["entries_since_reflection"] == [1, 2]
    assert state["threshold"] == 150
    assert state["reflection_count"] == 0


def test_trigger_fires_at_the_threshold_from_settings():
    ports, _ = make_ports(overrides={"reflection.threshold": 20})
    Journal(ports).add("a", importance=10)
    Journal(ports).add("b", importance=9)
    assert not ReflectionState(ports).due()
    Journal(ports).add("c", importance=1)
    assert ReflectionState(ports).due()


def test_reset_keeps_threshold_counts_and_records_time():
    ports, _ = make_ports(overrides={"reflection.threshold": 30})
    Journal(ports).add("a", importance=10)
    state = ReflectionState(ports).reset()
    assert state == {
        "cumulative_importance": 0.0,
        "threshold": 30,
        "last_reflection_time": "2025-01-01T12:00:00Z",
        "reflection_count": 1,
        "entries_since_reflection": [],
    }


def test_reset_keeps_entries_written_after_the_reflection_started():
    ports, _ = make_ports()
    Journal(ports).add("a", importance=10)
    covered = list(ReflectionState(ports).current()["entries_since_reflection"])
    Journal(ports).add("b", importance=4)
    state = ReflectionState(ports).reset(covered, 10.0)
    assert state["entries_since_reflection"] == [2]
    assert state["cumulative_importance"] == 4.0


# ----------------------------------------------------------------------------------------------
# Facts extracted by the scoring call


def test_parse_scores_accepts_items_with_facts_and_nested_mappings():
    text = '{"scores": [{"id": 1, "score": 7, "facts": ["Alice owns a boat."]}]}'
    assert parse_scores(text, [1]) == {1: 7}
    assert parse_scores('{"3": {"score": 4, "facts": []}}', [3]) == {3: 4}
    assert parse_scores('{"id": 5, "score": 8}', [5]) == {5: 8}
    assert parse_scores('{"scores": [{"id": "entry-2", "score": 6}]}', ["entry-2"]) == {
        "entry-2": 6}


def test_parse_facts_tells_no_facts_from_not_answered():
    text = ('{"scores": [{"id": 1, "score": 7, "facts": ["Alice owns a boat."]}, '
            '{"id": 2, "score": 3, "facts": []}, {"id": 3, "score": 5}]}')
    assert facts.parse_facts(text, [1, 2, 3]) == {1: ["Alice owns a boat."], 2: []}
    assert facts.parse_facts('{"entries": [{"id": 4, "facts": "Bob is tall."}]}', [4]) == {
        4: ["Bob is tall."]}
    assert facts.parse_facts('{"7": {"facts": ["The well is dry."]}}', [7]) == {
        7: ["The well is dry."]}
    # mem0's own shape names no entry: only usable for a one-entry question
    assert facts.parse_facts('{"facts": ["The well is dry."]}', [9]) == {
        9: ["The well is dry."]}
    assert facts.parse_facts('{"facts": ["The well is dry."]}', [9, 10]) == {}
    assert facts.parse_facts("1: 7\n2: 3", [1, 2]) == {}
    assert facts.parse_facts("no idea", [1]) == {}


def test_clean_facts_tidies_dedupes_caps_and_drops_self_reference():
    kept, rejected = facts.clean_facts(
        ["  Alice   prefers tea. ", "alice prefers tea.", "", 42, {"fact": "Bob is tall."},
         "I helped Alice find the key.", "The assistant was polite.", "x" * 900, "Carol sings."],
        max_facts=3,
    )
    assert kept == ["Alice prefers tea.", "Bob is tall.", "x" * facts.FACT_MAX_CHARS]
    assert rejected == ["I helped Alice find the key.", "The assistant was polite."]


def test_scoring_call_keeps_persona_filtered_facts_on_the_entries():
    llm = FakeLLM(
        '{"scores": [{"id": 1, "score": 8, "facts": ["Alice prefers formal address.", '
        '"The assistant greeted Alice."]}, {"id": 2, "score": 2, "facts": []}]}'
    )
    ports, logs = make_ports(llm)
    Journal(ports).add("Alice asked to be addressed formally.", source_type="direct")
    Journal(ports).add("I greeted Alice.", source_type="observation")
    report = result_of(scoring.score_pending_entries(ports))

    assert len(llm.calls) == 1  # scores and facts in the same call
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "Rate the significance" in prompt and '"facts"' in prompt
    assert "NEVER extract" in prompt  # ASSISTANT_FACT_EXTRACTION_PROMPT's rules
    assert report["scored"] == [1, 2] and report["with_facts"] == [1, 2]
    assert report["facts_rejected"] == 1
    first, second = Journal(ports).entry(1), Journal(ports).entry(2)
    assert (first["facts"], first["facts_method"]) == (["Alice prefers formal address."], "llm")
    assert (second["facts"], second["facts_method"]) == ([], "llm")
    assert (first["importance"], first["importance_method"]) == (8, "llm")
    assert any("self-referential" in line for line in logs)


def test_a_reply_with_scores_but_no_facts_still_scores():
    ports, _ = make_ports(FakeLLM('{"scores": [{"id": 1, "score": 6}]}'))
    _fill(ports, 1)
    report = result_of(scoring.score_pending_entries(ports))
    entry = Journal(ports).entry(1)
    assert report["scored"] == [1] and report["with_facts"] == []
    assert entry["importance_method"] == "llm"
    assert "facts" not in entry and facts.extracted_facts(entry) is None


def test_facts_are_only_asked_for_unconsolidated_entries_the_llm_sees_whole():
    llm = FakeLLM('{"scores": [{"id": 1, "score": 5, "facts": ["A."]}, '
                  '{"id": 2, "score": 5, "facts": ["B."]}, '
                  '{"id": 3, "score": 5, "facts": ["C."]}]}')
    ports, _ = make_ports(llm)
    _fill(ports, 2)
    Journal(ports).add("long " * 300, source_type="inference")
    Journal(ports).mark_consolidated([1])
    report = result_of(scoring.score_pending_entries(ports))
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "[1] (score only)\n<<<BEGIN EVENT 1>>>\nevent number 0" in prompt
    assert "[2]\n<<<BEGIN EVENT 2>>>\nevent number 1" in prompt
    assert "[3] (score only)\n<<<BEGIN EVENT 3>>>\nlong" in prompt
    # facts the reply gave anyway for score-only entries are not kept
    assert report["with_facts"] == [2]
    assert "facts" not in Journal(ports).entry(1)
    assert "facts" not in Journal(ports).entry(3)
    assert report["scored"] == [1, 2, 3]


def test_failed_attempts_are_counted_and_bound_the_wait_for_a_score():
    llm = FakeLLM(LLMError("down"), "garbage", '{"scores": [{"id": 2, "score": 7}]}')
    ports, _ = make_ports(llm, {"journal.scoring_max_attempts": 3})
    first, second = _fill(ports, 2)
    assert scoring.awaiting_llm_score(ports, first)
    result_of(scoring.score_pending_entries(ports))
    assert scoring.get_scoring_attempts(ports) == {1: 1, 2: 1}
    assert scoring.awaiting_llm_score(ports, Journal(ports).entry(1))
    result_of(scoring.score_pending_entries(ports))
    assert scoring.get_scoring_attempts(ports) == {1: 2, 2: 2}
    # entry 2 is scored (its count is forgotten), entry 1 was left out a third time
    report = result_of(scoring.score_pending_entries(ports))
    assert report["scored"] == [2] and report["unscored"] == [1]
    assert scoring.get_scoring_attempts(ports) == {1: 3}
    assert not scoring.awaiting_llm_score(ports, Journal(ports).entry(1))
    assert not scoring.awaiting_llm_score(ports, Journal(ports).entry(2))  # now "llm"
    # entry 1 is out of attempts: never asked again (else the oldest entries would fill every
    # batch, the ones behind them would never be asked, and a sleep would wait for good)
    report = result_of(scoring.score_pending_entries(ports))
    assert len(llm.calls) == 3 and report["remaining"] == 0 and report["unscored"] == []


def test_nothing_awaits_a_score_without_an_llm_or_with_scoring_turned_off():
    ports, _ = make_ports(None)
    entry = _fill(ports, 1)[0]
    assert not scoring.awaiting_llm_score(ports, entry)
    off, _ = make_ports(FakeLLM(), {"journal.scoring_max_per_tick": 0})
    assert not scoring.awaiting_llm_score(off, _fill(off, 1)[0])
