"""
The local embedder: loads offline from site-packages, is calibrated, and plugs into mem0.
"""

import socket

import numpy as np
import pytest

from ai_assistant.memory import embedder as embedder_module
from ai_assistant.memory.embedder import (
    EmbedderUnavailable,
    WordLlamaEmbedder,
    get_embedder,
)
from ai_assistant.memory.mem0_embedding import Mem0Embedder

pytestmark = pytest.mark.core

PARAPHRASES = [
    ("Alice prefers tea over coffee.", "Alice likes tea more than coffee."),
    ("Bob lost his sword in the swamp.", "Bob's sword was lost somewhere in the swamp."),
    ("The king's crown was stolen last night.", "Someone stole the king's crown last evening."),
]
UNRELATED = [
    ("Alice prefers tea over coffee.", "A storm destroyed the eastern bridge."),
    ("Bob lost his sword in the swamp.", "The blacksmith shuts his shop at sundown."),
    ("The king's crown was stolen last night.", "Carol is looking for the old map."),
]


@pytest.fixture(scope="module")
def model():
    return get_embedder()


def test_loads_without_network(monkeypatch):
    """A fresh load finds the model in the wheel; any network attempt would fail the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the embedder tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder_module._load_wordllama.cache_clear()
    fresh = WordLlamaEmbedder()
    vector = fresh.embed("The tavern is in the north wing.")
    assert vector.shape == (fresh.dims,)


def test_model_is_loaded_once(model):
    assert get_embedder() is model
    assert WordLlamaEmbedder()._model is WordLlamaEmbedder()._model


def test_vectors_are_unit_length(model):
    vectors = model.embed(["one text", "another, longer text about goats"])
    assert vectors.shape == (2, model.dims)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert model.embed([]).shape == (0, model.dims)


def test_calibrated_thresholds_separate_paraphrases_from_unrelated(model):
    for text_a, text_b in PARAPHRASES:
        assert model.similarity(text_a, text_b) >= model.link_similarity, (text_a, text_b)
    for text_a, text_b in UNRELATED:
        assert model.similarity(text_a, text_b) < model.relevance_threshold, (text_a, text_b)
    # the calibrated values sit below the specification's transformer-scale 0.7
    assert model.relevance_threshold < model.link_similarity < model.duplicate_similarity


def test_question_finds_its_answer(model):
    facts = [
        "Alice prefers tea over coffee.",
        "The tavern is in the north wing of the castle.",
        "Bob lost his sword in the swamp.",
    ]
    vectors = model.embed(facts)
    query = model.embed("What happened to Bob's sword?")
    scores = vectors @ query
    assert int(np.argmax(scores)) == 2
    assert scores[2] > model.relevance_threshold


def test_mem0_adapter_is_an_embedding_base(model):
    from mem0.embeddings.base import EmbeddingBase

    adapter = Mem0Embedder(model)
    assert isinstance(adapter, EmbeddingBase)
    vector = adapter.embed("Alice prefers tea.", "add")
    assert isinstance(vector, list) and len(vector) == model.dims
    batch = adapter.embed_batch(["Alice prefers tea.", "Bob lost his sword."])
    assert len(batch) == 2 and np.allclose(batch[0], vector, atol=1e-6)
    assert adapter.config.embedding_dims == model.dims


def test_unknown_embedder_is_a_clear_error():
    with pytest.raises(EmbedderUnavailable, match="unknown local embedder"):
        get_embedder("no-such-model")
