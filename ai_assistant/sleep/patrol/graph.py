"""
What every patrol step shares: the time as the graph stores it, the patrol's own state
document, and the embedder whose scale the thresholds follow. The graph itself (nodes, clusters,
vectors) is read and written through `memory.nodes.Nodes`.
"""

from ai_assistant.memory import node_vectors
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso


def now_iso(ports):
    """The current time as stored in the graph (ISO text)."""
    return iso(ports.clock.now())


def patrol_state(ports):
    """The "patrol_state" document (a copy to change and `set` back)."""
    return dict(ports.state.get(documents.PATROL_STATE, None) or {})


def embedder_or_none(ports, embedder):
    """The embedder, or None when it cannot be loaded (thresholds then use the settings)."""
    try:
        return node_vectors.get_node_embedder(ports, embedder)
    except Exception:
        return None
