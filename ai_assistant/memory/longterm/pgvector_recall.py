"""
Recall candidates from the postgres memory store: the hybrid search as one query.

On the embedded store recall ranks over a mirror of every memory held in the game process
(`longterm.mirror`). On the postgres store the database finds the candidates instead, so the
game process holds no per-assistant corpus: one statement, within the assistant's scope,

- the `per_half` memories nearest the query's vector (pgvector's cosine distance `<=>`, exact
  within the scope: the scope index narrows the rows, see `pgvector_store`);
- the `per_half` memories that best match its words: BM25 over the scope, on the very terms
  recall's own ranking reads (`search.terms.tokenize`: lemma, then Snowball stem, stored with
  each row in `pgvector_store.TERMS_COLUMN`), with the scope's own document frequencies and
  average length, so the database takes the memories recall's BM25 puts first over every
  memory (PostgreSQL's English configuration stems other words: it knows no irregular forms,
  "went" is not "go");
- fused by reciprocal rank in SQL (each candidate also carries its cosine, which recall fuses
  with its own word scores);
- each candidate's time neighbours (`NEIGHBOURS` on each side, and the scope's last memories,
  which the journal's unconsolidated entries follow), and theirs, with every row's place in
  the scope's time order: recall lets an item share its neighbours' relevance
  (`search.scoring`), so a candidate and its neighbours are ranked with all of theirs, and the
  neighbours' neighbours only lend theirs (`context_only`);
- the scope's word statistics: how many memories it holds, their length in terms, and in how
  many of the memories it leaves out of the result each term occurs (the process counts the
  rows it is sent from their texts: together, every memory's);
- and, in the same round trip, which of the given journal entries have memories made from
  them (recall leaves those entries out: an entry and its memories are one item; an empty
  memory, which recall never shows, stands for none, as in the mirror).

Each row carries what recall reads of it and no more: a candidate its payload less mem0's own
keys, a neighbour's neighbour only its words, time and speaker, and each its cosine to the
query, which recall fuses as it is (the process embeds no candidate to score it).

With these the recall pipeline ranks the candidates as it ranks every memory on the embedded
store (`index.WholeCorpus`: BM25's idf and average length are the scope's, and neighbours are
neighbours in time), then filters and budgets them as it does the mirror's (audience,
superseded, outranked, information, budget): both stores share everything after the
candidates.

A row's terms and time are written by the first recall that meets the row without them (a new
memory, one whose text changed: a trigger clears them, or one moved in by `store_move`): the
tokenizer is Python's, so the store, not the database, computes them (`fill_terms`).

Every call here blocks (a database round trip): the store runs it off the reactor.
"""

import json
from collections import Counter

from ai_assistant.memory.longterm import pgvector_store
from ai_assistant.memory.search.index import BM25_B, BM25_K1
from ai_assistant.memory.search.scoring import CONTEXT_RADIUS
from ai_assistant.memory.search.terms import STOPWORDS, stem, tokenize, words
from ai_assistant.memory.search.time_references import find_time_references, strip_spans
from ai_assistant.plumbing.ports import parse_iso

# Candidates per half (nearest by vector, best by words): recall wants `limit * OVERFETCH`
# items plus what audience and supersession may hide; a few hundred keep every item the
# in-process ranking would have placed in its head while staying one small result set.
CANDIDATES_PER_HALF = 150
# The usual reciprocal-rank constant (Cormack et al.): damps the first ranks' dominance.
RRF_K = 60
# Time neighbours read on each side of a candidate: as far as recall's ranking lets relevance
# spread (`scoring.CONTEXT_RADIUS`).
NEIGHBOURS = CONTEXT_RADIUS
# Rows given their terms per round trip when many lack them (a table moved in, say).
FILL_BATCH = 500
# mem0's own payload keys: what is left of a payload is the memory's metadata (as mem0 lists it)
_CORE_KEYS = frozenset({"data", "hash", "created_at", "updated_at", "id", "text_lemmatized",
                        "attributed_to", "user_id", "agent_id", "run_id", "actor_id", "role",
                        "expiration_date"})


