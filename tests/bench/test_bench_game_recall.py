"""
The game-recall bench at smoke size: one tiny conversation in LoCoMo's format, two sessions,
a few questions, through the real shell (in its own process: it boots its own Django).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.game_recall import (
    Evidence,
    combine,
    normalise,
    shares,
    summarise,
    text_key,
)
from bench.locomo import conversation_range

ROOT = Path(__file__).resolve().parents[2]

SESSION_1 = [
    ("Nadia", "Hi Ada! I spent the whole weekend repainting the boathouse by the lake."),
    ("Tomas", "Nice. I finally adopted a grey kitten from the shelter, her name is Pebble."),
    ("Nadia", "Pebble is a lovely name for a kitten."),
]
SESSION_2 = [
    ("Tomas", "Good morning! How are things going?"),
    ("Nadia", "My sister Ilse is moving to Lisbon next spring to teach chemistry."),
    ("Tomas", "Lisbon is beautiful, she will love the trams and the pastries there."),
]


def tiny_conversation():
    """One conversation in LoCoMo's format: two sessions, questions of categories 1-4 and 5."""
    def session(number, lines):
        return [{"speaker": speaker, "dia_id": f"D{number}:{i + 1}", "text": text}
                for i, (speaker, text) in enumerate(lines)]

    return [{
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Nadia", "speaker_b": "Tomas",
            "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": session(1, SESSION_1),
            "session_2_date_time": "10:15 am on 20 May, 2023",
            "session_2": session(2, SESSION_2),
        },
        "qa": [
            {"question": "Where is Nadia's sister Ilse moving to?", "answer": "Lisbon",
             "evidence": ["D2:2"], "category": 4},
            {"question": "What is the name of the kitten Tomas adopted?", "answer": "Pebble",
             "evidence": ["D1:2"], "category": 4},
            {"question": "When did Nadia repaint the boathouse?", "answer": "May 2023",
             "evidence": ["D1:1"], "category": 2},
            {"question": "Did Tomas adopt a dog?", "adversarial_answer": "no",
             "evidence": ["D1:2"], "category": 5},
        ],
    }]  # fmt: skip


def test_text_key_is_a_normalised_prefix_of_whole_words():
    assert normalise("  Hello,   WORLD!\n  'quoted'  ") == "hello world quoted"
    key = text_key("I went to the LGBTQ support group yesterday, and it was so powerful. " * 3)
    assert key == "i went to the lgbtq support group yesterday and it was so"
    assert len(key) <= 60


def test_evidence_is_recognised_by_text_by_memory_and_by_tool_ids():
    sessions = [(None, [("Nadia", "I repainted the boathouse by the lake.", "D1:1"),
                        ("Tomas", "A grey kitten called Pebble.", "D1:2")])]
    entry_dia = {"e1": "D1:1", "e2": "D1:2"}
    memories = {"m2": ("e2", 'Tomas said to me: "A grey kitten called Pebble."')}
    evidence = Evidence(sessions, entry_dia, memories, journal_ids=["e1"])
    prompt = normalise('## Memories\n- [8 May 2023] Nadia said to me: "I repainted the '
                       'boathouse by the lake."')
    assert evidence.in_text("D1:1", prompt) == "text"
    assert evidence.in_text("D1:2", prompt) is None
    assert evidence.where("D1:1") == "journal"
    assert evidence.where("D1:2") == "mem0"
    assert evidence.where("D9:9") == "not_a_turn"
    # a tool result: an entry by id, a memory by its id, nothing else
    assert evidence.in_tool_result({"results": [{"id": "e1", "content": "..."}]}) == {"D1:1"}
    assert evidence.in_tool_result({"memories": [{"id": "m2", "memory": "x"}]}) == {"D1:2"}
    assert evidence.in_tool_result({"results": [], "text": "nothing here"}) == set()
    # only the top 10 of a list count
    far = [{"id": "x"}] * 10 + [{"id": "e1"}]
    assert evidence.in_tool_result({"results": far}) == set()


def test_strict_match_wants_the_whole_turn_or_the_whole_memory_made_from_it():
    long_turn = ("I finally finished restoring the old sailing dinghy my grandfather built, "
                 "new ribs, new varnish and a mast cut from a larch that fell last winter.")
    sessions = [(None, [("Nadia", long_turn, "D1:1"),
                        ("Tomas", "I adopted a grey kitten called Pebble last week.", "D1:2")])]
    memories = {"m2": (["e2"], "Tomas adopted a grey kitten called Pebble"),
                "m3": (None, "a memory made from nothing the bench knows")}
    evidence = Evidence(sessions, {"e1": "D1:1", "e2": "D1:2"}, memories, journal_ids=["e1"])
    cut = normalise(f"- Nadia said to me: \"{long_turn[:100]}...\"")
    # the headline counts a line cut short; the strict measure does not
    assert evidence.in_text("D1:1", cut) == "text"
    assert evidence.in_text_strict("D1:1", cut) is None
    assert evidence.in_text_strict("D1:1", normalise(f"said: {long_turn}")) == "text"
    # a paraphrased memory of the turn counts when its whole text is there
    prompt = normalise("- [8 May 2023] Tomas adopted a grey kitten called Pebble.")
    assert evidence.in_text("D1:2", prompt) == "memory"
    assert evidence.in_text_strict("D1:2", prompt) == "memory"
    assert evidence.in_text_strict("D1:2", normalise("Tomas adopted a grey kitten")) is None
    assert evidence.never_stored(["D1:1", "D1:2"]) == []
    assert Evidence(sessions, {"e1": "D1:1"}, {}, []).never_stored(["D1:1", "D1:2"]) == [
        "D1:1", "D1:2"]


