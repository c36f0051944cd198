"""The memory nodes' owner: `Nodes(ports)` is the only writer of notes, nodes, clusters, vectors."""

import numpy as np
import pytest
from support import make_ports

from ai_assistant.memory import node_vectors
from ai_assistant.memory.nodes import (
    ACTIVE,
    DEAD,
    DYING,
    PARSE_FAILED,
    PENDING,
    Nodes,
    new_node,
    recompute_centroids,
)
from ai_assistant.plumbing import documents

SCENE = {"action": "Bob sold me bread", "actors": ["Bob"], "when": ["2025-01-01"]}


def graph_with(ports, *statuses):
    """Nodes n0, n1, ... with the given statuses, all in cluster "c", each with a vector."""
    graph = Nodes(ports)
    nodes, vectors = graph.nodes(), graph.vectors()
    for number, status in enumerate(statuses):
        node = new_node(f"n{number}", {"scene": dict(SCENE)}, cluster_id="c")
        node["status"] = status
        nodes[node["id"]] = node
        vectors["nodes"][node["id"]] = node_vectors.encode_vector(np.eye(4)[number % 4])
    vectors["dims"] = 4
    graph.save_graph(nodes, {"c": {"id": "c", "name": "Bread"}}, vectors)
    return graph


def test_scene_notes_are_queued_valid_or_marked_for_repair():
    ports = make_ports()
    graph = Nodes(ports)
    good = graph.add_scene_note(SCENE)
    bad = graph.add_scene_note("not a scene at all", audience="#12")
    assert good["status"] == PENDING and bad["status"] == PARSE_FAILED
    assert bad["audience"] == "#12" and "audience" not in good
    assert [note["id"] for note in graph.scene_notes()] == [good["id"], bad["id"]]
    graph.scene_notes()[0]["status"] = "changed"  # copies: the queue is not touched
    assert graph.scene_notes()[0]["status"] == PENDING
    graph.replace_scene_notes([bad])
    assert [note["id"] for note in ports.state.get(documents.SCENE_NOTES)] == [bad["id"]]


def test_nodes_and_clusters_are_copies_until_saved():
    ports = make_ports()
    graph = graph_with(ports, ACTIVE)
    nodes = graph.nodes()
    nodes["n0"]["status"] = DEAD
    graph.clusters()["c"]["name"] = "Changed"
    assert graph.stored()["n0"]["status"] == ACTIVE
    assert graph.clusters()["c"]["name"] == "Bread"
    graph.save_graph(nodes)
    assert graph.stored()["n0"]["status"] == DEAD


def test_saving_vectors_renews_the_revision_and_the_index():
    ports = make_ports()
    graph = graph_with(ports, ACTIVE, ACTIVE)
    index = graph.vector_index()
    assert len(index) == 2 and graph.vector_index() is index  # cached while unchanged
    revision = ports.state.get(documents.NODE_VECTORS)["revision"]
    vectors = graph.vectors()
    vectors["nodes"].pop("n1")
    graph.save_graph(vectors=vectors)
    assert ports.state.get(documents.NODE_VECTORS)["revision"] != revision
    assert graph.vector_index().ids == ["n0"]


def test_recalled_reactivates_existing_nodes_live_plus_one_dead_plus_two():
    ports = make_ports()
    graph = graph_with(ports, ACTIVE, DEAD)
    touched = graph.recalled(["n0", "n1", "gone"])
    assert [node["id"] for node in touched] == ["n0", "n1"]
    stored = graph.stored()
    assert stored["n0"]["reactivation_count"] == 1
    assert stored["n1"]["reactivation_count"] == 2
    assert stored["n0"]["last_activated"] == "2025-01-01T12:00:00Z"
    graph.recalled(["n0"], amount=5)
    assert graph.stored()["n0"]["reactivation_count"] == 6


def test_pin_and_an_unknown_node():
    ports = make_ports()
    graph = graph_with(ports, ACTIVE)
    assert graph.pin("n0", True)["pinned"] is True
    assert graph.stored()["n0"]["pinned"] is True
    with pytest.raises(KeyError):
        graph.pin("nope", True)


def test_centroids_follow_the_active_members_only():
    ports = make_ports()
    graph = graph_with(ports, ACTIVE, DYING)
    nodes, vectors = graph.nodes(), graph.vectors()
    recompute_centroids(nodes, vectors, {"c"})
    centroid = node_vectors.decode_vector(vectors["clusters"]["c"])
    assert np.allclose(centroid, np.eye(4)[0])  # the dying n1 is left out
    nodes["n0"]["status"] = DEAD
    recompute_centroids(nodes, vectors, {"c"})
    assert "c" not in vectors["clusters"]
