"""
Recall beyond the first hits (`memory.recall.pipeline`, `memory.recall.diversity`): invented
fixtures, no Evennia.

- A two-hop question: "Who gave Tova the lantern?" is answered by two memories, and only one
  of them shares a word with the question; the other is reached through the first (its
  salient word, the feedback query of the first stage).
- A question about several things: lines that repeat a better one move down, so the budget
  holds a line about each thing (the second stage, `recall.diversity`).
"""

import dataclasses
from datetime import UTC, datetime

import numpy
from support import make_ports, result_of

from ai_assistant.memory.longterm.mirror import MemoryMirror, mirror_of
from ai_assistant.memory.recall import pipeline
from ai_assistant.memory.recall.diversity import diversify
from ai_assistant.memory.recall.pipeline import Recalled, RecallQuery, build_corpus, rank_items
from ai_assistant.plumbing.settings import Settings

NOW = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
PARAMS = pipeline.recall_params(Settings())


def memory(memory_id, text, *, speaker, day):
    return {"id": memory_id, "memory": text,
            "metadata": {"entry_id": memory_id, "timestamp": f"2024-02-{day:02d}T10:00:00Z",
                         "source_entity": speaker, "source_trust": 0.9}}  # fmt: skip


def corpus_of(*memories):
    mirror = MemoryMirror()
    mirror.merge(memories)
    return build_corpus((), mirror)


def topic_embed(topics):
    """Vectors that say which topics (word lists) a text mentions: meaning, not wording."""

    def embed(texts):
        return [[1.0 if any(word in text.lower() for word in words) else 0.0
                 for words in topics] + [0.01] for text in texts]  # fmt: skip

    return embed


HARBOUR = (
    memory("gift", "Tova said to me: \"My lantern came from the ferryman.\"", speaker="Tova",
           day=3),
    memory("bread", "Oskar said to me: \"The bakery by the quay sells rye bread on "
                    "Thursdays.\"", speaker="Oskar", day=5),
    memory("storm", "Tova said to me: \"The storm last week flooded the fish market.\"",
           speaker="Tova", day=7),
    memory("nets", "Oskar said to me: \"My nephew mends nets for the trawlers now.\"",
           speaker="Oskar", day=8),
    # weeks later, in another conversation: nothing but the first hit connects it
    memory("ferry", "Oskar said to me: \"I have been the ferryman at the north crossing for "
                    "twenty years.\"", speaker="Oskar", day=25),
)


def test_a_two_hop_question_reaches_the_memory_the_first_hit_points_to():
    question = "Who gave Tova the lantern?"
    found = [r.item["id"] for r in rank_items(
        corpus_of(*HARBOUR), RecallQuery(text=question, limit=5), now=NOW, params=PARAMS)]
    # "ferry" shares no word with the question: the first hit's word "ferryman" reaches it
    assert found[0] == "gift" and "ferry" in found
    alone = dataclasses.replace(PARAMS, feedback_docs=0)
    found = [r.item["id"] for r in rank_items(
        corpus_of(*HARBOUR), RecallQuery(text=question, limit=5), now=NOW, params=alone)]
    assert found[0] == "gift" and "ferry" not in found  # without the first hit: one hop


UNWINDING = tuple(
    memory(f"walk{n}", f"Mira said to me: \"{text}\"", speaker="Mira", day=n + 1)
    for n, text in enumerate((
        "In the evening I unwind with a long walk along the canal.",
        "Every evening the canal walk is how I unwind after the forge.",
        "I unwind each evening walking the canal path to the lock.",
        "My evening walk by the canal is the best way to unwind.",
    ))
) + (memory("clay", "Mira said to me: \"Throwing pots at the studio is how I unwind on "
                    "Sundays.\"", speaker="Mira", day=20),)  # fmt: skip
MEANING = topic_embed([["walk", "canal"], ["pots", "clay", "studio"]])


def test_lines_that_repeat_a_better_one_make_room_for_another_thing():
    query = RecallQuery(text="How does Mira unwind in the evening?", limit=3)
    plain = rank_items(corpus_of(*UNWINDING), query, now=NOW, params=PARAMS, embed=MEANING)
    assert "clay" not in [r.item["id"] for r in plain]  # three canal walks fill the three
    second = rank_items(corpus_of(*UNWINDING), query, now=NOW, params=PARAMS, embed=MEANING,
                        diversity=0.5)
    ids = [r.item["id"] for r in second]
    assert ids[0] == plain[0].item["id"]  # the best line stays first
    assert "clay" in ids  # the other way she unwinds comes before a third canal walk


