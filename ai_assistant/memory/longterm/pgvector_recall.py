"""
Recall candidates from the postgres memory store: the hybrid search as one query.

On the embedded store recall ranks over a mirror of every memory held in the game process
(`longterm.mirror`). On the postgres store the database finds the candidates instead, so the
game process holds no per-assistant corpus: one statement, within the assistant's scope,

- the `per_half` memories nearest the query's vector (pgvector's cosine distance `<=>`, exact
  within the scope: the scope index narrows the rows, see `pgvector_store`);
- the `per_half` memories that best match its words (PostgreSQL's full text search,
  `ts_rank_cd` over each memory's English words, parsed once when it was written
  (`pgvector_store.WORDS_COLUMN`), the query's words OR-ed so a memory matching any of them is
  a candidate, as BM25 treats them);
- fused by reciprocal rank in SQL (each candidate also carries its cosine, which recall fuses
  with its own word scores);
- and, in the same round trip, which of the given journal entries have memories made from
  them (recall leaves those entries out: an entry and its memories are one item).

The recall pipeline then ranks these candidates with the journal's unconsolidated entries and
the other tiers, and filters and budgets them as it does the mirror's (audience, superseded,
outranked, information, budget): both stores share everything after the candidates.

Every call here blocks (a database round trip): the store runs it off the reactor.
"""

from ai_assistant.memory.longterm import pgvector_store

# Candidates per half (nearest by vector, best by words): recall wants `limit * OVERFETCH`
# items plus what audience and supersession may hide; a few hundred keep every item the
# in-process ranking would have placed in its head while staying one small result set.
CANDIDATES_PER_HALF = 150
# The usual reciprocal-rank constant (Cormack et al.): damps the first ranks' dominance.
RRF_K = 60
# mem0's own payload keys: what is left of a payload is the memory's metadata (as mem0 lists it)
_CORE_KEYS = frozenset({"data", "hash", "created_at", "updated_at", "id", "text_lemmatized",
                        "attributed_to", "user_id", "agent_id", "run_id", "actor_id", "role",
                        "expiration_date"})


def _statement(table):
    from psycopg import sql

    config = sql.Literal(pgvector_store.TEXT_CONFIG)
    words = sql.SQL("t.{}").format(sql.Identifier(pgvector_store.WORDS_COLUMN))
    return sql.SQL("""
WITH query AS (
    SELECT %(vector)s::vector AS vector,
           NULLIF(replace(plainto_tsquery({config}, %(text)s)::text, ' & ', ' | '), '')::tsquery
               AS words
),
nearest AS (
    SELECT t.id, row_number() OVER (ORDER BY t.vector <=> q.vector) AS place
    FROM {table} t, query q
    WHERE t.payload->>'user_id' = %(scope)s
    ORDER BY t.vector <=> q.vector
    LIMIT %(per_half)s
),
matching AS (
    SELECT t.id, row_number() OVER (ORDER BY ts_rank_cd({words}, q.words) DESC) AS place
    FROM {table} t, query q
    WHERE q.words IS NOT NULL AND t.payload->>'user_id' = %(scope)s AND {words} @@ q.words
    ORDER BY ts_rank_cd({words}, q.words) DESC
    LIMIT %(per_half)s
),
fused AS (
    SELECT id, sum(1.0 / (%(rrf_k)s + place)) AS score
    FROM (SELECT id, place FROM nearest UNION ALL SELECT id, place FROM matching) ranked
    GROUP BY id
)
SELECT 'memory', t.id::text, t.payload, 1 - (t.vector <=> q.vector), f.score
FROM fused f JOIN {table} t ON t.id = f.id, query q
UNION ALL
SELECT DISTINCT 'source', t.payload->>'entry_id', NULL::jsonb, NULL::float8, NULL::numeric
FROM {table} t
WHERE t.payload->>'user_id' = %(scope)s AND t.payload->>'entry_id' = ANY(%(entries)s)
""").format(config=config, table=sql.Identifier(table), words=words)


def memory_from_payload(memory_id, payload):
    """A row's memory as the store lists it: `{"id", "memory", "metadata", "created_at"}`."""
    payload = payload or {}
    return {"id": str(memory_id), "memory": payload.get("data", ""),
            "metadata": {key: value for key, value in payload.items() if key not in _CORE_KEYS},
            "created_at": payload.get("created_at")}


def recall_candidates(pool, scope, vector, text, entry_ids=(), per_half=CANDIDATES_PER_HALF,
                      table=pgvector_store.TABLE, timeout=None):
    """
    The memories of one scope that may answer a query, found by the database (blocking).

    Args:
        pool (psycopg_pool.ConnectionPool): mem0's pool on the memory database.
        scope (str): The assistant's `user_id`.
        vector (list[float]): The query's embedding (the store's embedder).
        text (str): The query's text (its words are matched).
        entry_ids (iterable): Journal entry ids (as text) to check for memories made from them.
        per_half (int): Candidates taken by vector and by words (each).
        table (str): The memory table.
        timeout (float, optional): Seconds to wait for a free connection (the pool's own
            timeout when None).

    Returns:
        tuple: `(memories, sources)`: memories as the store lists them, each with its
        `cosine` to the query, best fused first; and the set of `entry_ids` that have
        memories.
    """
    params = {"vector": "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]",
              "text": str(text), "scope": str(scope), "per_half": int(per_half),
              "rrf_k": RRF_K, "entries": [str(entry) for entry in entry_ids]}
    waits = {} if timeout is None else {"timeout": timeout}
    with pool.connection(**waits) as connection:
        rows = connection.execute(_statement(table), params).fetchall()
    memories, sources = [], set()
    for kind, key, payload, cosine, fused in rows:
        if kind == "source":
            sources.add(key)
        else:
            memory = memory_from_payload(key, payload)
            memory["cosine"], memory["fused"] = float(cosine), float(fused)
            memories.append(memory)
    memories.sort(key=lambda memory: -memory["fused"])
    return memories, sources
