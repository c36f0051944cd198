"""
Where each assistant's memories live in the vector store.

The embedded store (qdrant in local mode) has no payload index: a filtered search or listing
checks every point of its collection in Python. With one collection for every assistant of a
game, each assistant would pay for everyone's memories: at 20,000 points over 100 assistants a
search takes about 0.5 s, against 6 ms over one assistant's own 200. So in the embedded store
each assistant has its own collection, `<collection>-<scope>`, on the one client the process
shares. Points still carry their `user_id`.

A vector server indexes `user_id` (mem0 creates the payload index), and Qdrant's guidance for
many tenants is one collection partitioned by payload. A server, or any other store mem0
supports, therefore keeps the single configured collection.

In its own collection an assistant's `user_id` condition is true of every point, so it is
left out of the filter (`mem0_collection.OwnCollection`): a search or listing with no other
condition is then numpy alone, with no Python check per point. Every point written there
still carries the `user_id`, and `Mem0Store` still checks it on what it reads by id.
"""

import hashlib
import re
import warnings


def collection_name(base, key):
    """
    The embedded store's collection for one assistant: a name safe as a folder name.

    Args:
        base (str): The configured collection name.
        key (str): The assistant's memory scope.

    Returns:
        str: `<base>-<key>`; characters other than letters, digits, `_` and `-` are replaced,
        with a short hash of the key added so that two keys never share a collection.
    """
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", key)
    if safe != key:
        safe += "_" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:8]
    return f"{base}-{safe}"


class AssistantCollections:
    """
    The vector store each assistant's calls use, for one shared `mem0.Memory`.

    Not thread-safe by itself: `bind` and `drop` run under the shared store's lock, like every
    other call on the shared `mem0.Memory`.

    Args:
        memory (mem0.Memory): The shared instance; its vector store is the configured one.
    """

    def __init__(self, memory):
        self._memory = memory
        self._configured = memory.vector_store
        # mem0 marks a qdrant opened on a path (not a server, not a given client) as local
        self.per_assistant = bool(getattr(self._configured, "is_local", False))
        self._opened = {}

    def bind(self, key):
        """Point the shared `mem0.Memory` at the collection of the assistant `key`."""
        self._memory.vector_store = self._store_for(key)

    def drop(self, key):
        """Remove the assistant's own collection (its memories are already deleted)."""
        if not self.per_assistant:
            return
        self._opened.pop(key, None)
        self._memory.vector_store = self._configured
        name = collection_name(self._configured.collection_name, key)
        if self._configured.client.collection_exists(name):
            self._configured.client.delete_collection(name)

    def _store_for(self, key):
        if not self.per_assistant:
            return self._configured
        store = self._opened.get(key)
        if store is None:
            store = self._open(key)
            self._opened[key] = store
        return store

    def _open(self, key):
        from ai_assistant.memory.longterm.mem0_collection import OwnCollection

        configured = self._configured
        # mem0's sanctioned way to share a client: pass it in (the local client allows one
        # per folder). mem0 then asks for payload indexes, which local mode ignores, warning.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            store = OwnCollection(
                collection_name(configured.collection_name, key),
                configured.embedding_model_dims, client=configured.client,
                on_disk=configured.on_disk)
        store.is_local = True
        return store

