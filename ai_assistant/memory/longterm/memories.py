"""
The owner of an assistant's long-term memory: every writer and reader goes through `Memories`.

Long-term memory is built in floors, each knowing only the one below it:

1. the provider adapter (`mem0_store.Mem0Store`, the `ports.semantic` port): mem0 with its
   vector store and the local embedder, off the reactor;
2. the policy (`policy.judge_claim`): what a new claim does to the memories already stored
   (kept instead, stored superseding what it corrects, stored beside); the adapter asks it
   under its lock;
3. the recall mirror (`mirror`): every memory as a recall item, with its BM25 index and its
   vectors, for the recall pipeline (`memory.recall`);
4. this owner, which writes through to the mirror on every add, update and delete, so no
   writer (consolidation, the `store_memory` tool, staff corrections) can forget it.

A store that ranks in its database (the postgres store: `ranks_in_database`) has no mirror:
recall asks it for each query's candidates (`recall_candidates`), so the game process holds
no copy of the assistant's memories; its mirror stays empty (and "loaded": nothing to read).

`Memories(ports)` is cheap and keeps nothing: the store is the port, the mirror lives in the
assistant's runtime. Every verb returns a Deferred (the store runs off the reactor) and
errbacks with `LongTermMemoryOff` when the assistant has no store (`memory.enabled` off);
callers that have something else to do then check `available` first.
"""

from twisted.internet import defer

from ai_assistant.memory.longterm import mirror as recall_mirror
from ai_assistant.plumbing.settings import DEFAULTS

# The first listing's size when reading every memory (`list_all` grows it until the listing
# is complete).
SCAN_LIMIT = 500


class LongTermMemoryOff(RuntimeError):
    """The assistant has no long-term store (`memory.enabled` is off)."""


