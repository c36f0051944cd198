"""
End-to-end crash safety: the Server process (not the Portal) of a real game is killed - kill -9
or SIGTERM - right after a burst of acknowledged work, started again, and what it acknowledged
is counted. Select with `-m e2e`.

- A line a player saw acknowledged (`You say to Ada, "..."`) must be in the assistant's journal,
  or still queued to be heard, after the restart.
- A goal an admin was told was added (`@assistant/tool Ada = add_goal ...` printed success) must
  still be there.
- kill -9 in the middle of compacting (journal -> semantic memory) must leave every entry in
  the store exactly once.

Each run prints `lost/total`; the figures also go to `tests/artifacts/durability.json`.
"""

import json
import os
import re
import signal
import time

import pytest
from game_server import GameServer, _alive, login

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARTIFACT = os.path.join(ROOT, "tests", "artifacts", "durability.json")
FIGURES = {}


def started_game():
    """A started `GameServer`; a first start that times out under load is tried once more."""
    for attempt in (1, 2):
        server = GameServer()
        try:
            return server.start()
        except RuntimeError:
            print(f"\nstart {attempt} failed; portal log:\n{server.logs('portal.log')[-2000:]}")
            server.stop()
            server.cleanup()
            if attempt == 2:
                raise
    return None


@pytest.fixture(scope="module")
def game():
    server = started_game()
    try:
        yield server
    finally:
        left = server.stop()
        server.cleanup()
        assert not left, f"server processes left running: {left}"
    os.makedirs(os.path.dirname(ARTIFACT), exist_ok=True)
    with open(ARTIFACT, "w") as handle:
        json.dump(FIGURES, handle, indent=2)


def server_pid(server):
    """The live Server process of this game."""
    found = server.servers()
    assert len(found) == 1, f"expected one Server process, found {found}"
    return found[0]


def kill_server(server, sig):
    """Send `sig` to the Server process and wait until it is gone."""
    pid = server_pid(server)
    os.kill(pid, sig)
    deadline = time.time() + 60
    while _alive(pid):
        assert time.time() < deadline, f"the Server did not stop on {sig!r}"
        time.sleep(0.1)


def restart(server):
    """Start the Server again (the Portal is still running) and log in."""
    result = server._run("start")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Server is already running" not in result.stdout, result.stdout
    deadline = time.time() + 120
    while True:
        try:
            return login(server)
        except (OSError, ConnectionError, TimeoutError, AssertionError):
            assert time.time() < deadline, server.logs()
            time.sleep(1)


def evaluate(client, expression, timeout=30):
    """Run `expression` in the game (`py`) and return what it prints between markers."""
    # the markers are built at run time, so the echoed command never matches them
    client.drain(0.2)
    client.send(f'py me.msg("DUR" + "<" + str({expression}) + ">" + "DUR")')
    return client.read_until(r"DUR<([\s\S]*?)>DUR", timeout=timeout).rsplit("DUR<", 1)[1][:-4]


KEPT = ('__import__("re").findall(r"(?:tok|goal)-\\w+-\\d+", " ".join('
        '[str(e.get("content")) for e in (s.get("journal") or {}).get("entries", [])]'
        ' + [str(e.get("text")) for e in s.get("pending_events") or []]'
        ' + [str(s.get("current_goals"))]))')


def kept_tokens(client, npc):
    """The burst tokens the NPC has, in its journal, its queue or its goals."""
    found = evaluate(client, f'(lambda s: sorted(set({KEPT})))(__import__("evennia")'
                             f'.search_object("{npc}")[0].assistant.ports().state)')
    return set(re.findall(r"(?:tok|goal)-\w+-\d+", found))


def burst(client, npc, run, talks=20, goals=5):
    """Acknowledged work: `talks` lines the player saw said, `goals` goals said to be added."""
    acknowledged = []
    for number in range(talks):
        token = f"tok-{run}-{number}"
        client.command(f"talk {npc} = {token} is my word for today",
                       rf'You say to {npc}, "{token}[^\n]*\n')
        acknowledged.append(token)
    for number in range(goals):
        token = f"goal-{run}-{number}"
        reply = client.command(f'@assistant/tool {npc} = add_goal {{"description": "{token}"}}',
                               r"success[^\n]*\n")
        assert "true" in reply.lower() or "success" in reply
        acknowledged.append(token)
    return acknowledged


def record(name, acknowledged, kept):
    lost = sorted(set(acknowledged) - kept)
    FIGURES[name] = {"lost": len(lost), "total": len(acknowledged), "lost_items": lost}
    print(f"\n{name}: lost {len(lost)}/{len(acknowledged)}")
    return lost


