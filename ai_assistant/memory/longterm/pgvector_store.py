"""
Long-term memories in PostgreSQL with pgvector: the `postgres` memory store.

`memory.store = "postgres"` puts every assistant's long-term memories in one table of a
PostgreSQL database through mem0's own `pgvector` store: the game's database when it is
PostgreSQL (the Django alias `memory.postgres_database`), or the one `memory.postgres_url`
names. What the embedded store keeps in qdrant files beside the game process (vectors, and a
JSON payload with the text, `user_id`, audience, provenance and superseded marks) is then
backed up, replicated and restored with the world.

Layout, and why:

- One table, `ai_assistant_memories` (`id uuid`, `vector vector(dims)`, `payload jsonb`), as
  mem0 creates it, for every assistant. Each assistant's scope is its `user_id`, which every
  call of `mem0_store.Mem0Store` filters on (and checks on what it reads by id); a b-tree index on
  `payload->>'user_id'` makes that filter an index lookup, so an assistant pays for its own
  memories only, like an embedded assistant in its own collection.
- The vector search is exact within the scope (mem0's HNSW index is switched off): an
  approximate index scanned before a scope filter returns only the neighbours it visited
  (pgvector's `ef_search`, 40 by default) and then drops other assistants' rows, so a busy
  table would hide an assistant's own true hits. One assistant's few thousand rows are ranked
  in a millisecond or two; a game that wants an approximate index over very large scopes can
  give mem0 its own `memory.mem0` vector store config.
- mem0's own search (`Mem0Store.search`: the claims a new claim is judged against, the
  `search_facts` tool) ranks as on the embedded store: by meaning (and mem0's entity boosts)
  only. mem0 would add its BM25 half on pgvector (`keyword_search`), which the embedded store's
  local qdrant lacks (its `bm25` slot needs an encoder that downloads), and so reorder its
  top hits: a new claim was judged against other memories (kept, superseded or stored beside
  differently) and the tools returned others, so the store changed what was remembered and
  found (`semantic_search_only`). Recall's own word search is separate (`pgvector_recall`).
- Recall's candidates are one query too (`pgvector_recall`: the nearest vectors and the best
  BM25 matches of the scope, fused in SQL, with their time neighbours and the scope's word
  statistics), so the game process keeps no per-assistant copy of the memories for this
  store. Each row carries the terms recall's own ranking reads in its text (`TERMS_COLUMN`,
  Python's lemma-then-stem tokenizer, which PostgreSQL's English configuration cannot
  reproduce) and its place in time (`MOMENT_COLUMN`, `MADE_COLUMN`), written once per row by
  recall (`pgvector_recall.fill_terms`); a trigger clears them when a row's text or time
  changes (mem0 names its three columns only, and writes the payload whole).
- A row stays whole in the table unless it is longer than `INLINE_ROW_BYTES` (the table's
  `toast_tuple_target`): the vector, which recall compares for every row of a scope, is then
  read with its row instead of from the TOAST table. Rows written before this setting keep
  their layout until they are written again (`VACUUM FULL` rewrites them all).
- A database that stops answering must not hold a worker, nor the store's lock, for the
  pool's default 30 s: the pool waits `POOL_TIMEOUT` seconds for a connection and a new
  connection gives up after `CONNECT_TIMEOUT` (`mem0_store` then opens its breaker); a lost
  connection is re-tried for `RECONNECT_TIMEOUT` seconds, then afresh on the next call.

`prepare` creates the extension, the table and its indexes before mem0 first uses them (mem0
creates neither the scope index nor, once the table exists, its text index), and refuses a
table whose vectors have another size than the embedder's with a message that says so.
mem0's history database (the text of past versions) stays in the game's data folder.

Every call here blocks: the caller (`mem0_store.make_semantic_store`, or a worker thread) runs
it off the reactor.
"""

import logging
import threading

STORES = ("embedded", "postgres")
TABLE = "ai_assistant_memories"
SCOPE_INDEX = f"{TABLE}_user_id_idx"
# which of the given journal entries of a scope have memories (recall asks at every query):
# an index lookup, instead of reading the payload of every row of the scope
ENTRY_INDEX = f"{TABLE}_user_id_entry_id_idx"
TEXT_INDEX = f"{TABLE}_text_lemmatized_idx"  # the name mem0 gives it
# Each memory's terms as recall's ranking reads them (`search.terms.tokenize`: each once, how
# often each occurs, and how many there are in all: BM25's counts), and the moments that order
# the scope in time as recall's mirror does (`mirror.item_epoch`, then when the row was made),
# as epoch seconds: columns mem0 never names, written by `pgvector_recall.fill_terms`.
TERMS_COLUMN = "recall_terms"
COUNTS_COLUMN = "recall_counts"
LENGTH_COLUMN = "recall_length"
MOMENT_COLUMN = "recall_moment"
MADE_COLUMN = "recall_made"
# The rows of a scope whose terms are still to be written (few, or none: found at each recall).
UNREAD_INDEX = f"{TABLE}_user_id_unread_idx"
# Clears a row's terms when mem0 rewrites its text or its time (they are written again).
UNREAD_TRIGGER = f"{TABLE}_unread"
# A row is kept whole in the table up to this size (PostgreSQL's largest `toast_tuple_target`;
# its default, 2 kB, is exceeded by a memory's vector and payload together). Recall's statement
# reads every row of the assistant's scope, its vector included: one moved out of line costs a
# lookup in the TOAST table per row (about a fifth of the statement's time at 1,080 memories).
INLINE_ROW_BYTES = 8160
# The stored column of English words an earlier version ranked by (dropped when found).
_OLD_WORDS_COLUMN = "data_words"
MAX_CONNECTIONS = 4  # per process: the shared store serialises its calls anyway
POOL_TIMEOUT = 3.0  # seconds a call waits for a connection (psycopg_pool's default is 30)
CONNECT_TIMEOUT = 3  # seconds a new connection may take (libpq's `connect_timeout`)
# Seconds the pool keeps re-trying a lost connection before it drops it (psycopg_pool's default
# is 300, backing off up to minutes between tries); the next call then starts a fresh attempt,
# so the store is back within seconds of the database, however long it was away.
RECONNECT_TIMEOUT = 10.0

