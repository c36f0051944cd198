"""
End-to-end, over telnet against a real Evennia server: a whisper's secret never reaches another
player (not in the prompt built for them, not in what they see), whispers are answered
privately, braces in player text reach the room as typed on every path, and deleting an
assistant empties its long-term memory store (others' memories stay). Select with `-m e2e`.
"""

import glob
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


def test_private_stays_private_braces_stay_literal_and_delete_forgets(new_game):
    llm = ScriptedLLMServer(responder=answer).start()
    server = new_game()
    server.start()
    admin = carol = None
    seen_by_carol, scopes = [], {}
    try:
        admin = login(server)
        carol = player(server, "Carol")
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
        carols = [r for r in llm.requests[secret_requests:]
                  if "the admin's password" in str(r["messages"])]
        assert carols, "Carol's turn never reached the model"
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

        # 4. memories in the long-term store, for Ada and for Bob
        admin.command("@assistant/create Bob", r"Created assistant Bob[^\n]*\n")
        for name, fact in (("Ada", "The admin's password is swordfish"),
                           ("Bob", "The bakery opens at dawn")):
            stored = admin.command(
                f'@assistant/tool {name} = store_memory {{"content": "{fact}"}}',
                r'"success": (true|false)', timeout=120)
            assert '"success": true' in stored, stored
        for name in ("Ada", "Bob"):
            out = admin.command(f"py me.msg(me.search('{name}').attributes.get('memory_scope'))",
                                r"assistant_[0-9a-f]{32}")
            scopes[name] = re.findall(r"assistant_[0-9a-f]{32}", out)[-1]
        assert scopes["Ada"] != scopes["Bob"]  # random, never an object id

        # 5. delete Ada: her memories go from the store
        admin.command("@destroy/force Ada", r"(?i)destroyed|deleted[^\n]*\n")
        deadline = time.time() + 120
        while f"deleted 1 memories of {scopes['Ada']}" not in server.logs():
            assert time.time() < deadline, server.logs()[-3000:]
            time.sleep(0.5)
    finally:
        for client in (admin, carol):
            if client is not None:
                client.close()
        left = server.stop()
        llm.stop()
    try:
        assert not left, f"server processes left running: {left}"
        assert "Traceback" not in server.logs()
        # the game database's data folder (a subfolder of it on PostgreSQL: ai_assistant/game_data)
        data_dir = os.path.dirname(next(iter(glob.glob(os.path.join(
            server.dir, "server", "ai_assistant_data", "**", "history.db"), recursive=True))))
        assert store_contents(data_dir, scopes["Ada"]) == []
        assert store_contents(data_dir, scopes["Bob"]) == ["The bakery opens at dawn"]
        with sqlite3.connect(os.path.join(data_dir, "history.db")) as db:
            kept = db.execute("SELECT count(*) FROM history WHERE old_memory LIKE ? OR "
                              "new_memory LIKE ?", ("%swordfish%", "%swordfish%")).fetchone()
        assert kept == (0,)
    finally:
        server.cleanup()


def store_contents(data_dir, scope):
    """The memories stored under `scope` in a stopped game's store."""
    from support import result_of, sync_runner

    from ai_assistant.memory.longterm.mem0_store import close_all_stores, make_semantic_store
    from ai_assistant.plumbing.settings import DEFAULTS, Settings

    # the game's store is the embedded one, whatever store this test run keeps memories in
    embedded = {**DEFAULTS, "memory": {**DEFAULTS["memory"], "store": "embedded"}}
    store = make_semantic_store(Settings(embedded), data_dir, scope, runner=sync_runner)
    try:
        return [item["memory"] for item in result_of(store.list(limit=100))]
    finally:
        close_all_stores()
