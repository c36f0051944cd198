"""
An assistant released from residency (`plumbing.residency`) searches as before: its journal's
BM25 index, its journal's vector matrix and its nodes' matrix are built again on the next use,
with the same results (the real local embedder for the journal's dense similarities).
"""

from datetime import UTC, datetime

import numpy as np
from support import make_ports, result_of
from test_nodes import FakeEmbedder, axis_vector, mix

from ai_assistant.memory import node_vectors
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.nodes import Nodes
from ai_assistant.memory.search.journal_search import INDEX_CACHE, MATRIX_CACHE, VOCABULARY_CACHE
from ai_assistant.plumbing.ports import FixedClock
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import ToolCache, execute_tool

LINES = (
    "Orla keeps three hives of bees behind the mill",
    "The ferry to the island leaves at dawn",
    "Bram mended a copper lantern near the chapel",
    "Wolves were seen at the northern gate last night",
    "The baker sells rye bread on market days",
    "Orla's bees swarmed over the orchard wall",
    "A storm broke the ferry's rope at the harbour",
    "Bram sold the lantern to a travelling merchant",
)
QUERIES = ("who keeps bees?", "what happened to the ferry", "the lantern", "wolf attack")


def search(ports, query):
    load_all_tools()
    result = result_of(execute_tool("search_journal", ports, {"query": query}, cache=ToolCache()))
    assert result["success"], result
    return result


def test_a_journal_search_after_a_release_gives_the_same_results():
    ports = make_ports(clock=FixedClock(datetime(2025, 5, 1, 9, 0, tzinfo=UTC)))
    for line in LINES:
        ports.clock.advance(hours=3)
        Journal(ports).add(line, importance=5)
    before = [search(ports, query) for query in QUERIES]
    assert before[0]["mode"] == "dense+hybrid"  # the embedding matrix took part
    index = ports.runtime.derived[INDEX_CACHE]
    matrices = ports.runtime.derived[MATRIX_CACHE]
    vocabulary = ports.runtime.derived[VOCABULARY_CACHE]  # the query expansion's
    ports.runtime.release()
    assert ports.runtime.derived == {}
    after = [search(ports, query) for query in QUERIES]
    assert after == before
    # built again, not kept somewhere else
    assert ports.runtime.derived[INDEX_CACHE] is not index
    assert ports.runtime.derived[MATRIX_CACHE] is not matrices
    assert ports.runtime.derived[VOCABULARY_CACHE] is not vocabulary


def test_the_nodes_matrix_is_built_again_after_a_release():
    ports = make_ports()
    nodes = Nodes(ports)
    vectors = nodes.vectors()
    for node_id, vector in (("a", axis_vector(0)), ("b", mix((0, 1.0), (1, 0.5))),
                            ("c", axis_vector(2))):
        vectors["nodes"][node_id] = node_vectors.encode_vector(vector)
    nodes.save_graph(vectors=vectors)
    query = node_vectors.unit(FakeEmbedder().vector_for("anything") + axis_vector(0))
    index = nodes.vector_index()
    found = index.search(query, limit=3)
    ports.runtime.release()
    rebuilt = nodes.vector_index()
    assert rebuilt is not index and rebuilt.ids == index.ids
    assert np.array_equal(rebuilt.matrix, index.matrix)
    assert rebuilt.search(query, limit=3) == found