def test_the_replay_puts_its_block_in_place_of_the_saved_one_key_and_all():
    from bench.recall_replay import with_block

    saved = {"messages": [{"role": "user", "content": (
        "## What you remember\n(A name alone heads what that person said to me.)\n"
        "<<<BEGIN MEMORIES>>>\n[8 May 2023] Nadia: \"I repainted the boat.\"\n"
        "<<<END MEMORIES>>>\n\n## Your turn\nAct.")}]}  # fmt: skip
    block = "<<<BEGIN MEMORIES>>>\n[9 May 2023]\n- The harbour froze.\n<<<END MEMORIES>>>"
    content = with_block(saved, block)["messages"][0]["content"]
    assert content == f"## What you remember\n{block}\n\n## Your turn\nAct."
    assert "Nadia" not in content and "A name alone" not in content  # the old key went too


def test_shares_are_means_over_questions_and_pooled_over_turns():
    figures = [
        {"evidence": ["a"], "evidence_in_prompt": 1.0, "evidence_in_prompt_strict": 1.0,
         "tools_at_10": 1.0, "found_via": {"a": "text"}, "found_via_strict": {"a": "text"}},
        {"evidence": ["b", "c", "d"], "evidence_in_prompt": 1 / 3,
         "evidence_in_prompt_strict": 0.0, "tools_at_10": 0.0, "found_via": {"b": "text"},
         "found_via_strict": {}},
    ]
    found = shares(figures)
    assert found["evidence_in_prompt"] == round(2 / 3, 4)
    assert found["evidence_in_prompt_pooled"] == 0.5
    assert found["evidence_in_prompt_strict"] == 0.5
    assert found["evidence_in_prompt_strict_pooled"] == 0.25
    assert found["evidence_turns"] == 4


def test_conversations_are_a_count_or_a_range():
    assert conversation_range("3") == (1, 3)
    assert conversation_range("4-5") == (4, 5)
    for bad in ("0", "5-4", "x", "2-"):
        with pytest.raises(ValueError):
            conversation_range(bad)


def run_of(number, found, split):
    """A results document of one conversation with one question (found or missed)."""
    figure = {"conversation": f"c{number}", "number": number, "question": "?",
              "category": "single-hop", "evidence": ["D1:1"],
              "evidence_in_prompt": float(found), "evidence_in_prompt_strict": float(found),
              "tools_at_10": 0.0, "found_via": {"D1:1": "text"} if found else {},
              "found_via_strict": {"D1:1": "text"} if found else {},
              "missed_where": {} if found else {"D1:1": "mem0"}, "tokens": 100 * number,
              "sections": {"(tool specs)": 50}}
    conversation = {"sample_id": f"c{number}", "number": number, "never_stored": [],
                    "turns_never_stored": 0}
    document = summarise([figure], [conversation], 1.0, [split])
    document["what"] = {"data": "d.json", "consolidation": "llm", "conversations": 1,
                        "conversations_run": [{"number": number, "sample_id": f"c{number}"}]}
    return document


def test_runs_over_different_conversations_combine_into_one():
    combined = combine([run_of(2, False, (2, 2)), run_of(1, True, (1, 1))])
    assert combined["overall"]["evidence_in_prompt"] == 0.5
    assert combined["overall"]["evidence_turns"] == 2
    assert combined["splits"]["1-1"]["overall"]["evidence_in_prompt"] == 1.0
    assert combined["splits"]["2-2"]["overall"]["evidence_in_prompt"] == 0.0
    assert [run["number"] for run in combined["what"]["conversations_run"]] == [1, 2]
    assert combined["request_tokens"]["max"] == 200 and combined["seconds"] == 2.0
    with pytest.raises(ValueError):
        combine([run_of(1, True, (1, 1)), run_of(1, False, (1, 1))])


