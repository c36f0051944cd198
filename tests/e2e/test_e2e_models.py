"""
End-to-end, as real models answer: a real Evennia server driven over telnet, its assistant
pointed at the scripted OpenAI-compatible server sending the reply shapes of real servers.
An extra argument, a call written into the content (a server without a tool parser), and a
model that only calls a tool that does not exist: every time, the player hears an answer.
Select with `-m e2e`.
"""

import json

import pytest
from game_server import login
from scripted_llm import Reply, ScriptedLLMServer


@pytest.fixture(scope="module")
def game(shared_game):
    return shared_game


def test_real_reply_shapes_reach_the_player_over_telnet(game):
    llm = ScriptedLLMServer().start()
    client = login(game)
    try:
        client.command(f"@assistant/config Ada = llm.base_url {llm.base_url}",
                       r"Ada: llm.base_url[^\n]*\n")
        client.command("@assistant/config Ada = llm.api_key test-key", r"\(hidden\)")

        # 1. `say` with an argument the schema does not know
        llm.script(Reply.tool("say", {"message": "Extra arguments are fine.", "text": "x"}))
        heard = client.command("talk Ada = hello", r'Ada says, "Extra arguments are fine\."',
                               timeout=40)
        assert "unexpected keyword" not in heard

        # 2. a Hermes/Qwen call in the content, as vLLM without a tool parser sends it
        llm.script(Reply.served_as("vllm-no-parser", "say",
                                   {"message": "Read from the content."}))
        heard = client.command("talk Ada = and again", r'Ada says, "Read from the content\."',
                               timeout=40)
        assert "<tool_call>" not in heard

        # 3. a model that only calls a tool that does not exist: the fallback line
        llm.default = Reply.tool("teleport", {"where": "moon"})
        heard = client.command("talk Ada = are you there?", r'Ada says, "Forgive me[^"]*"',
                               timeout=60)
        assert "teleport" not in heard
        status = client.command("@assistant Ada", r"last unanswered:[^\n]*\n")
        assert "max_errors" in status

        # the observation the model got for the unknown tool named the close ones
        observations = [m["content"] for r in llm.requests for m in r["messages"]
                        if m["role"] == "tool"]
        assert any("unknown tool 'teleport'" in json.loads(text).get("error", "")
                   for text in observations)
        # the model read no colour codes and a lean tool set
        offered = {spec["function"]["name"] for spec in llm.requests[0]["tools"]}
        assert "note_scene" not in offered and "say" in offered
    finally:
        client.close()
        llm.stop()
    assert "Traceback" not in game.logs()
