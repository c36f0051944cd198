"""
End-to-end, over telnet against a real Evennia server: a whisper's secret never reaches another
player (not in the prompt built for them, not in what they see), whispers are answered
privately, braces in player text reach the room as typed on every path, and deleting an
assistant empties its long-term memory store (others' memories stay). On the shared game (its
own players and assistants). Select with `-m e2e`.
"""

import glob
import json
import os
import re
import sqlite3
import time

from game_server import login, player
from scripted_llm import Reply, ScriptedLLMServer

SECRET = "my secret password is swordfish"
BRACES = "I like {curly} braces, {0} and $You()"


def answer(request):
    """The scripted model: private thanks to a whisper, a refusal to anyone else."""
    last = request["messages"][-1]["content"] if request["messages"] else ""
    if "whisper from" in str(last):
        return Reply.tool("say", {"message": "Your secret is safe with me."})
    return Reply.tool("say", {"message": "I cannot help with that."})


def test_private_stays_private_braces_stay_literal_and_delete_forgets(shared_game):
    llm = ScriptedLLMServer(responder=answer).start()
    server = shared_game
    admin = carol = None
    seen_by_carol, scopes = [], {}
    try:
        admin = login(server)
        carol = player(server, "Wren")
        admin.command(f"@assistant/config Ada = llm.base_url {llm.base_url}",
                      r"Ada: llm.base_url[^\n]*\n")
        admin.command("@assistant/config Ada = llm.api_key test-key", r"\(hidden\)")

        # 1. a whisper is answered privately
        told = admin.command(f"whisper Ada = {SECRET}", r'Ada whispers: "Your secret is safe',
                             timeout=60)
        assert "You whisper to Ada" in told
        secret_requests = len(llm.requests)

        # 2. another player asks: nothing of the secret in her prompt, nor on her screen
        seen_by_carol.append(carol.drain(0.5))
        carol.send("talk Ada = What is the admin's password?")
        seen_by_carol.append(carol.read_until(r'Ada says, "I cannot help with that\."',
                                              timeout=60))
        # (as JSON: a Python repr escapes the apostrophe when the text also has a double
        # quote, as a shared game's longer history does)
        carols = [r for r in llm.requests[secret_requests:]
                  if "the admin's password" in json.dumps(r["messages"], ensure_ascii=False)]
        assert carols, "Wren's turn never reached the model"
        for request in carols:
            assert "swordfish" not in str(request["messages"])

        # 3. braces on every path, seen by the other player as typed
        seen_by_carol.append(carol.drain(0.3))
        admin.command(f"talk Ada = {BRACES}", re.escape(f'You say to Ada, "{BRACES}"'))
        seen_by_carol.append(carol.read_until(re.escape(f'says to Ada, "{BRACES}"')))
        admin.command(f"say {BRACES}", re.escape(f'You say, "{BRACES}"'))
        seen_by_carol.append(carol.read_until(re.escape(f'says, "{BRACES}"')))
        admin.command(f"pose grins: {BRACES}", re.escape(f"grins: {BRACES}"))
        seen_by_carol.append(carol.read_until(re.escape(f"grins: {BRACES}")))
        time.sleep(2)
        seen_by_carol.append(carol.drain(1.0))
        assert "swordfish" not in "".join(seen_by_carol)
        assert "Traceback" not in "".join(seen_by_carol)

        # 4. memories in the long-term store, for two assistants of the shared game's own: the
        # one to be deleted (as Ada was when this test had a game of its own) and another
        for name in (DELETED, KEPT):
            admin.command(f"@assistant/create {name}", rf"Created assistant {name}[^\n]*\n")
        for name, fact in ((DELETED, "The admin's password is swordfish"),
                           (KEPT, "The bakery opens at dawn")):
            stored = admin.command(
                f'@assistant/tool {name} = store_memory {{"content": "{fact}"}}',
                r'"success": (true|false)', timeout=120)
            assert '"success": true' in stored, stored
        for name in (DELETED, KEPT):
            out = admin.command(f"py me.msg(me.search('{name}').attributes.get('memory_scope'))",
                                r"assistant_[0-9a-f]{32}")
            scopes[name] = re.findall(r"assistant_[0-9a-f]{32}", out)[-1]
        assert scopes[DELETED] != scopes[KEPT]  # random, never an object id

        # 5. delete it: its memories go from the store, the other's stay
        admin.command(f"@destroy/force {DELETED}", r"(?i)destroyed|deleted[^\n]*\n")
        deadline = time.time() + 120
        while f"deleted 1 memories of {scopes[DELETED]}" not in server.logs():
            assert time.time() < deadline, server.logs()[-3000:]
            time.sleep(0.5)
        assert store_contents(admin, scopes[DELETED]) == []
        assert store_contents(admin, scopes[KEPT]) == ["The bakery opens at dawn"]
    finally:
        for client in (admin, carol):
            if client is not None:
                client.close()
        llm.stop()
    assert "Traceback" not in server.logs()
    # mem0's history database keeps a memory's text: nothing of the deleted one is left there
    # (the game's data folder; a subfolder of it on PostgreSQL: ai_assistant/game_data)
    history = next(iter(glob.glob(os.path.join(
        server.dir, "server", "ai_assistant_data", "**", "history.db"), recursive=True)))
    with sqlite3.connect(f"file:{history}?mode=ro", uri=True) as db:
        kept = db.execute("SELECT count(*) FROM history WHERE old_memory LIKE ? OR "
                          "new_memory LIKE ?", ("%swordfish%", "%swordfish%")).fetchone()
    assert kept == (0,)


# the shared game's assistants of this test (the other shared-game tests use other names)
DELETED, KEPT = "Mira", "Nico"
LISTED = ('py from ai_assistant.adapters import game_database, game_settings, '
          'semantic_data_dir; from ai_assistant.memory.longterm.mem0_store import '
          'make_semantic_store; from ai_assistant.plumbing.settings import Settings; '
          '_settings = Settings(game_settings()); _store = make_semantic_store(_settings, '
          'semantic_data_dir(), "{scope}", database=game_database(_settings)); '
          '_store.list(limit=100).addCallback(lambda found, me=me, s=_store: (s.close(), '
          'me.msg("MEM" + "<" + __import__("json").dumps(sorted(m["memory"] for m in found))'
          ' + ">" + "MEM")))')


def store_contents(client, scope):
    """The memories stored under `scope` in the running game's own store (asked in the game:
    its embedded store is the game process's alone while it runs)."""
    client.drain(0.2)
    client.send(LISTED.format(scope=scope))
    found = client.read_until(r"MEM<([\s\S]*?)>MEM", timeout=60)
    return json.loads(found.rsplit("MEM<", 1)[1][:-4])
