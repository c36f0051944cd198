"""
Moving every assistant's long-term memories between the embedded store and PostgreSQL.

`move_memories(source, target)` copies every memory (id, vector, payload) of every assistant,
in batches, from one store to the other, then checks the result: the same count per assistant
on both sides, and a sample of vectors equal. The memories keep their ids, so links, journal
references and superseded marks still point at them.

- Idempotent, and it resumes after a kill -9: each batch is written (committed) before the next
  is read, and a memory the target already holds is written again only when the source's copy
  is newer (`updated_at`, else `created_at`). Running the move again after an interruption
  finishes it; running it after it finished writes nothing.
- The game keeps running: the embedded store's client is the game's own (qdrant's local mode
  allows one per folder), used batch by batch under the shared store's lock, so assistants'
  own calls interleave with the move. A memory written to the source during a move is caught
  by the next run; the README's steps run the move, switch `memory.store`, reload, and run it
  once more.
- The source is left as it was: moving back is the same call the other way round.

Blocking throughout: the caller runs it in a worker thread.
"""

import json
import random
from collections import Counter
from contextlib import nullcontext

import numpy as np

from ai_assistant.memory.longterm.vector_collections import collection_name

BATCH = 256
SAMPLE = 20  # vectors compared per assistant after a move
TOLERANCE = 1e-5  # both stores keep float32


def _stamp(payload):
    payload = payload or {}
    return str(payload.get("updated_at") or payload.get("created_at") or "")


class EmbeddedVectors:
    """
    The embedded store's points: one qdrant collection per assistant (`<base>-<scope>`), and
    the single collection of the older layout when it is still there.

    Args:
        client (QdrantClient): The game's local client (`mem0_store` opens one per folder).
        base (str): The configured collection name.
        dims (int): The vector size, for the collections a move creates.
        lock (context manager, optional): Held around each client call (the shared store's).
    """

    def __init__(self, client, base, dims, lock=None):
        self.client, self.base, self.dims = client, base, int(dims)
        self.lock = lock or nullcontext()

    def _collections(self):
        with self.lock:
            names = [item.name for item in self.client.get_collections().collections]
        return [name for name in names if name == self.base or name.startswith(self.base + "-")]

    def batches(self, size=BATCH):
        """Yield lists of `(id, vector, payload)`."""
        for name in self._collections():
            offset = None
            while True:
                with self.lock:
                    records, offset = self.client.scroll(
                        name, limit=size, offset=offset, with_payload=True, with_vectors=True)
                if records:
                    yield [(str(r.id), list(r.vector), dict(r.payload or {})) for r in records]
                if offset is None:
                    break

    def counts(self):
        """`{scope: number of memories}`."""
        counted = Counter()
        for name in self._collections():
            offset = None
            while True:
                with self.lock:
                    records, offset = self.client.scroll(
                        name, limit=1000, offset=offset, with_payload=["user_id"])
                counted.update(str((r.payload or {}).get("user_id")) for r in records)
                if offset is None:
                    break
        return dict(counted)

    def _retrieve(self, scope, ids, vectors):
        name = collection_name(self.base, scope)
        with self.lock:
            if not self.client.collection_exists(name):
                return []
            return self.client.retrieve(name, ids=list(ids), with_payload=True,
                                        with_vectors=vectors)

    def stamps(self, scope, ids):
        """`{id: stamp}` of the given ids the store holds for `scope`."""
        return {str(r.id): _stamp(r.payload) for r in self._retrieve(scope, ids, False)}

    def vectors(self, scope, ids):
        """`{id: vector}` of the given ids in `scope`."""
        return {str(r.id): list(r.vector) for r in self._retrieve(scope, ids, True)}

    def ids(self, scope):
        """Every id of `scope` (in its own collection)."""
        name = collection_name(self.base, scope)
        found, offset = [], None
        while True:
            with self.lock:
                if not self.client.collection_exists(name):
                    return found
                records, offset = self.client.scroll(name, limit=1000, offset=offset)
            found += [str(r.id) for r in records]
            if offset is None:
                return found

    def settle(self):
        """After a move into it: nothing to do (qdrant keeps its indexes as it writes)."""

    def write(self, scope, points):
        """Upsert `(id, vector, payload)` points into the scope's own collection."""
        from qdrant_client import models

        name = collection_name(self.base, scope)
        with self.lock:
            if not self.client.collection_exists(name):
                self.client.create_collection(name, vectors_config=models.VectorParams(
                    size=self.dims, distance=models.Distance.COSINE, on_disk=True))
            self.client.upsert(name, points=[
                models.PointStruct(id=point_id, vector=vector, payload=payload)
                for point_id, vector, payload in points])