_prepared = set()
_prepared_lock = threading.Lock()


class PostgresStoreError(ValueError):
    """The postgres memory store is chosen but cannot be used as configured."""


def is_postgres(settings):
    """True when the game chose the postgres memory store (`memory.store`)."""
    return (settings.get("memory.store") or "embedded") == "postgres"


def database_url(settings, game_database=None):
    """
    The connection string of the database that holds the memories.

    Args:
        settings (conf.Settings): The assistant's settings (`memory.postgres_url`).
        game_database (dict, optional): The game's Django database settings (`ENGINE`,
            `NAME`, `USER`, `PASSWORD`, `HOST`, `PORT`), used when no URL is set.

    Returns:
        str: A libpq connection string (a URL or `key=value` words).

    Raises:
        PostgresStoreError: Neither a URL nor a PostgreSQL game database.
    """
    url = (settings.get("memory.postgres_url") or "").strip()
    if url:
        return url
    engine = str((game_database or {}).get("ENGINE") or "")
    if "postgresql" in engine:
        return conninfo_from_django(game_database)
    raise PostgresStoreError(
        "memory.store is 'postgres' but the game's database is not PostgreSQL "
        f"({engine or 'none'}): set memory.postgres_url to a PostgreSQL with pgvector")


def conninfo_from_django(database):
    """A libpq connection string from one entry of Django's `DATABASES`."""
    from psycopg.conninfo import make_conninfo

    words = {"dbname": database.get("NAME"), "user": database.get("USER"),
             "password": database.get("PASSWORD"), "host": database.get("HOST"),
             "port": database.get("PORT")}
    return make_conninfo(**{name: str(value) for name, value in words.items() if value})


def vector_store_config(url, dims):
    """
    mem0's `vector_store` section for the postgres store.

    Args:
        url (str): The database's connection string (`database_url`).
        dims (int): The embedder's vector size.

    Returns:
        dict: `{"provider": "pgvector", "config": {...}}`.
    """
    return {
        "provider": "pgvector",
        "config": {
            "connection_string": url,
            "collection_name": TABLE,
            "embedding_model_dims": int(dims),
            "hnsw": False,  # exact within a scope: see the module's notes
            "diskann": False,
            "minconn": 1,
            "maxconn": MAX_CONNECTIONS,
        },
    }


def is_ours(vector_store):
    """True for a `vector_store` section that `vector_store_config` made."""
    config = (vector_store or {}).get("config") or {}
    return (vector_store or {}).get("provider") == "pgvector" and \
        config.get("collection_name") == TABLE


def prepare(vector_store):
    """
    Create the extension, the table and its indexes once per process and database.

    Args:
        vector_store (dict): mem0's `vector_store` section; anything but ours is left alone.

    Raises:
        PostgresStoreError: The table holds vectors of another size, or pgvector is missing.
    """
    if not is_ours(vector_store):
        return
    # mem0 logs (with a traceback) every failed statement before raising it; the caller
    # reports what it raises, and an id that is not a UUID is an expected "not found".
    logging.getLogger("mem0.vector_stores.pgvector").setLevel(logging.CRITICAL)
    config = vector_store["config"]
    url, dims = config["connection_string"], config["embedding_model_dims"]
    with _prepared_lock:
        if (url, dims) in _prepared:
            return
        _create_schema(url, dims)
        _prepared.add((url, dims))


