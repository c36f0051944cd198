"""
The provider adapter at the bottom of long-term memory: mem0 behind the `SemanticPort`.

The embedded default needs no server, no API key and no network: mem0 with qdrant in local
(on-disk, in-process) mode under the game's `server/ai_assistant_data/`, and the local
WordLlama embedder (`ai_assistant.memory.embedder`). A game may switch to any store, embedder
or LLM mem0 supports by giving a mem0 config dict in the `memory.mem0` setting; it is merged
over our default, so `{"vector_store": {"provider": "pgvector", "config": {...}}}` replaces only
the store.

Nothing but the owner (`longterm.memories.Memories`) calls this store: the owner keeps the
recall mirror in step with every write. Rules this module keeps:

- mem0 reads `MEM0_TELEMETRY` and `MEM0_DIR` when it is first imported, so
  `configure_mem0_environment` sets both before any import of mem0 here (telemetry off, its
  folder under the game's `server/`), and turns the flag off again if mem0 was imported first.
- qdrant's local mode allows one client per path and process, so every assistant of a game
  shares one `mem0.Memory` per data folder (reference-counted); each assistant sees it through
  its own `Mem0Store`, scoped by its key (mem0 `user_id`), so one NPC never reads or
  deletes another's memories. In that embedded store each assistant also has its own
  collection on the shared client (`longterm.vector_collections`): the local qdrant filters in
  Python, so a shared collection would make every query scan every assistant's memories.
- Every mem0 call runs off the reactor through `runner` (the bounded CPU pool's `run_cpu_bound` by
  default) and returns a Deferred; calls on one shared store are serialised by a lock because
  the local qdrant client is not meant for concurrent writers.
- `search` asks mem0 for every candidate (threshold 0: its default 0.1 drops true hits from a
  static embedder) and reports each hit's cosine similarity as `score`, so callers apply the
  embedder's calibrated thresholds (`relevance_threshold`, `link_similarity`).
- mem0 with `infer=False` does no de-duplication. What a new text does to the memories already
  stored (kept instead as a duplicate, stored superseding what it corrects, stored beside) is
  the policy's decision (`longterm.policy.judge_claim`, given to the store as `judge`); the
  store finds the current memories most like the text, asks the judge and applies its verdict,
  all under its lock, so two texts never race past each other.
"""

import copy
import logging
import os
import sys
import threading
from datetime import UTC, datetime

from ai_assistant.memory.longterm import mem0_history, pgvector_recall, pgvector_store
from ai_assistant.memory.longterm.policy import COMPARED, judge_claim
from ai_assistant.memory.longterm.store_breaker import StoreBreaker
from ai_assistant.memory.longterm.supersede import is_superseded
from ai_assistant.memory.longterm.vector_collections import AssistantCollections
from ai_assistant.memory.persona import ASSISTANT_FACT_EXTRACTION_PROMPT
from ai_assistant.plumbing.settings import deep_merge

DATA_FOLDER = "ai_assistant_data"
COLLECTION = "ai_assistant"
# Placeholder credentials for mem0's default OpenAI LLM/embedder objects, which it builds at
# start-up even when they are never called (mechanical mode, our own embedder).
_UNUSED_KEY = "unused-offline"

# Process-wide, not per assistant: embedded qdrant allows one client per data folder, so every
# assistant whose store lives in the same folder shares one opened mem0 instance (keyed by
# the vector store's config); each assistant still sees only its own memories (user_id).
_stores = {}
_stores_lock = threading.Lock()

MAX_SUPERSEDE_HOPS = 50  # a chain of corrections followed to the current fact at most this far