def test_diversify_moves_a_repeat_down_and_keeps_every_hit():
    hits = [Recalled(1.0, {"id": "a"}), Recalled(0.95, {"id": "a again"}),
            Recalled(0.7, {"id": "b"}), Recalled(0.1, {"id": "tail"})]
    vectors = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    order = [found.item["id"] for found in diversify(hits, numpy.array(vectors), 0.5, pool=3)]
    assert order == ["a", "b", "a again", "tail"]
    same = [found.item["id"] for found in diversify(hits, numpy.array(vectors), 0.0, pool=3)]
    assert same == ["a", "a again", "b", "tail"]


def test_the_prompt_recalls_with_the_second_stage_at_the_game_defaults():
    ports = make_ports()
    assert ports.settings.get("recall.diversity") > 0
    mirror = mirror_of(ports)
    mirror.merge(UNWINDING)
    mirror.loaded = True
    _, lines = result_of(pipeline.recall(ports, RecallQuery(
        text="How does Mira unwind in the evening?", limit=20, budget=900)))
    assert any("Throwing pots" in line for line in lines)


def test_the_block_of_a_full_budget_is_never_cut():
    from ai_assistant.agent.blocks.remembered import remembered_block

    lines = [f"- [2 February 2024] Oskar said to me: \"Crossing {n}: the ferry carried "
             f"{n} carts of peat, a goat and the miller's daughter to the north shore.\""
             for n in range(60)]  # fmt: skip
    assert len("\n".join(lines)) > 4000  # longer than any other quoted block may be
    block = remembered_block(make_ports(), {"recall": lines})
    assert "[...cut]" not in block
    assert all(line.split(": ", 1)[1] in block for line in lines)  # each line's words, whole


# Invented word vectors for the query's expansion: "hobbies" is near "pottery" and "kiln" in
# meaning; a whole line's vector (many words) is near nothing (the dense cosine cannot see it).
WORDS = {"hobbies": [1.0, 0.0, 0.0], "pottery": [0.8, 0.6, 0.0], "kiln": [0.7, 0.0, 0.71]}


def word_embed(texts):
    return [numpy.asarray(WORDS.get(text.lower(), [0.0, 0.0, 1e-3]), float) for text in texts]


WORKSHOP = (
    memory("pots", "Ilse said to me: \"Saturdays I fire my pottery in the kiln behind the "
                   "mill.\"", speaker="Ilse", day=4),
    memory("cart", "Ilse said to me: \"The cart wheel needs a new rim before the fair.\"",
           speaker="Ilse", day=6),
    memory("fog", "Bram said to me: \"Fog rolled in over the marsh all morning.\"",
           speaker="Bram", day=9),
)


def test_the_query_expansion_reaches_a_line_that_names_an_instance_of_what_is_asked():
    from ai_assistant.memory.search.expansion import JournalVocabulary
    from ai_assistant.memory.search.terms import stem

    query = RecallQuery(text="What hobbies does Ilse have?", limit=3)
    plain = dataclasses.replace(PARAMS, embedding_weight=0.0, expansion_weight=0.0)
    ranked = rank_items(corpus_of(*WORKSHOP), query, now=NOW, params=plain, embed=word_embed)
    assert "pots" not in [r.item["id"] for r in ranked if r.score > 0.2]
    expanded = dataclasses.replace(plain, expansion_weight=0.6)
    vocabulary = JournalVocabulary()
    ranked = rank_items(corpus_of(*WORKSHOP), query, now=NOW, params=expanded, embed=word_embed,
                        vocabulary=vocabulary)  # fmt: skip
    assert ranked[0].item["id"] == "pots"  # "pottery", "kiln": near "hobbies" in meaning
    stems, _ = vocabulary.update(word_embed, ())
    assert stem("pottery") in stems  # the corpus's words are kept for the next call


def test_the_prompt_recall_expands_the_query_at_the_game_defaults(monkeypatch):
    ports = make_ports()
    assert ports.settings.get("recall.expansion_weight") > 0
    monkeypatch.setattr(pipeline, "default_embed", lambda settings: word_embed)
    mirror = mirror_of(ports)
    mirror.merge(WORKSHOP)
    mirror.loaded = True
    recalled, lines = result_of(pipeline.recall(ports, RecallQuery(
        text="What hobbies does Ilse have?", limit=1, budget=900)))
    assert recalled[0].item["id"] == "pots" and "pottery" in lines[0]