def _create_schema(url, dims):
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        try:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as error:
            raise PostgresStoreError(
                f"the memory database has no pgvector extension: {error}".strip()) from None
        connection.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id UUID PRIMARY KEY, vector vector({}), "
            "payload JSONB)").format(sql.Identifier(TABLE), sql.Literal(int(dims))))
        stored = connection.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass "
            "AND attname = 'vector'", (TABLE,)).fetchone()
        if stored and stored[0] > 0 and stored[0] != int(dims):
            raise PostgresStoreError(
                f"{TABLE} holds vectors of {stored[0]} numbers but the embedder makes {dims}: "
                "move the memories with the embedder they were made with")
        connection.execute(sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} ((payload->>'user_id'))").format(
                sql.Identifier(SCOPE_INDEX), sql.Identifier(TABLE)))
        connection.execute(sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} "
            "((payload->>'user_id'), (payload->>'entry_id'))").format(
                sql.Identifier(ENTRY_INDEX), sql.Identifier(TABLE)))
        connection.execute(sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} "
            "USING gin (to_tsvector('simple', payload->>'text_lemmatized'))").format(
                sql.Identifier(TEXT_INDEX), sql.Identifier(TABLE)))
        # recall's own word search (`pgvector_recall`): each memory's terms, and its time
        for statement in terms_statements(TABLE):
            connection.execute(statement)


def terms_statements(table):
    """
    The table's row size kept whole (`INLINE_ROW_BYTES`), the columns of each memory's terms
    and time that recall's query reads (a table of an older version gets them empty: recall
    fills them in), the index of the rows still without them, and the trigger that empties
    them when mem0 rewrites a row's text or time. No index over the terms: the query reads one
    scope's rows through the scope index, while an index over everyone's words hands it every
    row with a common word first (70,000 of 108,000 rows for three topic words, 27 ms, against
    one assistant's 1,080 rows).
    """
    from psycopg import sql  # the postgres store's driver: only a game that chose it has it

    names = {"table": sql.Identifier(table), "terms": sql.Identifier(TERMS_COLUMN),
             "counts": sql.Identifier(COUNTS_COLUMN), "length": sql.Identifier(LENGTH_COLUMN),
             "moment": sql.Identifier(MOMENT_COLUMN), "made": sql.Identifier(MADE_COLUMN),
             "unread": sql.Identifier(UNREAD_INDEX), "trigger": sql.Identifier(UNREAD_TRIGGER),
             "inline": sql.Literal(int(INLINE_ROW_BYTES))}
    return [sql.SQL(statement).format(**names) for statement in (
        "ALTER TABLE {table} SET (toast_tuple_target = {inline})",
        "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {terms} text[], "
        "ADD COLUMN IF NOT EXISTS {counts} int[], ADD COLUMN IF NOT EXISTS {length} int, "
        "ADD COLUMN IF NOT EXISTS {moment} float8, ADD COLUMN IF NOT EXISTS {made} float8",
        "CREATE INDEX IF NOT EXISTS {unread} ON {table} ((payload->>'user_id')) "
        "WHERE {terms} IS NULL",
        """CREATE OR REPLACE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.payload->>'data' IS DISTINCT FROM OLD.payload->>'data'
            OR NEW.payload->>'timestamp' IS DISTINCT FROM OLD.payload->>'timestamp' THEN
        NEW.{terms} := NULL;
        NEW.{counts} := NULL;
        NEW.{length} := NULL;
    END IF;
    RETURN NEW;
END $$""",
        "CREATE OR REPLACE TRIGGER {trigger} BEFORE UPDATE OF payload ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION {trigger}()",
    )] + [
        # what the earlier versions ranked by, which nothing reads any more
        sql.SQL("ALTER TABLE {} DROP COLUMN IF EXISTS {}").format(
            sql.Identifier(table), sql.Identifier(_OLD_WORDS_COLUMN)),
        sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(f"{table}_data_fts_idx")),
    ]


def analyze(url, table=TABLE):
    """
    Bring the planner's statistics of the memory table up to date (blocking): after many rows
    were written at once (a move between stores), recall's statement would otherwise be
    planned for the table as it was until autovacuum gets to it, while players wait on it.
    """
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))


def limit_waits(vector_store):
    """
    Make mem0's connection pool give up in seconds, not its default 30 (see the module's
    notes): a call waits `POOL_TIMEOUT` for a connection, a new one `CONNECT_TIMEOUT`.

    Args:
        vector_store: mem0's pgvector store (its `connection_pool`, psycopg_pool's).
    """
    pool = getattr(vector_store, "connection_pool", None)
    if pool is None or not hasattr(pool, "timeout"):
        return  # psycopg2's pool has neither: it never waits for a free connection
    pool.timeout = POOL_TIMEOUT
    if hasattr(pool, "reconnect_timeout"):
        pool.reconnect_timeout = RECONNECT_TIMEOUT
    if isinstance(getattr(pool, "kwargs", None), dict):
        pool.kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT)


def _no_keyword_search(query, top_k=5, filters=None):
    """mem0's "this store has no keyword search" answer (as the embedded store gives it)."""
    return None


def semantic_search_only(vector_store):
    """
    Make mem0's search on the pgvector store rank as on the embedded store: by meaning (and
    mem0's entity boosts), without its BM25 half (see the module's notes). The table's text
    index stays (mem0 writes `text_lemmatized` either way).

    Args:
        vector_store: mem0's pgvector store.
    """
    vector_store.keyword_search = _no_keyword_search


def prepared_databases():
    """The `(connection string, vector size)` pairs prepared in this process."""
    with _prepared_lock:
        return set(_prepared)


def forget_prepared():
    """Forget which databases were prepared (a test that drops the table calls this)."""
    with _prepared_lock:
        _prepared.clear()