def configure_mem0_environment(data_dir):
    """
    Turn mem0's telemetry off and keep its files under `data_dir`, before mem0 is imported.

    Args:
        data_dir (str): The semantic tier's folder.

    Returns:
        str: The folder mem0 uses for its own files (`<data_dir>/mem0`).
    """
    # mem0 logs every insert at INFO, and warns on every start that spaCy and fastembed (which
    # we leave out on purpose: both fetch models from the network) are missing.
    logging.getLogger("mem0").setLevel(logging.WARNING)
    for quiet in ("mem0.utils.spacy_models", "mem0.vector_stores.qdrant"):
        logging.getLogger(quiet).setLevel(logging.ERROR)
    os.environ["MEM0_TELEMETRY"] = "False"
    # The first folder wins: mem0 reads it once per process, at import (and creates it).
    os.environ.setdefault("MEM0_DIR", os.path.join(data_dir, "mem0"))
    if "mem0" not in sys.modules:
        return os.environ["MEM0_DIR"]
    try:
        import mem0.memory.main as mem0_main
        import mem0.memory.telemetry as mem0_telemetry
    except ImportError:  # pragma: no cover - mem0ai is a dependency
        return os.environ["MEM0_DIR"]
    # Imported earlier by someone who did not set the flag: switch it off where it is read.
    mem0_telemetry.MEM0_TELEMETRY = False
    mem0_main.MEM0_TELEMETRY = False
    return os.environ["MEM0_DIR"]


def default_mem0_config(settings, data_dir, embedder=None, database=None):
    """
    Our default mem0 config, with the game's `memory.mem0` merged over it.

    Args:
        settings (conf.Settings): The assistant's settings.
        data_dir (str): Folder for the local vector store and mem0's history database.
        embedder (LocalEmbedder, optional): The local embedder (sets the vector size).
        database (dict, optional): The game's Django database settings: the postgres store's
            database when `memory.postgres_url` names none.

    Returns:
        tuple: `(config dict for mem0.Memory.from_config, uses_local_embedder bool)`.
    """
    override = copy.deepcopy(settings.get("memory.mem0") or {})
    dims = embedder.dims if embedder is not None else 256
    llm = settings.get("llm") or {}
    llm_config = {"model": llm.get("model") or "gpt-4o-mini", "api_key": _UNUSED_KEY}
    if llm.get("api_key"):
        llm_config["api_key"] = llm["api_key"]
    if llm.get("base_url"):
        llm_config["openai_base_url"] = llm["base_url"]
    config = {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": COLLECTION,
                "path": os.path.join(data_dir, "qdrant"),
                "embedding_model_dims": dims,
                "on_disk": True,
            },
        },
        # Replaced by our local embedder after start-up unless the game configures one.
        "embedder": {"provider": "openai", "config": {"api_key": _UNUSED_KEY}},
        "llm": {"provider": "openai", "config": llm_config},
        "history_db_path": os.path.join(data_dir, "history.db"),
        "custom_instructions": ASSISTANT_FACT_EXTRACTION_PROMPT,
    }
    if pgvector_store.is_postgres(settings):  # `memory.store`: the embedded one or PostgreSQL
        config["vector_store"] = pgvector_store.vector_store_config(
            pgvector_store.database_url(settings, database), dims)
    uses_local_embedder = "embedder" not in override
    for section in ("vector_store", "embedder", "llm"):
        chosen = (override.get(section) or {}).get("provider")
        placeholder = section == "embedder" and section in override
        if placeholder or (chosen and chosen != config[section]["provider"]):
            # the game's own provider: our provider's options would not fit it
            del config[section]
    return deep_merge(config, override), uses_local_embedder


class _SharedStore:
    """One mem0.Memory per data folder, shared by every assistant of the process."""

    def __init__(self, memory, embedder, path, in_database=False):
        self.memory = memory
        self.collections = AssistantCollections(memory)
        self.embedder = embedder
        self.path = path
        self.lock = threading.Lock()
        self.users = 0
        # the postgres store: recall's candidates come from the database, and a breaker
        # stands in front of it (`store_breaker`)
        self.in_database = in_database
        self.breaker = StoreBreaker("PostgreSQL") if in_database else None


def _open_shared(config, uses_local_embedder, embedder, path):
    from mem0 import Memory

    memory = Memory.from_config(config)
    if uses_local_embedder:
        from ai_assistant.memory.longterm.mem0_embedding import Mem0Embedder  # (mem0 is in)
        memory.embedding_model = Mem0Embedder(embedder)
    in_database = pgvector_store.is_ours(config.get("vector_store"))
    if in_database:
        pgvector_store.limit_waits(memory.vector_store)
        pgvector_store.semantic_search_only(memory.vector_store)  # ranks as the embedded store
    return _SharedStore(memory, embedder if uses_local_embedder else None, path, in_database)


