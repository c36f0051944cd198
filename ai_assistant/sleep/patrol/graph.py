"""
What every patrol step shares: the time as the graph stores it and the embedder whose scale
the thresholds follow. The graph itself (nodes, clusters, vectors) is read and written through
`memory.nodes.Nodes`, what the patrol keeps between runs through `memory.patrol_record`.
"""

from ai_assistant.memory import node_vectors
from ai_assistant.plumbing.ports import iso


def now_iso(ports):
    """The current time as stored in the graph (ISO text)."""
    return iso(ports.clock.now())


def embedder_or_none(ports, embedder):
    """The embedder, or None when it cannot be loaded (thresholds then use the settings)."""
    try:
        return node_vectors.get_node_embedder(ports, embedder)
    except Exception:
        return None