def _names():
    from psycopg import sql

    return {"table": sql.Identifier(pgvector_store.TABLE)} | {
        name: sql.Identifier(column) for name, column in (
            ("terms", pgvector_store.TERMS_COLUMN), ("counts", pgvector_store.COUNTS_COLUMN),
            ("length", pgvector_store.LENGTH_COLUMN), ("moment", pgvector_store.MOMENT_COLUMN),
            ("made", pgvector_store.MADE_COLUMN))}


# Recall's statement (`_statement` names its table and columns): see the module's notes.
_STATEMENT = """
WITH query AS (SELECT %(vector)s::vector AS vector),
scope AS MATERIALIZED (
    -- the scope's memories in time order, as recall's mirror holds them (empty texts are not
    -- memories to recall), with their terms and their distance to the query, read once; rows
    -- without terms yet are filled in before
    SELECT t.id, t.payload, t.vector <=> q.vector AS distance,
           coalesce(t.{terms}, '{{}}') AS terms, coalesce(t.{counts}, '{{}}') AS counts,
           coalesce(t.{length}, 0) AS length, t.payload->>'source_entity' AS speaker,
           t.payload->>'entry_id' AS entry,
           coalesce(t.payload->>'audience', '') <> '' AS private,
           row_number() OVER (ORDER BY t.{moment}, t.{made}, t.id) AS place
    FROM {table} t, query q
    WHERE t.payload->>'user_id' = %(scope)s AND btrim(coalesce(t.payload->>'data', '')) <> ''
),
asked AS (SELECT word, term FROM unnest(%(words)s::text[], %(query_terms)s::text[]) a(word, term)),
-- a speaker's name says whose lines to favour, it is not a word to match (`journal_search`)
speakers AS (
    SELECT name FROM (SELECT DISTINCT speaker FROM scope WHERE speaker IS NOT NULL) s,
        regexp_split_to_table(regexp_replace(regexp_replace(lower(s.speaker),
            '[''’]s\\M', '', 'g'), '[''’]', '', 'g'), '[^a-z0-9]+') name
    UNION SELECT unnest(%(speakers)s::text[])
),
content AS (SELECT term FROM asked WHERE word NOT IN (SELECT name FROM speakers)),
wanted_terms AS (
    SELECT coalesce(array_agg(DISTINCT term), '{{}}') AS terms FROM (
        SELECT term FROM content
        UNION ALL SELECT term FROM asked WHERE NOT EXISTS (SELECT 1 FROM content)) chosen
),
-- (BM25's arithmetic in float8: numeric, PostgreSQL's exact decimals, is many times slower)
totals AS (
    SELECT count(*) AS documents, coalesce(sum(length), 0) AS length,
           count(*) FILTER (WHERE private) AS private,
           greatest(coalesce(avg(length)::float8, 1), 1e-9) AS average
    FROM scope
),
-- each wanted term in each row that holds it, how often
held AS (
    SELECT s.id, s.place, s.length, c.term, c.count
    FROM scope s, wanted_terms w, unnest(s.terms, s.counts) c(term, count)
    WHERE s.terms && w.terms AND c.term = ANY(w.terms)
),
frequency AS (SELECT term, count(*)::float8 AS documents FROM held GROUP BY term),
-- BM25 as recall's index computes it (`search.index`), over the whole scope
matching AS (
    SELECT h.id, row_number() OVER (ORDER BY sum(
               ln(1 + (x.documents::float8 - f.documents + 0.5) / (f.documents + 0.5))
               * h.count * (%(k1)s + 1)
               / (h.count + %(k1)s * (1 - %(b)s + %(b)s * h.length / x.average)))
           DESC, h.place DESC) AS place
    FROM held h JOIN frequency f ON f.term = h.term, totals x
    GROUP BY h.id, h.place
    ORDER BY place
    LIMIT %(per_half)s
),
nearest AS (
    SELECT id, row_number() OVER (ORDER BY distance) AS place
    FROM scope ORDER BY distance LIMIT %(per_half)s
),
fused AS (
    SELECT id, sum(1.0 / (%(rrf_k)s + place)) AS score
    FROM (SELECT id, place FROM nearest UNION ALL SELECT id, place FROM matching) ranked
    GROUP BY id
),
-- the candidates with their time neighbours (ranked: their neighbours are read too) and the
-- neighbours' own (which only lend relevance); the journal's unconsolidated entries come after
-- the scope's last memories in recall's corpus, so those are read as a candidate's neighbours
places AS (
    SELECT place + step AS place, min(abs(step)) AS steps
    FROM (SELECT s.place FROM fused f JOIN scope s ON s.id = f.id
          UNION SELECT documents + 1 FROM totals) found,
         generate_series(-2 * %(radius)s::int, 2 * %(radius)s::int) step
    GROUP BY 1
),
chosen AS (
    SELECT s.id, s.place, s.terms, s.payload, s.distance, p.steps <= %(radius)s::int AS ranked
    FROM places p JOIN scope s ON s.place = p.place
),
-- in how many of the scope's memories left out of the result each term occurs: the rows sent
-- are counted by the process from their texts (one pass over the few rows left out, where a
-- pass over the scope's terms read every row's again)
frequencies AS (
    SELECT term, count(*) AS documents
    FROM scope s, unnest(s.terms) term
    WHERE NOT EXISTS (SELECT 1 FROM chosen c WHERE c.place = s.place)
    GROUP BY term
)
-- a ranked row's payload less what mem0 keeps for itself; a context row's, only what lends
-- relevance (its words, time and speaker)
SELECT CASE WHEN c.ranked THEN 'memory' ELSE 'context' END, c.id::text,
       CASE WHEN c.ranked THEN c.payload - %(unread)s::text[] ELSE jsonb_strip_nulls(
           jsonb_build_object('data', c.payload->'data', 'timestamp', c.payload->'timestamp',
                              'created_at', c.payload->'created_at',
                              'source_entity', c.payload->'source_entity')) END,
       1 - c.distance, coalesce(f.score, 0)::float8, c.place::float8
FROM chosen c LEFT JOIN fused f ON f.id = c.id
UNION ALL
SELECT 'frequency', term, NULL::jsonb, NULL::float8, NULL::float8, documents::float8
FROM frequencies
UNION ALL
SELECT 'totals', NULL, jsonb_build_object('documents', documents, 'length', length,
                                          'private', private), NULL, NULL, NULL
FROM totals
UNION ALL
SELECT DISTINCT 'source', entry, NULL::jsonb, NULL::float8, NULL::float8, NULL::float8
FROM scope WHERE entry = ANY(%(entries)s)
"""