def _close_memory(memory):
    try:
        memory.close()
    except Exception:  # closing is best effort; the process may be going down
        pass
    store = getattr(memory, "vector_store", None)
    # qdrant's client, or the connection pool of the pgvector store
    client = getattr(store, "client", None) or getattr(store, "connection_pool", None)
    if client is not None:
        try:
            client.close()
        except Exception:
            pass


def _default_runner(func, *args, **kwargs):
    from ai_assistant.plumbing.threads import run_cpu_bound

    return run_cpu_bound(func, *args, **kwargs)


class Mem0Store:
    """
    One assistant's view of the mem0 store (implements `ports.SemanticPort`).

    Args:
        shared (_SharedStore): The process-wide mem0 store for this data folder.
        key (str): The assistant's key; its memories are stored under mem0 `user_id=key`.
        judge (callable, optional): `judge(text, metadata, existing, duplicate_similarity=)
            -> policy.Verdict`, asked before each `add` without inference (None: every text
            is stored as it comes).
        runner (callable, optional): `runner(func, *args, **kwargs) -> Deferred` that runs
            blocking work; the bounded pool by default. Tests pass a synchronous one.
        log (callable, optional): `log(message)`.

    Attributes:
        relevance_threshold (float): Calibrated cosine cut-off for "relevant to a query".
        link_similarity (float): Calibrated cosine cut-off for an A-MEM link.
        duplicate_similarity (float): Cosine at or above which `add` skips a duplicate.
    """

    def __init__(self, shared, key, *, judge=None, runner=None, log=None):
        self._shared = shared
        self.key = str(key)
        self._judge = judge
        self._runner = runner or _default_runner
        self._log = log if log is not None else (lambda message: None)
        self._closed = False
        embedder = shared.embedder
        self.embedder_name = embedder.name if embedder is not None else "mem0-configured"
        self.relevance_threshold = embedder.relevance_threshold if embedder else None
        self.link_similarity = embedder.link_similarity if embedder else None
        self.duplicate_similarity = embedder.duplicate_similarity if embedder else 0.97

    # ------------------------------------------------------------------------------------------
    # the port

    def add(self, text, *, metadata=None, infer=False):
        """
        Store a text (or, with `infer=True`, the facts an LLM extracts from it).

        Returns:
            Deferred[list[dict]]: The stored memories, `{"id", "memory", "event"}` each;
            `event` is "DUPLICATE" when the judge kept an existing memory instead. A memory
            stored superseding others also has `supersedes` (their ids) and `marked`
            (`{their id: the metadata merged into it}`).
        """
        return self._run(self._add, str(text), dict(metadata or {}), bool(infer))

    def search(self, query, *, limit=10, filters=None):
        """
        Deferred[list[dict]]: `{"id", "memory", "score", "rank_score", "metadata"}`, best first.

        `score` is the cosine similarity (the scale the calibrated thresholds use);
        `rank_score` is mem0's score that orders the results (meaning and its entity boosts,
        the same on both memory stores: `pgvector_store.semantic_search_only`).
        `filters` are extra metadata conditions (mem0 syntax), e.g. `{"entry_id": "abc"}`.
        """
        return self._run(self._search_current_first, str(query), int(limit), dict(filters or {}))

    def get(self, memory_id):
        """Deferred[dict or None]: the memory, or None if unknown or another assistant's."""
        return self._run(self._get, str(memory_id))

    def delete(self, memory_id):
        """Deferred[None]. Deleting an unknown (or another assistant's) id does nothing."""
        return self._run(self._delete, str(memory_id))

    def update(self, memory_id, text, *, metadata=None):
        """
        Deferred[dict or None]: rewrite a memory's text (re-embedded) and merge `metadata` into
        its own; its id stays, so its links do. None for an unknown (or another's) id.
        """
        return self._run(self._update, str(memory_id), str(text), dict(metadata or {}))

    def list(self, *, limit=100, filters=None):
        """
        Deferred[list[dict]]: this assistant's memories (`{"id", "memory", "metadata"}`).

        `filters` (an extension of the port) are exact metadata conditions, e.g.
        `{"entry_id": "abc"}`: a lookup that, unlike `search`, needs no query text.
        """
        return self._run(self._list, int(limit), dict(filters or {}))

    def histories(self, memory_ids):
        """
        mem0's own history of each of these memories (`mem0.Memory.history`): every ADD,
        UPDATE and DELETE mem0 recorded, with the text before and after and when, oldest
        first. mem0 keeps it in its history database (SQLite, in the data folder, whichever
        vector store holds the memories), shared by every assistant of the folder and keyed by
        memory id alone, so an id that is not a memory of this assistant gets no history.

        Args:
            memory_ids (Iterable[str]): The memories (a page of them: one worker call).

        Returns:
            Deferred[dict]: `{memory id: [{"event", "before", "after", "time"}, ...]}`;
            `event` is mem0's ("ADD", "UPDATE", "DELETE"), `time` when it happened.
        """
        return self._run(self._histories, [str(memory_id) for memory_id in memory_ids])

    def delete_all(self):
        """
        Deferred[int]: forget every memory of this assistant (it is being deleted): its
        points in the shared vector store and their lines in mem0's history database, which
        keeps a deleted memory's text. Other assistants' memories are untouched.
        """
        return self._run(self._delete_all)

    @property
    def ranks_in_database(self):
        """True when the database finds recall's candidates (`recall_candidates`)."""
        return self._shared.in_database

    def recall_candidates(self, query, *, entry_ids=(), journal_entries=(), now=None,
                          per_half=pgvector_recall.CANDIDATES_PER_HALF):
        """
        The memories that may answer a query, found by the database (the postgres store).

        Args:
            query (str): What recall looks for.
            entry_ids (iterable): Journal entry ids to check for memories made from them.
            journal_entries (iterable): The journal entries recall ranks beside them (their
                words' statistics in the scope are read too).
            now (datetime, optional): The current time (the times a query names).
            per_half (int): Candidates by vector and by words (each).

        Returns:
            Deferred[tuple]: `(memories, sources, scope_words)` (`pgvector_recall`'s); errbacks
            with `MemoryStoreUnavailable` while the database is unreachable.
        """
        if not self.ranks_in_database or self._closed:
            from twisted.internet import defer

            return defer.fail(RuntimeError("the semantic store is closed" if self._closed else
                                           "this store keeps no memories in a database"))
        # a read: it needs no lock (PostgreSQL isolates it), so it never waits behind a write
        return self._runner(self._guarded, self._recall_candidates, str(query),
                            tuple(str(entry) for entry in entry_ids), int(per_half),
                            tuple(journal_entries), now)

    def close(self):
        """Let go of the shared store; the last user closes the qdrant client."""
        if self._closed:
            return
        self._closed = True
        _release(self._shared)

    # ------------------------------------------------------------------------------------------
    # blocking work (worker thread)

    def _run(self, func, *args):
        if self._closed:
            from twisted.internet import defer

            return defer.fail(RuntimeError("the semantic store is closed"))
        return self._runner(self._guarded, self._locked, func, *args)

    def _guarded(self, func, *args):
        """`func(*args)` through the database's breaker, if the store has one: while it is
        open the call fails at once, before it could wait for the lock or a connection."""
        if self._shared.breaker is None:
            return func(*args)
        return self._shared.breaker.call(func, *args, log=self._log)

    def _recall_candidates(self, query, entry_ids, per_half, journal_entries=(), now=None):
        if not query.strip():
            return [], set(), pgvector_recall.no_words()
        vector = self._memory.embedding_model.embed(query, "search")
        return pgvector_recall.recall_candidates(
            self._memory.vector_store.connection_pool, self.key, vector, query, entry_ids,
            per_half, journal_entries=journal_entries, now=now)

    def _locked(self, func, *args):
        with self._shared.lock:
            self._shared.collections.bind(self.key)
            return func(*args)

    @property
    def _memory(self):
        return self._shared.memory

    def _scope(self, extra=None):
        return {**(extra or {}), "user_id": self.key}

    def _add(self, text, metadata, infer):
        if not text.strip():
            raise ValueError("cannot store an empty memory")
        verdict = None
        if not infer and self._judge is not None:
            existing = self._current(self._search(text, COMPARED, {}))
            verdict = self._judge(text, metadata, existing,
                                  duplicate_similarity=self.duplicate_similarity)
            if not verdict.stores:
                kept = verdict.existing
                return [{"id": kept["id"], "memory": kept["memory"], "event": "DUPLICATE"}]
            metadata = verdict.new_metadata(metadata)
        result = self._memory.add(text, user_id=self.key, metadata=metadata, infer=infer)
        stored = []
        for item in (result or {}).get("results", []):
            stored.append({"id": str(item.get("id")), "memory": item.get("memory", text),
                           "event": item.get("event", "ADD")})
        if verdict and stored:  # the mirror records what the verdict added (disputed_with...)
            stored[0]["metadata"] = dict(metadata)
        marks = verdict.marks(stored[0]["id"], _now()) if verdict and stored else ()
        for memory, mark in marks:
            self._memory.update(memory["id"], text=memory["memory"], metadata=mark)
        if marks:
            stored[0]["marked"] = {memory["id"]: mark for memory, mark in marks}
            if metadata.get("supersedes"):
                stored[0]["supersedes"] = list(metadata["supersedes"])
        self._fill_terms()
        return stored

    def _fill_terms(self):  # on the postgres store the writer gives its rows their terms
        if self._shared.in_database:
            pgvector_recall.fill_after_write(self._memory.vector_store.connection_pool,
                                             self.key, self._log)

    def _search_current_first(self, query, limit, filters):
        """
        `_search`, where a superseded hit brings the current memory that superseded it along
        (just before it, with its similarity, when it was not found itself): recall then has
        the current fact to prefer however many of its predecessors look more like the query.
        """
        hits = self._search(query, limit, filters)
        if filters or not any(is_superseded(hit) for hit in hits):
            return hits
        found = {hit["id"] for hit in hits}
        merged = []
        for hit in hits:
            if is_superseded(hit):
                for current in self._current([hit]):
                    if current["id"] not in found:
                        found.add(current["id"])
                        merged.append(current)
            merged.append(hit)
        return merged[:max(1, limit)]

    def _current(self, hits):
        """
        The current memories behind search hits: a superseded hit stands for the memory that
        superseded it (followed to the latest, with the hit's similarity), so a long run of
        corrections never hides the current fact behind its predecessors.
        """
        current, seen = [], set()
        for hit in hits:
            found, hops = hit, 0
            while is_superseded(found) and hops < MAX_SUPERSEDE_HOPS:
                successor = self._get(str(found["metadata"]["superseded_by"]))
                if successor is None:
                    break
                found, hops = {**successor, "score": hit["score"]}, hops + 1
            if not is_superseded(found) and found["id"] not in seen:
                seen.add(found["id"])
                current.append(found)
        return current

    def _search(self, query, limit, filters):
        if not query.strip():
            return []
        result = self._memory.search(
            query, top_k=max(1, limit), filters=self._scope(filters), threshold=0.0,
            explain=True,
        )
        hits = []
        for item in (result or {}).get("results", []):
            details = item.get("score_details") or {}
            cosine = float(details.get("semantic_score", item.get("score") or 0.0))
            if cosine <= 0.0:
                # nothing alike: the local qdrant drops a negative cosine (below threshold 0)
                # while mem0's pgvector clamps it to 0 and keeps it, so the postgres store
                # would list unrelated memories, in no order, where the embedded one has none
                continue
            hits.append({
                "id": str(item.get("id")),
                "memory": item.get("memory", ""),
                "score": cosine,
                "rank_score": float(item.get("score") or 0.0),
                "metadata": dict(item.get("metadata") or {}),
                "created_at": item.get("created_at"),
            })
        return hits

    def _get(self, memory_id):
        try:
            item = self._memory.get(memory_id)
        except Exception:
            # qdrant rejects ids that are not UUIDs/ints: for the caller that is "not found"
            return None
        if not item or item.get("user_id") != self.key:
            return None
        return {"id": str(item["id"]), "memory": item.get("memory", ""),
                "metadata": dict(item.get("metadata") or {}),
                "created_at": item.get("created_at")}

    def _delete(self, memory_id):
        if self._get(memory_id) is None:
            return None
        self._memory.delete(memory_id)
        return None

    def _update(self, memory_id, text, metadata):
        if self._get(memory_id) is None:
            return None
        self._memory.update(memory_id, text=text, metadata=metadata or None)
        self._fill_terms()
        return self._get(memory_id)

    def _list(self, limit, filters):
        result = self._memory.get_all(filters=self._scope(filters), top_k=max(1, limit))
        return [{"id": str(item.get("id")), "memory": item.get("memory", ""),
                 "metadata": dict(item.get("metadata") or {}),
                 "created_at": item.get("created_at")}
                for item in (result or {}).get("results", [])]

    def _histories(self, memory_ids):
        found = {}
        for memory_id in dict.fromkeys(memory_ids):
            if self._get(memory_id) is None:  # unknown, or another assistant's
                continue
            found[memory_id] = [mem0_history.change(row) for row in self._memory.history(memory_id)]
        return found

    def _delete_all(self):
        ids = []
        while True:  # listed in pages: a store caps what one listing returns
            page = [item["id"] for item in self._list(1000, {}) if item["id"] not in ids]
            if not page:
                break
            ids += page
            for memory_id in page:
                self._memory.delete(memory_id)
        mem0_history.purge(self._memory, ids, self.key)
        self._shared.collections.drop(self.key)
        return len(ids)


