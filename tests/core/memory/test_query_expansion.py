"""Query expansion from the journal's vocabulary: neighbours in meaning join the BM25 query."""

from datetime import UTC, datetime, timedelta

import numpy
import pytest

from ai_assistant.memory.search.expansion import (
    JournalVocabulary,
    expanded_query,
    expansion_terms,
)
from ai_assistant.memory.search.journal_search import search_entries
from ai_assistant.memory.search.params import SearchParams
from ai_assistant.memory.search.terms import stem
from ai_assistant.plumbing.ports import iso

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
# Invented word vectors: "music" is close to "guitar" (0.8) and a little to "concert" (0.6),
# far from everything else; "harbour" and "boat" are close to each other.
VECTORS = {
    "music": [1.0, 0.0, 0.0], "guitar": [0.8, 0.6, 0.0], "concert": [0.6, 0.0, 0.8],
    "harbour": [0.0, 1.0, 0.0], "boat": [0.0, 0.9, 0.436], "practise": [0.1, 0.0, -0.995],
    "nights": [0.0, 0.2, -0.98], "mended": [0.0, -0.6, 0.8],
}


class CountingEmbed:
    """An embed function over `VECTORS` that records every text it embeds."""

    def __init__(self):
        self.texts = []

    def __call__(self, texts):
        self.texts.extend(texts)
        return [numpy.asarray(VECTORS.get(text, [0.0, 0.0, 0.0]), float) for text in texts]


def test_each_query_word_gets_its_nearest_journal_words():
    embed = CountingEmbed()
    texts = ["I practise the guitar most nights.", "We went to a concert.", "The boat mended."]
    found = expansion_terms(embed, "What music does Wren like?", texts)
    # "music" is not in the journal; its neighbours are, above the similarity floor
    assert found[stem("music")] == pytest.approx({stem("guitar"): 0.8, stem("concert"): 0.6})
    assert stem("boat") not in found[stem("music")]  # cosine 0 < 0.3
    assert stem("wren") not in found  # no journal word is near it


def test_a_query_word_never_expands_to_itself_and_the_floor_holds():
    embed = CountingEmbed()
    texts = ["The harbour was calm.", "A boat came in."]
    found = expansion_terms(embed, "harbour", texts, min_similarity=0.5)
    assert found.keys() == {stem("harbour")}
    assert found[stem("harbour")] == pytest.approx({stem("boat"): 0.9}, abs=1e-3)
    assert expansion_terms(embed, "harbour", texts, min_similarity=0.95) == {}
    assert expansion_terms(embed, "the of and", texts) == {}
    assert expansion_terms(embed, "music", []) == {}


def test_the_vocabulary_embeds_only_the_words_it_has_not_seen():
    embed = CountingEmbed()
    vocabulary = JournalVocabulary()
    texts = ["I practise the guitar most nights."]
    expansion_terms(embed, "music", texts, vocabulary)
    first = list(embed.texts)
    assert {"practise", "guitar", "nights"} <= set(first)
    embed.texts.clear()
    expansion_terms(embed, "music", texts + ["The guitar and a concert."], vocabulary)
    # only the one new journal word ("guitar" was known; vectors are kept per text)
    assert embed.texts == ["concert"]
    embed.texts.clear()
    found = expansion_terms(embed, "music", texts + ["The guitar and a concert."], vocabulary)
    assert embed.texts == []
    assert set(found[stem("music")]) == {stem("guitar"), stem("concert")}
    stems, matrix = vocabulary.update(embed, texts)
    assert len(stems) == len(matrix) == len(set(stems)) == 4  # practis, guitar, night, concert
    # another embedder starts the vocabulary again
    other = CountingEmbed()
    expansion_terms(other, "music", texts, vocabulary)
    assert "guitar" in other.texts



def test_a_line_that_brings_no_new_word_is_not_read_again(monkeypatch):
    from ai_assistant.memory.search import expansion

    read = []
    reading = expansion._content_words
    monkeypatch.setattr(expansion, "_content_words", lambda text: read.append(text) or
                        reading(text))
    vocabulary = JournalVocabulary()
    texts = ["The guitar played at the concert.", "A concert, a guitar.", "The concerts of 12 May.",
             "Guitars played by boats."]
    stems, _ = vocabulary.update(CountingEmbed(), texts)
    # the second line's terms are all known (the index's terms of it say so); the third has a
    # number, never a vocabulary word, so it is read for words; the fourth brings "boat"
    assert read == [texts[0], texts[2], texts[3]]
    assert set(stems) == {stem("guitar"), stem("play"), stem("concert"), stem("may"),
                          stem("boat")}


def test_the_expanded_query_weighs_neighbours_of_the_query_terms_only():
    expansion = {"music": {"guitar": 0.8, "concert": 0.6}, "harbour": {"boat": 0.9},
                 "play": {"guitar": 0.5, "music": 0.7}}  # fmt: skip
    # "harbour" was a time reference or a name the search took out: it expands nothing
    query = expanded_query(expansion, ["music", "play"], 0.5)
    assert query == {"guitar": 0.4, "concert": 0.3}  # the best similarity; "music" is a term
    assert expanded_query(expansion, ["lantern"], 0.5) == {}


def entry(id, content, speaker="Wren", hours_ago=48.0):
    return {"id": id, "timestamp": iso(NOW - timedelta(hours=hours_ago)), "content": content,
            "importance": 5, "source_entity": speaker, "tags": []}  # fmt: skip


def test_search_finds_the_instance_a_question_names_the_kind_of():
    entries = [
        entry(1, "I practise the guitar most nights."),
        entry(2, "The harbour was calm this morning."),
        entry(3, "Did you hear the music from the square?", speaker="Orla"),
        entry(4, "I mended the nets by the boat."),
        entry(5, "The bread was late again."),
        entry(6, "Gulls everywhere today."),
    ]
    question = "What music does Wren like?"
    embed = CountingEmbed()
    expansion = expansion_terms(embed, question, [e["content"] for e in entries])
    params = SearchParams(alpha_recency=0, alpha_importance=0, context_weight=0,
                          expansion_weight=0.3)  # fmt: skip
    found = search_entries(entries, question, now=NOW, params=params, expansion=expansion)
    assert 1 in [e["id"] for _, e in found]  # shares no word with the question
    without = search_entries(entries, question, now=NOW, params=params)
    assert 1 not in [e["id"] for _, e in without]
    off = SearchParams(alpha_recency=0, alpha_importance=0, context_weight=0,
                       expansion_weight=0.0)  # fmt: skip
    unweighted = search_entries(entries, question, now=NOW, params=off, expansion=expansion)
    assert [e["id"] for _, e in unweighted] == [e["id"] for _, e in without]