def _statement(table):
    from psycopg import sql

    return sql.SQL(_STATEMENT).format(**(_names() | {"table": sql.Identifier(table)}))


def memory_from_row(memory_id, payload):
    """
    A row's memory as the store lists it, `{"id", "memory", "metadata", "created_at"}`. The
    statement sends a payload without mem0's own keys but its text and time (`query_params`'
    `unread`): those two are taken out of it, and the rest is the metadata as it is (the
    payload was parsed for this row alone, so it is taken, not copied).
    """
    payload = payload or {}
    text, made = payload.pop("data", ""), payload.pop("created_at", None)
    return {"id": str(memory_id), "memory": text, "metadata": payload, "created_at": made}


def row_terms(payload):
    """
    What recall's query reads of a row, written by the store (`fill_terms`): `(terms, counts,
    length, moment, made)`: the text's terms as recall's ranking reads them
    (`terms.tokenize`), each once, how often each occurs and how many there are; the moment
    recall's mirror orders it by (`mirror.item_epoch`: its source's time, else when it was
    made) and when it was made, in epoch seconds (0 for none).
    """
    payload = payload or {}
    terms = tokenize(payload.get("data") or "")
    counts = Counter(terms)
    made = parse_iso(payload.get("created_at"))
    moment = parse_iso(payload.get("timestamp") or payload.get("created_at"))
    return (list(counts), list(counts.values()), len(terms),
            moment.timestamp() if moment else 0.0, made.timestamp() if made else 0.0)