def run_on_tiny_conversation(tmp_path, results_name, *options):
    """
    `bench.game_recall` over two sessions of the tiny conversation, in its own process:
    `(its results document, a check that the latest full results file was left alone)`.
    """
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(tiny_conversation()))
    out = tmp_path / results_name
    results = ROOT / "bench" / "results" / results_name
    before = results.read_text() if results.exists() else None
    completed = subprocess.run(
        [sys.executable, "-m", "bench.game_recall", "--data", str(data), "--out", str(out),
         "--sessions", "2", *options],
        cwd=ROOT, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(out.read_text()), lambda: (
        results.read_text() if results.exists() else None) == before


def test_game_recall_smoke(tmp_path):
    """Two sessions in the real shell; the question about what was just said finds it."""
    states = tmp_path / "states"
    document, results_untouched = run_on_tiny_conversation(
        tmp_path, "game_recall.json", "--conversations", "1-1", "--splits", "1-1",
        "--save-states", str(states))
    measures = {"evidence_in_prompt", "evidence_in_prompt_pooled", "evidence_in_prompt_strict",
                "evidence_in_prompt_strict_pooled", "tools_at_10"}
    assert set(document["overall"]) >= measures
    for figures in [document["overall"], *document["per_category"].values()]:
        assert set(figures) >= measures
        # the whole turn is harder to find than its first words
        assert figures["evidence_in_prompt_strict"] <= figures["evidence_in_prompt"]
        assert (figures["evidence_in_prompt_strict_pooled"]
                <= figures["evidence_in_prompt_pooled"])  # fmt: skip
    assert document["what"]["conversations_run"] == [{"number": 1, "sample_id": "tiny-1"}]
    assert document["never_stored"] == 0 and document["turns_never_stored"] == 0
    split = document["splits"]["1-1"]
    assert split["conversations"] == ["tiny-1"] and split["questions"] == 3
    assert split["overall"] == document["overall"]
    assert set(document["request_tokens"]) >= {"mean", "p95"}
    assert document["questions"] == 3  # categories 1-4 only
    assert set(document["per_category"]) == {"single-hop", "temporal"}
    assert document["seconds"] > 0
    conversation = document["per_conversation"][0]
    assert conversation["turns"] == 6 and conversation["sessions"] == 2
    assert conversation["sleeps_unfinished"] == 0
    assert conversation["memories_at_questions"] == 6  # every turn consolidated into mem0
    # the line just said (session 2) reaches the prompt of the question about it
    asked = {item["question"]: item for item in document["per_question"]}
    lisbon = asked["Where is Nadia's sister Ilse moving to?"]
    assert lisbon["evidence"] == ["D2:2"] and lisbon["evidence_in_prompt"] == 1.0
    assert lisbon["found_via"] == {"D2:2": "text"}
    assert lisbon["evidence_in_prompt_strict"] == 1.0
    assert lisbon["tokens"] > 300 and not lisbon["missed_where"]
    assert document["overall"]["tools_at_10"] > 0
    # a request carries messages and tool specs: more than a few hundred tokens
    assert document["request_tokens"]["p95"] > 300
    assert "(tool specs)" in document["tokens_by_section_mean"]
    # a smoke slice leaves the latest full results alone
    assert results_untouched()
    # the saved states replay to the very requests the run measured (bench.recall_replay)
    replayed = replay_of(states, tmp_path)
    assert [(f["question"], f["strict"], f["tokens"]) for f in replayed["per_question"]] == [
        (f["question"], f["evidence_in_prompt_strict"], f["tokens"])
        for f in document["per_question"]]  # fmt: skip
    assert replayed["all"]["strict"] == document["overall"]["evidence_in_prompt_strict"]
    # a setting replayed: no recalled line at all, never more tokens or evidence
    none = replay_of(states, tmp_path, "recall.prompt_items=0")
    assert none["all"]["lines_mean"] == 0 and none["overrides"] == {"recall.prompt_items": 0}
    assert none["all"]["request_tokens"]["mean"] <= replayed["all"]["request_tokens"]["mean"]
    assert none["all"]["strict"] <= replayed["all"]["strict"]


def replay_of(states, tmp_path, *settings):
    """`bench.recall_replay` over saved states, in its own process: its results document."""
    out = tmp_path / "replay.json"
    command = [sys.executable, "-m", "bench.recall_replay", "--states", str(states),
               "--out", str(out)]
    for setting in settings:
        command += ["--set", setting]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(out.read_text())


def test_game_recall_smoke_on_the_llm_path(tmp_path):
    """The same two sessions, listened to and slept on with the scripted paraphrasing model."""
    document, results_untouched = run_on_tiny_conversation(
        tmp_path, "game_recall_llm.json", "--consolidation", "llm")
    assert document["what"]["consolidation"] == "llm"
    conversation = document["per_conversation"][0]
    assert conversation["sleeps_unfinished"] == 0
    # every line said something: one paraphrased memory or more each, none lost
    assert conversation["memories_at_questions"] == 6
    assert document["never_stored"] == 0 and document["turns_never_stored"] == 0
    calls = document["model"]["calls"]
    assert calls["importance"] >= 1 and calls["conversation"] >= 6  # sleep and listening
    assert document["model"]["unknown_purposes"] == {}
    assert document["model"]["facts_listed"] >= 6
    # what each sleep asked the model: the two sleeps' requests, awake turns left out
    assert document["model"]["sleeps"] == 2
    per_sleep = document["model"]["sleep_calls_per_sleep"]
    assert "conversation" not in per_sleep and per_sleep["importance"] >= 0.5
    asleep = sum(count for purpose, count in calls.items() if purpose != "conversation")
    assert per_sleep["total"] == round(asleep / 2, 2)
    for figures in [document["overall"], *document["per_category"].values()]:
        assert figures["evidence_in_prompt_strict"] <= figures["evidence_in_prompt"]
    assert results_untouched()
