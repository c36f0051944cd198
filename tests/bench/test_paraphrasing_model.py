"""
The benches' scripted model: its paraphrases, and answers the sleep steps' own parsers read.
"""

import json

from support import result_of

from ai_assistant.sleep.facts import build_extraction_prompt, parse_facts
from ai_assistant.sleep.reflection import parse_insights, parse_questions
from ai_assistant.sleep.scoring import build_scoring_prompt, parse_scores
from bench.paraphrasing_model import ParaphrasingModel, importance, paraphrase_facts


def test_a_fact_keeps_the_content_words_and_drops_the_phrasing():
    said = 'Sam said to me: "I adopted a puppy named Rex last week!"'
    assert paraphrase_facts(said) == ["Sam adopted a puppy named Rex."]
    facts = paraphrase_facts('Mira said to me: "Wow, I\'m really into pottery, I have made 12 '
                             'bowls. My mom and I do yoga every Sunday, you know."')
    assert facts == ["Mira is into pottery, Mira has made 12 bowls.",
                     "Mira's mom and Mira do yoga every Sunday."]
    # a question says something too; small talk says nothing
    assert paraphrase_facts('Sam said to me: "Have you ever tried sea kayaking?"') == [
        "Sam asked: have the listener ever tried sea kayaking."]
    assert paraphrase_facts('Sam said to me: "Haha, thanks so much!"') == []
    assert importance([]) == 2 and 4 <= importance(["Sam adopted a puppy named Rex."]) <= 9


def test_a_shared_photo_and_a_long_turn_lose_nothing():
    said = ('Ola said to me: "' + " ".join(f"I planted {n} tulips in bed {n}." for n in range(14))
            + ' [shares a photo: a red tulip in a clay pot]"')
    facts = paraphrase_facts(said, max_facts=10)
    assert facts[0] == "Ola shared a photo of a red tulip in a clay pot."
    assert len(facts) <= 10
    text = " ".join(facts)
    assert all(f"Ola planted {n} tulips in bed {n}." in text for n in range(14))


def test_the_sleep_steps_read_its_answers():
    entries = [{"id": 4, "content": 'Sam said to me: "I adopted a puppy named Rex."'},
               {"id": 5, "content": 'Ola said to me: "Lol ok!"'},
               {"id": 6, "content": 'Ola said to me: "My brother Piet sails to Oslo."'}]
    model = ParaphrasingModel()
    reply = result_of(model.complete(build_scoring_prompt(entries, facts_for=[4, 5]),
                                     purpose="importance"))
    scores = parse_scores(reply.content, [4, 5, 6])
    assert set(scores) == {4, 5, 6} and scores[5] == 2 and scores[4] >= 4
    # facts only where asked for ("(score only)" for entry 6)
    assert parse_facts(reply.content, [4, 5, 6]) == {4: ["Sam adopted a puppy named Rex."],
                                                     5: []}
    reply = result_of(model.complete(build_extraction_prompt(entries[2:]),
                                     purpose="fact_extraction"))
    assert parse_facts(reply.content, [6]) == {6: ["Ola's brother Piet sails to Oslo."]}
    questions = result_of(model.complete([{"role": "user", "content": "x"}],
                                         purpose="reflection_questions")).content
    assert len(parse_questions(questions)) == 1
    insights = result_of(model.complete([{"role": "user", "content": "x"}],
                                        purpose="reflection_insights")).content
    assert parse_insights(insights) == []
    assert model.report()["calls"] == {"importance": 1, "fact_extraction": 1,
                                       "reflection_questions": 1, "reflection_insights": 1}
    assert model.report()["events_without_facts"] == 1


def test_a_turn_of_the_loop_says_a_line_or_passes():
    model = ParaphrasingModel()
    say = [{"type": "function", "function": {"name": "say"}}]
    reply = result_of(model.complete([], tools=say, purpose="conversation"))
    assert reply.tool_calls[0].name == "say"
    assert json.loads(reply.tool_calls[0].arguments)["message"]
    review = [{"type": "function", "function": {"name": n}} for n in ("add_journal_entry", "noop")]
    reply = result_of(model.complete([], tools=review, purpose="pre_compaction"))
    assert reply.tool_calls[0].name == "noop"
    # a step it has no rule for gets an empty JSON object, and is counted
    assert result_of(model.complete([], purpose="something_new")).content == "{}"
    assert model.report()["unknown_purposes"] == {"something_new": 1}