def fill_terms(connection, scope, table=pgvector_store.TABLE, batch=FILL_BATCH):
    """
    Write the terms and time of the scope's rows that have none (new rows, rewritten texts,
    moved rows), `batch` at a time (blocking).

    Returns:
        int: How many rows were read to be given their terms.
    """
    from psycopg import sql

    names = _names() | {"table": sql.Identifier(table)}
    read = sql.SQL("SELECT id, payload FROM {table} WHERE payload->>'user_id' = %s "
                   "AND {terms} IS NULL LIMIT %s").format(**names)
    # only while the row still holds the text that was read: mem0 may rewrite it meanwhile
    # (recall holds no lock), and then the trigger has emptied its terms for the next recall
    write = sql.SQL("UPDATE {table} SET {terms} = %s, {counts} = %s, {length} = %s, "
                    "{moment} = %s, {made} = %s WHERE id = %s AND {terms} IS NULL "
                    "AND payload->'data' IS NOT DISTINCT FROM %s "
                    "AND payload->'timestamp' IS NOT DISTINCT FROM %s").format(**names)
    filled, tried = 0, set()
    while True:
        rows = [row for row in connection.execute(read, (str(scope), int(batch))).fetchall()
                if row[0] not in tried]
        if not rows:  # all written (or rewritten meanwhile: the next recall reads them)
            return filled
        with connection.cursor() as cursor:
            cursor.executemany(write, [(*row_terms(payload), row_id,
                                        _as_json(payload, "data"), _as_json(payload, "timestamp"))
                                       for row_id, payload in rows])
        connection.commit()
        tried.update(row_id for row_id, _ in rows)
        filled += len(rows)


def write_memories(connection, points, scopes, table=pgvector_store.TABLE, batch=FILL_BATCH):
    """
    Write memories into the table beside mem0 (a move between stores, a bench's replicas): the
    `(id, vector, payload)` rows, a row of the same id replaced, `batch` at a time in one
    transaction, then the terms and times of `scopes` (`fill_terms`), as the store's own
    writes leave its rows (blocking).
    """
    from psycopg import sql
    from psycopg.types.json import Json

    insert = sql.SQL("INSERT INTO {table} (id, vector, payload) VALUES (%s, %s::vector, %s) "
                     "ON CONFLICT (id) DO UPDATE SET vector = EXCLUDED.vector, "
                     "payload = EXCLUDED.payload").format(table=sql.Identifier(table))
    with connection.cursor() as cursor:
        for start in range(0, len(points), batch):
            cursor.executemany(insert, [
                (point_id, json.dumps([float(value) for value in vector]), Json(payload))
                for point_id, vector, payload in points[start:start + batch]])
    connection.commit()
    for scope in sorted(set(scopes)):
        fill_terms(connection, scope, table)


def fill_after_write(pool, scope, log):
    """
    Give the rows a writer just wrote their terms and times (`fill_terms`; blocking): the writer
    (a night's consolidation, a correction) pays for them, not the next recall, which runs
    while a player waits for a reply. A row the writer could not fill is filled by that recall
    instead, so a failure here is only logged: the memory is stored.

    Args:
        pool (psycopg_pool.ConnectionPool): mem0's pool on the memory database.
        scope (str): The assistant's `user_id`.
        log (callable): `log(message)`.
    """
    try:
        with pool.connection() as connection:
            fill_terms(connection, scope)
    except Exception as error:  # noqa: BLE001 - the write stands; recall fills the rest
        log(f"[ai_assistant] terms of new memories left to recall: {error}")


def _as_json(payload, key):
    """A payload's value as `payload->key` reads it (absent: NULL)."""
    from psycopg.types.json import Jsonb

    return Jsonb(payload[key]) if key in payload else None


