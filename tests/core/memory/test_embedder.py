"""
The local embedder: loads offline from site-packages, is calibrated, and plugs into mem0.
"""

import json
import socket

import numpy as np
import pytest

from ai_assistant.memory import embedder as embedder_module
from ai_assistant.memory.embedder import (
    EmbedderUnavailable,
    WordLlamaEmbedder,
    get_embedder,
)
from ai_assistant.memory.longterm.mem0_embedding import Mem0Embedder

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


# ----------------------------------------------------------------------------------------------
# bench/embedders.py, at smoke size (seconds)

SMOKE_TURNS = [
    ("Alice", "Good morning! How was the trip?"),
    ("Bob", "Long. I lost my sword in the swamp on the way back."),
    ("Alice", "Oh no. Did you look for it?"),
    ("Bob", "For an hour, then the rain started."),
    ("Alice", "My sister adopted two cats last week, Pixel and Moss."),
    ("Bob", "Lovely names. I prefer dogs though."),
    ("Alice", "I have been learning to play the violin since spring."),
    ("Bob", "Is it hard?"),
    ("Alice", "Very, but the teacher is patient."),
    ("Bob", "The blacksmith in town shuts his shop at sundown."),
    ("Alice", "Then go early tomorrow."),
    ("Bob", "Yup, ttyl!"),
]
SMOKE_QUESTIONS = [
    {"question": "What did Bob lose in the swamp?", "evidence": ["D1:2"], "category": 4},
    {"question": "Which instrument is Alice learning?", "evidence": ["D1:7"], "category": 4},
    {"question": "What pets did Alice's sister get?", "evidence": ["D1:5"], "category": 1},
    {"question": "Something with no evidence", "evidence": [], "category": 5},
]


def smoke_data(path):
    session = [{"speaker": speaker, "text": text, "dia_id": f"D1:{number}"}
               for number, (speaker, text) in enumerate(SMOKE_TURNS, start=1)]  # fmt: skip
    sample = {"sample_id": "smoke", "qa": SMOKE_QUESTIONS, "conversation": {
        "speaker_a": "Alice", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": session}}  # fmt: skip
    path.write_text(json.dumps([sample]))
    return path


def test_embedders_bench_smoke(tmp_path, monkeypatch):
    from bench import embedders

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # main sets it; restored after the test

    out = tmp_path / "embedders.json"
    document = embedders.main(["--data", str(smoke_data(tmp_path / "data.json")),
                               "--out", str(out), "--candidates", "wordllama"])  # fmt: skip
    assert json.loads(out.read_text()) == document
    row = document["candidates"]["wordllama"]
    assert row["turns"] == len(SMOKE_TURNS) and row["dims"] == 256
    assert row["ingest_seconds_per_1k_turns"] > 0 and row["installed_mb"] > 1
    for way in ("plain", "fused"):
        overall = row[way]["overall"]
        assert overall["questions"] == 3  # category 5 has no evidence: left out
        assert overall["recall@1"] <= overall["recall@5"] <= overall["recall@10"] == 1.0
    # the obvious questions find their line first, by meaning alone and fused with BM25
    assert row["plain"]["single-hop"]["recall@1"] == 1.0
    assert row["fused"]["single-hop"]["recall@1"] == 1.0
    assert row["fused"]["multi-hop"]["questions"] == 1
    assert "fasttextembed" in " ".join(document["excluded"])
    assert document["machine"]["python_loop_us"] > 0  # its ingest times compare by it


def test_embedders_bench_rejects_unknown_candidates(tmp_path):
    from bench import embedders

    with pytest.raises(SystemExit):
        embedders.main(["--data", str(smoke_data(tmp_path / "data.json")),
                        "--out", str(tmp_path / "x.json"), "--candidates", "no-such-model"])


def test_embedders_bench_restores_the_local_embedder():
    from bench import embedders

    original = embedder_module.get_embedder
    with embedders.local_embedder(object()):
        assert embedder_module.get_embedder is not original
    assert embedder_module.get_embedder is original


def test_embedders_bench_skips_a_candidate_that_is_not_installed(tmp_path, monkeypatch):
    from bench import embedders

    def missing():
        raise EmbedderUnavailable("the 'nothing' package is not installed")

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setitem(embedders.CANDIDATES, "missing", ("nothing", missing, True))
    document = embedders.main(["--data", str(smoke_data(tmp_path / "data.json")),
                               "--out", str(tmp_path / "x.json"), "--candidates", "missing"])
    assert document["candidates"] == {}
    assert "not installed" in document["skipped"]["missing"]


def test_embedders_bench_fuses_the_candidate_in_the_real_tool():
    """The fused row measures the candidate, not the default model, inside search_journal."""
    from ai_assistant.tools.catalogue import load_all_tools
    from bench import embedders, locomo

    class Recording(embedder_module.LocalEmbedder):
        name, dims = "recording", 4

        def __init__(self):
            self.seen = []

        def _encode(self, texts):
            self.seen.extend(texts)
            return np.ones((len(texts), self.dims))

    load_all_tools()
    ports = locomo.make_ports("fused-check")
    moment = locomo.parse_session_date("1:56 pm on 8 May, 2023")
    locomo.ingest(ports, [(moment, "Bob", "Bob lost his sword.", "D1:1")])
    candidate = Recording()
    with embedders.local_embedder(candidate):
        assert locomo.search_tool_ids(ports, "Where is the sword?") == [1]
    assert "Where is the sword?" in candidate.seen and "Bob lost his sword." in candidate.seen
