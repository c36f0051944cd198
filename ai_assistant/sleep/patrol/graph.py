"""
The memory graph as a patrol step reads and writes it: the time stamps, saving nodes, clusters
and vectors together, and the embedder whose scale the thresholds follow.
"""

from ai_assistant.memory import node_vectors
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso


def now_iso(ports):
    """The current time as stored in the graph (ISO text)."""
    return iso(ports.clock.now())


def save_graph(ports, nodes=None, clusters=None, vectors=None):
    """Write back whichever of the nodes, clusters and vectors documents a step changed."""
    if nodes is not None:
        ports.state.set(documents.MEMORY_NODES, nodes)
    if clusters is not None:
        ports.state.set(documents.MEMORY_CLUSTERS, clusters)
    if vectors is not None:
        node_vectors.save_vectors(ports, vectors)


def embedder_or_none(ports, embedder):
    """The embedder, or None when it cannot be loaded (thresholds then use the settings)."""
    try:
        return node_vectors.get_node_embedder(ports, embedder)
    except Exception:
        return None