def query_words(text, now=None):
    """
    `(words, terms)`: the query's content words and their terms, as recall's ranking reads
    them (`journal_search`: stop words out, the times it names out when it names any).
    """
    text = str(text or "")
    if now is not None:
        _, spans = find_time_references(text, now)
        if spans:
            text = strip_spans(text, spans)
    asked = [word for word in words(text) if word not in STOPWORDS]
    return asked, [stem(word) for word in asked]


def journal_speakers(journal_entries):
    """The words of the names of the journal's speakers (recall ranks its entries beside the
    candidates, and a query's word that names one of them is not a word to match)."""
    return sorted({word for entry in journal_entries or ()
                   for word in words(entry.get("source_entity") or "")})


def query_params(scope, vector, text, *, entry_ids=(), journal_entries=(), now=None,
                 per_half=CANDIDATES_PER_HALF):
    """The parameters of recall's statement (`_statement`) for one query."""
    asked, terms = query_words(text, now)
    return {"vector": "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]",
            "words": asked, "query_terms": terms,
            "speakers": journal_speakers(journal_entries), "scope": str(scope),
            "per_half": int(per_half), "rrf_k": RRF_K, "k1": BM25_K1, "b": BM25_B,
            "radius": NEIGHBOURS, "entries": [str(entry) for entry in entry_ids],
            "unread": sorted(_CORE_KEYS - {"data", "created_at"})}


def no_words():
    """The word statistics of an empty scope (`recall_candidates`)."""
    return {"documents": 0, "length": 0, "private": 0, "outside_frequencies": {}}


def recall_candidates(pool, scope, vector, text, entry_ids=(), per_half=CANDIDATES_PER_HALF,
                      table=pgvector_store.TABLE, timeout=None, journal_entries=(), now=None):
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
        journal_entries (iterable): The journal entries recall ranks beside the candidates
            (their speakers are names, not words to match).
        now (datetime, optional): The current time (the times the query names are not words).

    Returns:
        tuple: `(memories, sources, scope_words)`: memories as the store lists them, each with
        its `cosine` to the query, its `place` in the scope's time order, its `fused` score
        (0 for a neighbour) and whether it is there only to lend its relevance to its
        neighbours (`context_only`: a neighbour's neighbour, whose own are not read), best
        fused first; the set of `entry_ids` that have memories; and the scope's word
        statistics, `{"documents", "length", "private", "outside_frequencies"}`: the last, in
        how many of the scope's memories that are not among `memories` each term occurs
        (`store_candidates.CandidateSet`).
    """
    import orjson  # the postgres store's own dependencies: only a game that chose it has them
    from psycopg.types.json import set_json_loads

    params = query_params(scope, vector, text, entry_ids=entry_ids,
                          journal_entries=journal_entries, now=now, per_half=per_half)
    waits = {} if timeout is None else {"timeout": timeout}
    with pool.connection(**waits) as connection:
        fill_terms(connection, scope, table)
        with connection.cursor() as cursor:
            # a thousand payloads per query at a thousand memories: orjson reads them in a
            # quarter of json's time
            set_json_loads(orjson.loads, cursor)
            rows = cursor.execute(_statement(table), params).fetchall()
    memories, sources, statistics = [], set(), no_words()
    for kind, key, payload, cosine, fused, number in rows:
        if kind == "source":
            sources.add(key)
        elif kind == "frequency":
            statistics["outside_frequencies"][key] = int(number)
        elif kind == "totals":
            statistics.update({name: int(payload[name])
                               for name in ("documents", "length", "private")})
        else:
            memory = memory_from_row(key, payload)
            memory["cosine"], memory["fused"] = float(cosine), float(fused)
            memory["place"], memory["context_only"] = int(number), kind == "context"
            memories.append(memory)
    memories.sort(key=lambda memory: (-memory["fused"], memory["place"]))
    return memories, sources, statistics