def test_kill_9_twice_in_a_row_loses_nothing_acknowledged(game):
    client = login(game)
    acknowledged = burst(client, "Ada", "k1")
    client.close()
    kill_server(game, signal.SIGKILL)
    # a server that crashes again before any flush could run (the old schedule never flushed)
    client = restart(game)
    acknowledged += burst(client, "Ada", "k2")
    client.close()
    kill_server(game, signal.SIGKILL)
    client = restart(game)
    try:
        lost = record("kill -9", acknowledged, kept_tokens(client, "Ada"))
    finally:
        client.close()
    assert lost == []
    assert "Traceback" not in game.logs()


def test_sigterm_loses_nothing_acknowledged(game):
    client = login(game)
    acknowledged = burst(client, "Ada", "t1")
    client.close()
    kill_server(game, signal.SIGTERM)
    client = restart(game)
    try:
        lost = record("SIGTERM", acknowledged, kept_tokens(client, "Ada"))
    finally:
        client.close()
    assert lost == []


CONSOLIDATED = ('len((__import__("evennia").search_object("Dora")[0].assistant.ports().state'
                '.get("journal") or {}).get("consolidated_entry_ids") or [])')
MEMORIES = ('__import__("evennia").search_object("Dora")[0].assistant.ports().semantic'
            '.list(limit=1000).addCallback(lambda found, me=me: me.msg("MEM" + "<" + '
            '__import__("json").dumps([m["metadata"].get("entry_id") for m in found])'
            ' + ">" + "MEM"))')


NAMES = ("Alice Bruno Carmen Dmitri Elena Farid Greta Hiro Ines Jonas Kira Luis Mira Nils Olga "
         "Pavel Quinn Rosa Sven Tara Umar Vera Wim Xena Yuri Zora Anton Bella Cyrus Dalia").split()
THINGS = ("lantern anchor violin compass teapot saddle ledger bellows kettle telescope quill "
          "mirror barrel hammer ribbon chisel flute lockbox spindle banner goblet sextant harp "
          "ladle trowel candle bucket satchel loom drum").split()
PLACES = ("cellar harbour chapel orchard forge attic market bridge tower stable mill garden "
          "library kitchen quarry wharf meadow crypt bakery tannery lighthouse barracks vineyard "
          "cloister brewery armoury granary workshop ferry courtyard").split()


def distinct_fact(number):
    """Facts far apart for the embedder (cosine <= 0.44): none is a near-duplicate of another."""
    return f"{NAMES[number]} hid the {THINGS[number]} in the {PLACES[number]}."


def wait_consolidated(client, at_least, timeout=240):
    deadline = time.time() + timeout
    while True:
        count = int(evaluate(client, CONSOLIDATED))
        if count >= at_least:
            return count
        assert time.time() < deadline, f"compacting stalled at {count} entries"
        time.sleep(0.3)


def test_kill_9_mid_compacting_stores_every_entry_exactly_once(game):
    entries = 30
    client = login(game)
    client.command("@assistant/create Dora", r"Created assistant Dora[^\n]*\n")
    for setting in ("ticks.sleep 1", "memory.consolidation_per_tick 2"):
        client.command(f"@assistant/config Dora = {setting}", r"Dora[^\n]*\n")
    for number in range(entries):
        client.command(f'@assistant/tool Dora = add_journal_entry {{"content": '
                       f'"{distinct_fact(number)}", "importance": 8}}', r"success[^\n]*\n")
    client.command("@assistant/sleep Dora", r"now asleep[^\n]*\n")
    done = wait_consolidated(client, 3)
    client.close()
    kill_server(game, signal.SIGKILL)
    assert done < entries, "compacting finished before the kill: nothing was tested"

    client = restart(game)
    try:
        wait_consolidated(client, entries)
        client.drain(0.2)
        client.send(f"py {MEMORIES}")
        found = client.read_until(r"MEM<([\s\S]*?)>MEM", timeout=60)
        entry_ids = json.loads(found.rsplit("MEM<", 1)[1][:-4])
    finally:
        client.close()
    journal_ids = [entry_id for entry_id in entry_ids if entry_id]
    duplicates = len(journal_ids) - len(set(journal_ids))
    FIGURES["kill -9 mid-compacting"] = {"killed_after": done, "entries": entries,
                                         "memories": len(journal_ids),
                                         "duplicates": duplicates,
                                         "lost": entries - len(set(journal_ids))}
    print(f"\nkill -9 mid-compacting (after {done} of {entries}): {len(journal_ids)} memories "
          f"for {entries} entries, {duplicates} duplicates")
    assert len(set(journal_ids)) == entries and duplicates == 0
