"""
The memory mirror: every consolidated memory, searchable by words and by meaning, beside mem0.

mem0 stays the long-term store. Its own search is dense only here (its qdrant `bm25` slot
needs fastembed's encoder, which downloads at run time), and the local qdrant scans its points
in Python. The mirror keeps, per assistant (`ports.runtime`), the store's memories as
journal-shaped items (`lines.memory_item`) keyed by memory id, in time order, so the journal's
own search (`memory.search`: BM25 with lemmas, speaker and time boosts, fused with a numpy
matrix of the local embedder's vectors) serves them too.

It is loaded once from the store (`store.list`, in the worker pool) on first use and kept up
to date by the store's owner (`longterm.memories.Memories`), which writes through it on every
add, update and delete: no writer of long-term memory touches the mirror. On the reactor only a few
memories at a time are added or dropped; the first read's conversion, the time-ordered
snapshot (`entries()`, an immutable tuple per version), its index and its vectors are made in
the worker pool.
"""

import threading

from twisted.internet import defer

from ai_assistant.memory.audience import PUBLIC, audience_of
from ai_assistant.memory.recall.lines import memory_item
from ai_assistant.memory.search.dense import EmbeddingMatrices
from ai_assistant.memory.search.index import JournalIndexCache
from ai_assistant.plumbing.ports import parse_iso

MIRROR_CACHE = "memory_mirror"
# Mirror versions kept indexed (the current one, and the one a search in flight still reads).
INDEX_VERSIONS = 2


def item_epoch(item):
    """A recall item's time in seconds (its `timestamp`; 0 without one): the corpus's order."""
    moment = parse_iso(item.get("timestamp")) if item.get("timestamp") else None
    return moment.timestamp() if moment else 0.0


def _time_order(pair):
    return pair[0]


class MemoryMirror:
    """
    One assistant's memories in time order, with their BM25 index and vectors.

    Attributes:
        loaded (bool): The store's memories have been read in.
        matrices (EmbeddingMatrices): The memories' unit vectors (built in the worker pool).
        index_cache (JournalIndexCache): The BM25 index of the current version.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._items = {}
        self._snapshot = None
        self.loaded = False
        self.waiting = []  # Deferreds waiting for the first read
        self.matrices = EmbeddingMatrices()
        self.index_cache = JournalIndexCache(INDEX_VERSIONS)

    def __len__(self):
        return len(self._items)

    def merge(self, memories):
        """Add (or refresh) memories as the store lists them (`{"id", "memory", ...}`)."""
        with self._lock:
            for memory in memories or ():
                if memory.get("id") is not None and str(memory.get("memory") or "").strip():
                    item = memory_item(memory)
                    self._items[str(memory["id"])] = (item_epoch(item), item)
            self._snapshot = None

    def mark(self, memory_id, metadata):
        """Merge `metadata` into one memory's (the store marked it: superseded, say)."""
        with self._lock:
            found = self._items.get(str(memory_id))
            if found is not None:
                epoch, old = found
                merged = {**old["metadata"], **metadata}
                self._items[str(memory_id)] = (epoch, {**old, "metadata": merged})  # a new item
                self._snapshot = None

    def forget(self, memory_id):
        """Drop one memory (deleted from the store)."""
        with self._lock:
            if self._items.pop(str(memory_id), None) is not None:
                self._snapshot = None

    def clear(self):
        """Drop every memory (the store forgot them all); the mirror stays loaded, empty."""
        with self._lock:
            self._items.clear()
            self._snapshot = None

    def entries(self):
        """
        The memories as journal-shaped items, oldest first: one tuple per version, so its
        index and its matrix are built once (the items are never changed in place).
        """
        with self._lock:
            if self._snapshot is None:
                items = tuple(item for _, item in sorted(self._items.values(),
                                                         key=_time_order))
                sources = frozenset(str(item["entry_id"]) for item in items
                                    if item.get("entry_id") is not None)  # fmt: skip
                private = sum(1 for item in items if audience_of(item) is not PUBLIC)
                self._snapshot = (items, sources, private)
            return self._snapshot[0]

    def private_count(self):
        """How many memories are private to someone (told in a whisper)."""
        self.entries()
        return self._snapshot[2]

    def source_entries(self):
        """The ids (as text) of the journal entries the memories were made from."""
        self.entries()
        return self._snapshot[1]


def mirror_of(ports):
    """The assistant's `MemoryMirror` (empty and not loaded at first)."""
    return ports.runtime.cache(MIRROR_CACHE, MemoryMirror)


def ensure_loaded(ports, runner=None):
    """
    Read the store's memories into the mirror once (the store lists them off the reactor).

    Args:
        ports (AssistantPorts): The assistant.
        runner (callable, optional): `runner(func, *args) -> Deferred` that converts what the
            store listed (the worker pool: `pipeline.loaded_mirror` passes it); inline without.

    Returns:
        Deferred[MemoryMirror]: Never fails: a store error is logged and the mirror stays
        unloaded (the next call tries again; recall goes on with the journal alone).
    """
    mirror = mirror_of(ports)
    if mirror.loaded or getattr(ports.semantic, "list", None) is None:
        return defer.succeed(mirror)  # loaded, or no store that can list its memories
    waiting = defer.Deferred()
    mirror.waiting.append(waiting)
    if len(mirror.waiting) > 1:
        return waiting  # a read is under way: wait for it

    def loaded(memories):
        converting = (runner or defer.maybeDeferred)(mirror.merge, memories)
        return converting.addCallback(lambda _: setattr(mirror, "loaded", True))

    def failed(failure):
        ports.log(f"{ports.name}: reading the long-term memories failed: "
                  f"{failure.getErrorMessage()}")

    def release(_):
        waiting_now, mirror.waiting = mirror.waiting, []
        for each in waiting_now:
            each.callback(mirror)

    reading = defer.maybeDeferred(ports.semantic.list,
                                  limit=ports.settings.get("recall.mirror_max"))
    reading.addCallbacks(loaded, failed).addBoth(release)
    return waiting


def record(ports, stored, text=None, metadata=None):
    """
    Mirror memories the store just added or rewrote (and what it marked on older ones).

    Args:
        ports (AssistantPorts): The assistant.
        stored (list[dict]): `{"id", "memory"}` (and optionally "metadata") per memory, as
            `store.add`/`store.update` return them; a "DUPLICATE" event adds nothing new.
        text (str, optional): The text stored, for items that do not repeat it.
        metadata (dict, optional): The metadata stored, for items that do not carry it.
    """
    mirror = mirror_of(ports)
    memories = []
    for item in stored or ():
        if not isinstance(item, dict) or item.get("event") == "DUPLICATE":
            continue
        memories.append({"id": item.get("id"), "memory": item.get("memory") or text,
                         "metadata": item.get("metadata") or metadata or {},
                         "created_at": item.get("created_at")})  # fmt: skip
    mirror.merge(memories)
    for item in stored or ():  # a correction: the facts it superseded come after it now
        marked = (item.get("marked") or {}) if isinstance(item, dict) else {}
        for old_id, metadata in marked.items():
            mirror.mark(old_id, metadata)


def forget(ports, memory_id):
    """Drop a memory deleted from the store from the mirror."""
    mirror_of(ports).forget(memory_id)
