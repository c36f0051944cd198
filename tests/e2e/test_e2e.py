"""
End-to-end: a real Evennia server started from this repository, driven over telnet as a
player would. Select with `-m e2e`, skip with `-m "not e2e"`.
"""

import re
import time

import pytest
from game_server import TelnetClient, login


@pytest.fixture(scope="module")
def mechanical_game(shared_game):
    return shared_game


def test_admin_commands_over_telnet(mechanical_game):
    client = login(mechanical_game)
    try:
        # the world build script made Ada in Limbo at first start
        listing = client.command("@assistant", r"AI assistants[\s\S]*Ada[^\n]*\n")
        assert "awake" in listing

        created = client.command("@assistant/create Bob", r"Created assistant Bob[^\n]*\n")
        assert "ticking every 5s" in created
        again = client.command("@assistant/create Bob", r"already an assistant[^\n]*\n")
        assert "Bob" in again

        status = client.command("@assistant Bob", r"provider:[^\n]*\n")
        assert "mode: awake" in status
        assert "ticker: every 5s" in status
        assert "mechanical (no LLM configured)" in status

        tickers = client.command("@tickers", r"ai_assistant_\d+[\s\S]*?\n")
        assert re.search(r"\b5\b", tickers)

        slept = client.command("@assistant/sleep Bob", r"now asleep[^\n]*\n")
        assert "ticker 60s" in slept
        status = client.command("@assistant Bob", r"provider:[^\n]*\n")
        assert "mode: sleep" in status
        assert "ticker: every 60s" in status

        # wake is deferred while compacting; with nothing to compact that ends in one tick
        deadline = time.time() + 30
        while True:
            woke = client.command("@assistant/wake Bob", r"Bob: [^\n]*\n")
            if "awake" in woke and "deferred" not in woke:
                break
            assert "deferred: compacting" in woke
            assert time.time() < deadline, "wake stayed deferred"
            time.sleep(1)
        status = client.command("@assistant Bob", r"provider:[^\n]*\n")
        assert "mode: awake" in status
        assert "ticker: every 5s" in status

        unknown = client.command("@assistant Nobody", r"No assistant called[^\n]*\n")
        assert "Ada" in unknown and "Bob" in unknown
        bad = client.command("@assistant/dance Bob", r"Unknown switch[^\n]*\n")
        assert "/create" in bad
        config = client.command("@assistant/config Bob = no.such.key 3", r"Unknown setting[^\n]*\n")
        assert "no.such.key" in config
        talk = client.command("talk Bob = hello there", r"Bob[^\n]*mechanical mode[^\n]*\n")
        assert "no LLM is configured" in talk
    finally:
        client.close()
    assert "Traceback" not in mechanical_game.logs()


def test_state_survives_a_reload(mechanical_game):
    client = login(mechanical_game)
    try:
        client.command("@assistant/create Cleo", r"Created assistant Cleo[^\n]*\n")
        client.command('@assistant/tool Cleo = add_journal_entry {"content": "The well is dry"}',
                       r"success[^\n]*\n")
        client.command("@assistant/sleep Cleo", r"now asleep[^\n]*\n")
        before = client.command("@assistant Cleo", r"journal:[^\n]*\n")
        ticks_before = int(re.search(r"ticks: (\d+)", before).group(1))
        mechanical_game.reload(client)
        time.sleep(1)
        after = client.command("@assistant Cleo", r"journal:[^\n]*\n", timeout=60)
        assert "mode: sleep" in after and "ticker: every 60s" in after
        assert int(re.search(r"ticks: (\d+)", after).group(1)) >= ticks_before
        assert "journal: 1 entries" in after
        tickers = client.command("@tickers", r"Active tickers[\s\S]*\n\s*\n?", timeout=20)
        tickers += client.drain(0.5)
        # exactly one ticker for Cleo after the reload, at the sleep rate
        cleo_id = re.search(r"Cleo \(#(\d+)\)", after).group(1)
        cleo_rows = [line for line in tickers.splitlines()
                     if re.search(rf"ai_assistant_{cleo_id}\b", line)]
        assert len(cleo_rows) == 1 and re.search(r"\b60\b", cleo_rows[0]), tickers
    finally:
        client.close()


def test_players_without_admin_do_not_see_the_command(mechanical_game):
    client = TelnetClient(mechanical_game.telnet_port)
    try:
        client.read_until(r"connect", timeout=60)
        client.send("create player1 secret-pass-1")
        client.read_until(r"Is this what you intended", timeout=60)
        client.send("Y")
        client.read_until(r"(?i)created|welcome", timeout=60)
        client.send("connect player1 secret-pass-1")
        client.read_until(r"Limbo", timeout=60)
        reply = client.command("@assistant Ada", r"(?i)command[^\n]*not[^\n]*\n")
        assert "mode:" not in reply
        help_text = client.command("help @assistant", r"\n[^\n]*\n", timeout=10)
        assert "Manage AI assistant" not in help_text + client.drain(0.5)
    finally:
        client.close()


def test_player_talks_to_ada_through_a_scripted_llm(mechanical_game):
    from scripted_llm import Reply, ScriptedLLMServer

    def responder(request):
        return Reply.tool("say", {"message": "Welcome to Limbo, traveller.",
                                  "reasoning": "greet"})

    llm = ScriptedLLMServer(responder=responder).start()
    client = login(mechanical_game)
    try:
        client.command(f"@assistant/config Ada = llm.base_url {llm.base_url}",
                       r"Ada: llm.base_url[^\n]*\n")
        client.command("@assistant/config Ada = llm.api_key test-key", r"\(hidden\)")
        status = client.command("@assistant Ada", r"provider:[^\n]*\n")
        assert "mechanical" not in status
        assert "test-key" not in status

        heard = client.command("talk Ada = hello there, where am I?",
                               r'Ada says, "Welcome to Limbo, traveller\."', timeout=40)
        assert 'You say to Ada, "hello there, where am I?"' in heard
        # what the player said reached the LLM inside a quoted data block
        user_messages = [m["content"] for r in llm.requests for m in r["messages"]
                         if m["role"] == "user"]
        assert any("hello there, where am I?" in text and "<<<BEGIN" in text
                   for text in user_messages)

        # `say` naming her works too
        client.command("say Ada, one more question", r'Ada says, "Welcome', timeout=40)
        status = client.command("@assistant Ada", r"provider:[\s\S]*?calls[^\n]*\n")
        assert re.search(r"in [1-9]\d* calls", status)
        journal = client.command("@assistant/journal Ada", r"one more question[^\n]*\n")
        assert "hello there, where am I?" in journal
    finally:
        client.close()
        llm.stop()
    assert "Traceback" not in mechanical_game.logs()
