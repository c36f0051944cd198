"""
Memory nodes: scene parsing, decay arithmetic, clusters, vectors and the index.

The helpers at the top (a fake embedder with chosen vectors, a synchronous runner) are shared
by test_patrol.py and test_node_tools.py.
"""

import json
import math

import numpy as np
import pytest
from support import make_ports, result_of, sync_runner
from twisted.internet import defer

from ai_assistant.memory import node_vectors, nodes
from ai_assistant.memory.node_vectors import VectorIndex
from ai_assistant.memory.nodes import (
    ACTIVE,
    PARSE_FAILED,
    Nodes,
    SceneError,
    effective_importance,
    parse_scene_input,
    recompute_centroids,
)
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import FixedClock

DIMS = 64


class FakeEmbedder:
    """
    Maps texts to chosen vectors: the first keyword of `table` found in a text gives its
    vector; other texts get a fresh axis of their own (orthogonal to everything else).
    Counts its calls, so tests can check that a batch is embedded in one call.
    """

    name = "fake"
    dims = DIMS

    def __init__(self, table=None, dims=DIMS):
        self.dims = dims
        self.table = {key: np.asarray(value, dtype=np.float32) for key, value in
                      (table or {}).items()}
        self.calls = []
        self._own = {}

    def vector_for(self, text):
        for keyword, vector in self.table.items():
            if keyword in text:
                return vector
        if text not in self._own:
            axis = self.dims - 1 - len(self._own) % (self.dims // 2)
            self._own[text] = axis_vector(axis, self.dims)
        return self._own[text]

    def embed(self, texts):
        single = isinstance(texts, str)
        batch = [texts] if single else list(texts)
        self.calls.append(batch)
        matrix = np.stack([node_vectors.unit(self.vector_for(text)) for text in batch]).astype(
            np.float32
        ) if batch else np.zeros((0, self.dims), dtype=np.float32)
        return matrix[0] if single else matrix


def axis_vector(axis, dims=DIMS, weight=1.0):
    vector = np.zeros(dims, dtype=np.float32)
    vector[axis] = weight
    return vector


def mix(*pairs, dims=DIMS):
    """A unit vector from (axis, weight) pairs."""
    vector = np.zeros(dims, dtype=np.float32)
    for axis, weight in pairs:
        vector[axis] += weight
    return node_vectors.unit(vector)


@pytest.fixture
def embedder():
    """A FakeEmbedder installed as the nodes' embedder, with a synchronous runner."""
    fake = FakeEmbedder()
    previous = node_vectors.set_embedding(fake, sync_runner)
    yield fake
    node_vectors.set_embedding(**previous)


def scene(action, actors=("Bob",), when=("2025-01-01",), **extra):
    return {"action": action, "actors": list(actors), "when": list(when), **extra}


# ----------------------------------------------------------------------------------------------
# Scenes


def test_parse_scene_flat_and_nested_forms():
    flat = parse_scene_input(json.dumps(scene(
        "Bob bought bread", setting="the bakery", dialogue=["Fresh today!"], feeling="warm",
        importance=0.8, themes=["food"], emotion={"V": 0.6, "trust": 0.4, "bogus": 1},
    )))
    assert flat["scene"] == {
        "action": "Bob bought bread", "actors": ["Bob"], "when": ["2025-01-01"],
        "setting": "the bakery", "dialogue": ["Fresh today!"],
    }
    assert flat["feeling"] == "warm" and flat["importance"] == 0.8
    assert flat["themes"] == ["food"]
    assert flat["emotion"] == {"valence": 0.6, "trust": 0.4}

    nested = parse_scene_input({"scene": scene("Met Alice", actors=["Alice"]),
                                "feeling": "glad", "importance": 7})
    assert nested["scene"]["actors"] == ["Alice"]
    assert nested["importance"] == 1.0  # clamped, as specified
    assert parse_scene_input(scene("x"))["importance"] is None


def test_parse_scene_requires_action_actors_and_a_date():
    with pytest.raises(SceneError, match="action"):
        parse_scene_input({"actors": ["Bob"], "when": ["2025-01-01"]})
    with pytest.raises(SceneError, match="actors"):
        parse_scene_input({"action": "x", "actors": [], "when": ["2025-01-01"]})
    with pytest.raises(SceneError, match="when"):
        parse_scene_input({"action": "x", "actors": ["Bob"]})
    with pytest.raises(SceneError, match="JSON"):
        parse_scene_input('{"action": "x", actors')
    defaulted = parse_scene_input({"action": "x", "actors": "Bob"}, default_date="2025-02-02")
    assert defaulted["scene"]["when"] == ["2025-02-02"]
    assert defaulted["scene"]["actors"] == ["Bob"]
    with pytest.raises(SceneError, match="emotion"):
        parse_scene_input(scene("x", emotion=[1, 2]))


def test_when_items_keep_both_forms_and_render():
    parsed = parse_scene_input(scene("Chose the name", when=[
        "Day6", {"date": "Day7", "action": "Hashi chosen"}]))
    node = nodes.new_node("n1", {**parsed, "feeling": "relieved"})
    assert node["scene"]["when"] == ["Day6", {"date": "Day7", "action": "Hashi chosen"}]
    assert nodes.node_embed_text(node) == "Day6 Day7 Hashi chosen Chose the name relieved"
    full = nodes.new_node("n2", parse_scene_input(scene(
        "Bob bought bread", setting="the bakery", dialogue=["Fresh!", "Thanks"],
        feeling="warm")) | {"feeling": "warm"})
    assert nodes.scene_to_text(full) == (
        '2025-01-01 — the bakery — Bob bought bread — "Fresh!" — (warm)'
    )


def test_new_node_has_every_field_of_the_node_table():
    node = nodes.new_node("id1", parse_scene_input(scene("x")), cluster_id="c1",
                          now="2025-01-01T00:00:00Z", default_importance=0.5)
    assert set(node) >= {
        "id", "scene", "feeling", "importance", "cluster_id", "themes", "emotion",
        "session_count", "status", "fresh", "pinned", "reactivation_count", "last_activated",
    }
    assert node["status"] == ACTIVE and node["fresh"] is True and node["pinned"] is False
    assert node["importance"] == 0.5 and node["session_count"] == 0


def test_add_scene_note_keeps_invalid_text_marked_parse_failed():
    ports = make_ports()
    good = Nodes(ports).add_scene_note(scene("Bob waved"))
    bad = Nodes(ports).add_scene_note('{"action": "Bob waved", "actors": [')
    notes = ports.state.get(documents.SCENE_NOTES)
    assert [n["id"] for n in notes] == [good["id"], bad["id"]]
    assert notes[0]["status"] == nodes.PENDING
    assert notes[1]["status"] == PARSE_FAILED and "JSON" in notes[1]["error"]
    assert notes[1]["text"] == '{"action": "Bob waved", "actors": ['


# ----------------------------------------------------------------------------------------------
# Decay


def test_effective_importance_uses_sessions_minus_reactivations():
    node = {"importance": 0.5, "session_count": 69, "reactivation_count": 0}
    assert effective_importance(node) == pytest.approx(0.5 * math.exp(-69 / 30))
    assert effective_importance(node) > 0.05
    node["session_count"] = 70
    assert effective_importance(node) <= 0.05
    node["reactivation_count"] = 1
    assert effective_importance(node) == pytest.approx(0.5 * math.exp(-69 / 30))
    assert effective_importance(node, decay_sessions=60) == pytest.approx(
        0.5 * math.exp(-69 / 60))


def test_reactivation_amounts_follow_the_specified_table():
    assert nodes.reactivation_amount({"status": "dead"}) == 2
    assert nodes.reactivation_amount({"status": "active"}) == 1
    assert nodes.reactivation_amount({"status": "dying"}) == 1
    node = nodes.reactivate({"reactivation_count": 3}, 2, FixedClock().now())
    assert node == {"reactivation_count": 5, "last_activated": "2025-01-01T12:00:00Z"}


# ----------------------------------------------------------------------------------------------
# Clusters and vectors


def test_roots_are_created_once_and_parent_themselves():
    clusters = {}
    business = nodes.ensure_root(clusters, "Business", "t")
    assert nodes.ensure_root(clusters, "Business", "t") == business
    private = nodes.ensure_root(clusters, "Private", "t")
    assert len(clusters) == 2 and business != private
    assert clusters[business]["parent_id"] == business and clusters[business]["is_parent"]
    sub = nodes.new_sub_cluster(clusters, "Bread", business, "t")
    assert clusters[sub]["parent_id"] == business and not clusters[sub]["is_parent"]
    assert nodes.find_cluster(clusters, "bread")["id"] == sub
    assert nodes.find_cluster(clusters, sub)["name"] == "Bread"
    assert nodes.find_cluster(clusters, "nope") is None


def test_vectors_round_trip_and_centroids_use_active_nodes_only():
    vector = mix((0, 1.0), (1, 1.0))
    assert np.allclose(node_vectors.decode_vector(node_vectors.encode_vector(vector)), vector)
    graph = {
        "a": {"id": "a", "cluster_id": "c", "status": "active"},
        "b": {"id": "b", "cluster_id": "c", "status": "active"},
        "d": {"id": "d", "cluster_id": "c", "status": "dead"},
    }
    doc = {"nodes": {"a": node_vectors.encode_vector(axis_vector(0)),
                     "b": node_vectors.encode_vector(axis_vector(1)),
                     "d": node_vectors.encode_vector(axis_vector(2))}, "clusters": {}}
    recompute_centroids(graph, doc, ["c", "empty"])
    centroid = node_vectors.cluster_vector(doc, "c")
    assert np.allclose(centroid, mix((0, 1.0), (1, 1.0)))  # the dead node does not count
    assert "empty" not in doc["clusters"]
    graph["a"]["status"] = graph["b"]["status"] = "dying"
    recompute_centroids(graph, doc, ["c"])
    assert node_vectors.cluster_vector(doc, "c") is None


def test_index_search_threshold_limit_and_filter():
    ids = ["a", "b", "c", "d"]
    matrix = np.stack([mix((0, 1.0)), mix((0, 1.0), (1, 0.5)), mix((0, 0.3), (1, 1.0)),
                       mix((2, 1.0))])
    index = VectorIndex(ids, matrix)
    query = axis_vector(0)
    found = index.search(query, threshold=0.35, limit=3)
    assert [node_id for node_id, _ in found] == ["a", "b"]  # c scores 0.29, d 0
    assert found[0][1] == pytest.approx(1.0)
    assert [i for i, _ in index.search(query, threshold=0.0, limit=1)] == ["a"]
    assert [i for i, _ in index.search(query, threshold=0.0, limit=2,
                                       accept=lambda i: i != "a")] == ["b", "c"]


def test_index_is_cached_per_assistant_and_invalidated_on_write():
    ports, other = make_ports(), make_ports()
    doc = Nodes(ports).vectors()
    doc["nodes"]["a"] = node_vectors.encode_vector(axis_vector(0))
    Nodes(ports).save_graph(vectors=doc)
    first = Nodes(ports).vector_index()
    assert first.ids == ["a"] and Nodes(ports).vector_index() is first
    assert len(Nodes(other).vector_index()) == 0  # another assistant never sees it
    doc = Nodes(ports).vectors()
    doc["nodes"]["b"] = node_vectors.encode_vector(axis_vector(1))
    Nodes(ports).save_graph(vectors=doc)
    assert Nodes(ports).vector_index().ids == ["a", "b"]


def test_search_over_ten_thousand_nodes_is_one_matrix_product():
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(10000, 256)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ports = make_ports()
    doc = {"dims": 256, "nodes": {f"n{i}": node_vectors.encode_vector(row)
                                  for i, row in enumerate(matrix)}, "clusters": {}}
    Nodes(ports).save_graph(vectors=doc)
    index = Nodes(ports).vector_index()
    assert index.matrix.shape == (10000, 256)  # the rows held as one matrix, once
    query = matrix[4242]
    products = []
    matmul = np.ndarray.__matmul__

    class Matrix(np.ndarray):
        def __matmul__(self, other):
            products.append(self.shape)
            return matmul(self, other)

    index.matrix = index.matrix.view(Matrix)
    found = index.search(query, threshold=0.35, limit=3)
    assert products == [(10000, 256)]  # one product of the whole matrix, no loop over nodes
    assert found[0] == ("n4242", pytest.approx(1.0))


def test_thresholds_are_calibrated_for_wordllama_unless_configured():
    class Wordllama:
        name = "wordllama-l2_supercat-256"

    ports = make_ports()
    assert node_vectors.threshold(ports, "recall_threshold", Wordllama()) == 0.30
    assert node_vectors.threshold(ports, "cluster_threshold", Wordllama()) == 0.40
    assert node_vectors.threshold(ports, "recall_threshold", FakeEmbedder()) == 0.35
    assert node_vectors.threshold(ports, "cluster_threshold", None) == 0.45
    custom = make_ports({"nodes": {"recall_threshold": 0.5}})
    assert node_vectors.threshold(custom, "recall_threshold", Wordllama()) == 0.5


def test_embed_texts_runs_one_batch_through_the_runner(embedder):
    ports = make_ports()
    calls = []

    def runner(func, *args):
        calls.append(args)
        return defer.succeed(func(*args))

    matrix = result_of(node_vectors.embed_texts(ports, ["a", "b", "c"], runner=runner))
    assert matrix.shape == (3, DIMS) and len(calls) == 1 and embedder.calls == [["a", "b", "c"]]