def _now():
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_semantic_store(settings, data_dir, key="assistant", *, judge=judge_claim, runner=None,
                        log=None, database=None):
    """
    Open (or join) the mem0 store for one assistant.

    Blocking (loads the embedder, opens qdrant): call it at server start, or in a worker.

    Args:
        settings (conf.Settings): The assistant's settings (`memory.mem0`, `llm`).
        data_dir (str): The data folder (the game's is `server/ai_assistant_data`).
        key (str): The assistant's key (scopes its memories).
        judge (callable, optional): What a new text does to the stored memories (the
            project's policy, `policy.judge_claim`, unless a caller gives another).
        runner (callable, optional): Runs blocking calls, returns Deferreds.
        log (callable, optional): `log(message)`.
        database (dict, optional): The game's Django database settings (`memory.store`
            "postgres" keeps the memories there unless `memory.postgres_url` names another).

    Returns:
        Mem0Store or None: None when `memory.enabled` is False.
    """
    if not settings.get("memory.enabled"):
        return None
    data_dir = os.path.abspath(data_dir)
    os.makedirs(data_dir, exist_ok=True)  # mem0's history database, whichever vector store
    configure_mem0_environment(data_dir)
    override = settings.get("memory.mem0") or {}
    embedder = None
    if "embedder" not in override:
        from ai_assistant.memory.embedder import get_embedder

        embedder = get_embedder()
    config, uses_local = default_mem0_config(settings, data_dir, embedder, database)
    path_key = repr(config.get("vector_store"))
    with _stores_lock:
        shared = _stores.get(path_key)
        if shared is None:
            pgvector_store.prepare(config.get("vector_store"))
            shared = _open_shared(config, uses_local, embedder, path_key)
            _stores[path_key] = shared
        shared.users += 1
    return Mem0Store(shared, key, judge=judge, runner=runner, log=log)


def _release(shared):
    with _stores_lock:
        shared.users -= 1
        if shared.users > 0:
            return
        _stores.pop(shared.path, None)
    _close_memory(shared.memory)


def close_all_stores():
    """Close every open store (server shutdown). Safe to call more than once."""
    with _stores_lock:
        shared_stores = list(_stores.values())
        _stores.clear()
    for shared in shared_stores:
        shared.users = 0
        _close_memory(shared.memory)