class PostgresVectors:
    """
    The postgres store's rows (`pgvector_store.TABLE`).

    Args:
        url (str): The database's connection string; its schema is prepared already.
    """

    def __init__(self, url):
        from ai_assistant.memory.longterm.pgvector_store import TABLE

        self.url, self.table = url, TABLE

    def _query(self, statement, params=()):
        import psycopg

        with psycopg.connect(self.url) as connection:
            return connection.execute(statement, params).fetchall()

    def batches(self, size=BATCH):
        last = "00000000-0000-0000-0000-000000000000"
        while True:
            rows = self._query(f"SELECT id, vector::text, payload FROM {self.table} "
                               "WHERE id > %s ORDER BY id LIMIT %s", (last, size))
            if not rows:
                return
            yield [(str(r[0]), json.loads(r[1]), dict(r[2] or {})) for r in rows]
            last = rows[-1][0]

    def counts(self):
        rows = self._query(f"SELECT payload->>'user_id', count(*) FROM {self.table} GROUP BY 1")
        return {str(scope): int(count) for scope, count in rows}

    def stamps(self, scope, ids):
        rows = self._query(f"SELECT id, payload FROM {self.table} WHERE id = ANY(%s::uuid[]) "
                           "AND payload->>'user_id' = %s", (list(ids), scope))
        return {str(r[0]): _stamp(r[1]) for r in rows}

    def vectors(self, scope, ids):
        rows = self._query(f"SELECT id, vector::text FROM {self.table} "
                           "WHERE id = ANY(%s::uuid[]) AND payload->>'user_id' = %s",
                           (list(ids), scope))
        return {str(r[0]): json.loads(r[1]) for r in rows}

    def ids(self, scope):
        rows = self._query(f"SELECT id FROM {self.table} WHERE payload->>'user_id' = %s",
                           (scope,))
        return [str(r[0]) for r in rows]

    def settle(self):
        """After a move into it: the planner's statistics of the table, brought up to date."""
        from ai_assistant.memory.longterm.pgvector_store import analyze

        analyze(self.url, self.table)

    def write(self, scope, points):
        import psycopg

        from ai_assistant.memory.longterm.pgvector_recall import write_memories

        # with the moved rows' terms and times, rather than by each assistant's first recall
        # after the move, while a player waits
        with psycopg.connect(self.url) as connection:
            write_memories(connection, points, [scope], self.table)


def move_memories(source, target, *, batch=BATCH, sample=SAMPLE, progress=None):
    """
    Copy every memory of `source` into `target`, then check the copy (see the module notes).

    Args:
        source, target: `EmbeddedVectors` or `PostgresVectors`.
        batch (int): Memories read and written per step.
        sample (int): Vectors compared per assistant.
        progress (callable, optional): `progress(copied, skipped)` after each batch.

    Returns:
        dict: `{"copied", "skipped", "scopes", "memories", "checked", "problems"}`;
        `problems` lists what the check found (empty when the move is complete).
    """
    copied = skipped = 0
    for points in source.batches(batch):
        by_scope = {}
        for point in points:
            by_scope.setdefault(str(point[2].get("user_id")), []).append(point)
        for scope, mine in by_scope.items():
            held = target.stamps(scope, [point[0] for point in mine])
            fresh = [point for point in mine
                     if point[0] not in held or _stamp(point[2]) > held[point[0]]]
            if fresh:
                target.write(scope, fresh)
            copied, skipped = copied + len(fresh), skipped + len(mine) - len(fresh)
        if progress is not None:
            progress(copied, skipped)
    if copied:
        target.settle()
    report = verify(source, target, sample=sample)
    return {"copied": copied, "skipped": skipped, **report}


def verify(source, target, *, sample=SAMPLE):
    """
    Compare two stores: every assistant's count, and a random sample of its vectors.

    Returns:
        dict: `{"scopes", "memories", "checked", "problems"}`.
    """
    problems, checked = [], 0
    wanted, held = source.counts(), target.counts()
    for scope, count in sorted(wanted.items()):
        if held.get(scope, 0) < count:
            problems.append(f"{scope}: {held.get(scope, 0)} of {count} memories moved")
            continue
        ids = source.ids(scope)
        chosen = random.sample(ids, min(sample, len(ids)))
        theirs, ours = source.vectors(scope, chosen), target.vectors(scope, chosen)
        for memory_id in chosen:
            checked += 1
            if memory_id not in ours or not np.allclose(
                    theirs[memory_id], ours[memory_id], atol=TOLERANCE):
                problems.append(f"{scope}: memory {memory_id} differs after the move")
    return {"scopes": len(wanted), "memories": sum(wanted.values()), "checked": checked,
            "problems": problems}


MOVER_KEY = "ai_assistant_store_move"  # the scope the move joins the embedded store under


def open_stores(tree, data_dir, database=None):
    """
    Both stores of a game, for a move; blocking (run it in a worker).

    Args:
        tree (dict): The game's settings tree (`memory.postgres_url`, `memory.mem0`).
        data_dir (str): The game's data folder (the embedded store's).
        database (dict, optional): The game's Django database settings.

    Returns:
        tuple: `(EmbeddedVectors, PostgresVectors, close)`; call `close()` when done.

    Raises:
        pgvector_store.PostgresStoreError: No PostgreSQL with pgvector to move to or from.
    """
    from ai_assistant.memory.longterm import mem0_store, pgvector_store
    from ai_assistant.plumbing.settings import Settings

    postgres = Settings(tree, {"memory.store": "postgres"})
    url = pgvector_store.database_url(postgres, database)  # refuses before anything opens
    # joins the game's own embedded store (one local client per folder and process)
    joined = mem0_store.make_semantic_store(Settings(tree, {"memory.store": "embedded"}),
                                            data_dir, MOVER_KEY)
    if joined is None:
        raise ValueError("memory.enabled is off: there is no long-term memory to move")
    shared = joined._shared
    dims = shared.embedder.dims
    pgvector_store.prepare(pgvector_store.vector_store_config(url, dims))
    embedded = EmbeddedVectors(shared.memory.vector_store.client, mem0_store.COLLECTION, dims,
                               lock=shared.lock)
    return embedded, PostgresVectors(url), joined.close
