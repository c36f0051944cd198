"""
mem0's embedding interface over a local embedder.

Import this module only after `mem0_store.configure_mem0_environment` has run: importing mem0
reads its telemetry flag and home folder once.
"""

from mem0.embeddings.base import EmbeddingBase


class Mem0Embedder(EmbeddingBase):
    """
    mem0's embedding interface over a `LocalEmbedder`.

    Assign an instance to `memory.embedding_model` of a `mem0.Memory`.

    Args:
        embedder (LocalEmbedder): The model that does the work.
    """

    def __init__(self, embedder):
        super().__init__(None)
        self.embedder = embedder
        self.config.embedding_dims = embedder.dims

    def embed(self, text, memory_action=None):
        """One text -> one vector (list of floats), as mem0 expects."""
        return self.embedder.embed(str(text)).tolist()

    def embed_batch(self, texts, memory_action="add"):
        """Many texts in one model call."""
        return self.embedder.embed([str(text) for text in texts]).tolist()