class Memories:
    """
    One assistant's long-term memories (`npc.assistant.memories`).

    Args:
        ports (AssistantPorts): The assistant; its `semantic` port is the store.
    """

    def __init__(self, ports):
        self._ports = ports

    @property
    def available(self):
        """True when the assistant has a long-term store."""
        return self._ports.semantic is not None

    @property
    def opening(self):
        """True while the store is not open yet (one that opens lazily, the game's, says so
        with `is_open`; any other counts as open)."""
        return not getattr(self._ports.semantic, "is_open", True)

    @property
    def ranks_in_database(self):
        """True when the store finds recall's candidates itself (no mirror is kept)."""
        return bool(getattr(self._ports.semantic, "ranks_in_database", False))

    def threshold(self, name):
        """
        A similarity threshold on the scale of the store's embedder.

        The specification's numbers (relevance 0.7, link similarity 0.7) are on a
        transformer-cosine scale. A store whose embedder reports its own calibrated value for
        `name` uses it while the setting is still the specification's default; a game that
        sets another value gets exactly that.

        Args:
            name (str): "relevance_threshold" or "link_similarity".

        Returns:
            float: The threshold to compare a hit's `score` (cosine) against.
        """
        configured = self._ports.settings.get(f"memory.{name}")
        calibrated = getattr(self._ports.semantic, name, None)
        if calibrated is not None and configured == DEFAULTS["memory"][name]:
            return float(calibrated)
        return float(configured)

    # ------------------------------------------------------------------------------------------
    # writing (each one written through to the recall mirror)

    @defer.inlineCallbacks
    def add(self, text, metadata=None):
        """
        Tell the store a claim; the policy decides whether it is stored (`policy`).

        Args:
            text (str): The claim, one fact.
            metadata (dict, optional): Its source, trust, importance, audience, entry...

        Returns:
            Deferred[list[dict]]: What the store returned: `{"id", "memory", "event"}` per
            memory, `event` "DUPLICATE" when an existing one was kept instead.
        """
        metadata = dict(metadata or {})
        stored = yield self._call("add", text, metadata=metadata, infer=False)
        if not self.ranks_in_database:
            recall_mirror.record(self._ports, stored, text, metadata)  # recallable at once
        return stored

    @defer.inlineCallbacks
    def update(self, memory_id, text, metadata=None):
        """
        Rewrite a memory's text (re-embedded) and merge `metadata` into its own; its id (and so
        its links) stays.

        Returns:
            Deferred[dict | None]: The memory as it is now; None for an unknown id.
        """
        updated = yield self._call("update", str(memory_id), text, metadata=metadata)
        if updated and not self.ranks_in_database:
            recall_mirror.record(self._ports, [updated])  # recall reads the new text at once
        return updated

    @defer.inlineCallbacks
    def delete(self, memory_id):
        """Deferred[None]: forget one memory (an unknown id does nothing)."""
        yield self._call("delete", str(memory_id))
        recall_mirror.forget(self._ports, memory_id)

    @defer.inlineCallbacks
    def forget_all(self):
        """Deferred[int]: forget every memory of the assistant (it is being deleted)."""
        count = yield self._call("delete_all")
        recall_mirror.mirror_of(self._ports).clear()
        return count

    # ------------------------------------------------------------------------------------------
    # reading

    def get(self, memory_id):
        """Deferred[dict | None]: one memory, `{"id", "memory", "metadata", "created_at"}`."""
        return self._call("get", str(memory_id))

    def search(self, query, *, limit=10, filters=None):
        """
        The store's own (dense) search: `{"id", "memory", "score", "metadata"}`, best first,
        `score` the cosine. Recall over every tier is `memory.recall`, not this.

        Returns:
            Deferred[list[dict]]
        """
        if filters is None:
            return self._call("search", query, limit=limit)
        return self._call("search", query, limit=limit, filters=filters)

    def list(self, *, limit=100, filters=None):
        """
        Up to `limit` memories in the store's own order; `filters` are exact metadata
        conditions (`{"entry_id": {"in": [...]}}`).

        Returns:
            Deferred[list[dict]]
        """
        if filters is None:
            return self._call("list", limit=limit)
        return self._call("list", limit=limit, filters=filters)

    @defer.inlineCallbacks
    def list_all(self, at_least=SCAN_LIMIT):
        """
        Every memory: a listing of `at_least`, then larger ones (doubled) until one comes back
        short, i.e. complete.

        A store lists in its own order (local qdrant: by point id, a random UUID), not newest
        first, so a listing cut at a fixed size would hide an arbitrary part of a large store,
        new memories included.

        Returns:
            Deferred[list[dict]]
        """
        limit = max(1, int(at_least))
        while True:
            memories = yield self.list(limit=limit)
            if len(memories) < limit:
                return memories
            limit *= 2

    def histories(self, memory_ids):
        """
        What the store recorded of each memory's changes (mem0's own history: `Mem0Store.
        histories`), oldest first; a store that keeps no history gives none.

        Args:
            memory_ids (Iterable[str]): The memories.

        Returns:
            Deferred[dict]: `{memory id: [{"event", "before", "after", "time"}, ...]}`.
        """
        store = self._ports.semantic
        if store is not None and not hasattr(store, "histories"):
            return defer.succeed({})
        return self._call("histories", [str(memory_id) for memory_id in memory_ids])

    def recall_mirror(self, runner=None):
        """
        Deferred[MemoryMirror]: the memories as recall items, read from the store once
        (never fails: unread after a store error, `loaded` False). A store that ranks in its
        database gets an empty mirror, loaded: recall asks the store (`recall_candidates`).

        Args:
            runner (callable, optional): Converts the first listing (the worker pool).
        """
        if self.ranks_in_database:
            mirror = recall_mirror.mirror_of(self._ports)
            mirror.loaded = True
            return defer.succeed(mirror)
        return recall_mirror.ensure_loaded(self._ports, runner)

    def recall_candidates(self, query, entry_ids=(), journal_entries=(), now=None):
        """
        The memories that may answer a query, found by the store's database (a store that
        `ranks_in_database`; see `longterm.pgvector_recall`).

        Args:
            query (str): What recall looks for.
            entry_ids (iterable): Journal entry ids to check for memories made from them.
            journal_entries (iterable): The journal entries recall ranks beside them.
            now (datetime, optional): The current time (the times a query names).

        Returns:
            Deferred[tuple]: `(memories, sources, scope_words)`: memories as listed, each
            with its `cosine` to the query and its `place` in the scope's time order; the
            `entry_ids` that have memories; the scope's word statistics.
        """
        return self._call("recall_candidates", query, entry_ids=entry_ids,
                          journal_entries=journal_entries, now=now)

    # ------------------------------------------------------------------------------------------

    def _call(self, verb, *args, **kwargs):
        store = self._ports.semantic
        if store is None:
            return defer.fail(LongTermMemoryOff(
                "this assistant has no long-term memory (memory.enabled is off)"))
        return defer.maybeDeferred(getattr(store, verb), *args, **kwargs)
