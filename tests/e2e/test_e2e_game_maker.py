"""
End-to-end, over telnet, what a game maker does: the demo's Ada with her persona, description
and room; a new assistant given a persona and a description; validated config, and a bad value
stored by hand surviving a reload; a forced wake in the middle of a compacting that waits on a
slow model. The game reads its LLM endpoint from the environment only
(`AI_ASSISTANT_LLM_*`, read by the contrib itself), pointed at a scripted model.
"""

import re
import threading
import time

import pytest
from game_server import login, running_game
from scripted_llm import Reply, ScriptedLLMServer

from ai_assistant.sleep.scoring import SCORING_SYSTEM_PROMPT

KEY = "sk-e2e-test-key-4321"
PERSONA = "You are Cleo, the ferrywoman of the east river. You speak little and charge a coin."


class Responder:
    """
    Conversation: a short answer. Importance scoring: an unusable reply, held while `held`
    is set (a model that hangs) until the test releases it; `scored` counts the replies sent.
    """

    def __init__(self):
        self.held = threading.Event()
        self.release = threading.Event()
        self.scoring = 0  # scoring requests received
        self.scored = 0

    def __call__(self, request):
        system = next((m.get("content") or "" for m in request.get("messages", [])
                       if m.get("role") == "system"), "")
        if system == SCORING_SYSTEM_PROMPT:
            self.scoring += 1
            if self.held.is_set():  # the server's request thread waits, as for a slow model
                self.release.wait(timeout=120)
            self.scored += 1
            return Reply.text("these events are beyond words")
        if request.get("tools"):
            return Reply.tool("say", {"message": "A coin for the crossing."})
        return Reply.text("{}")


def wait_until(condition, message, timeout=60):
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, message
        time.sleep(0.1)


@pytest.fixture(scope="module")
def llm():
    server = ScriptedLLMServer(responder=Responder()).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def game(llm):
    with running_game(env={"AI_ASSISTANT_LLM_BASE_URL": llm.base_url,
                           "AI_ASSISTANT_LLM_API_KEY": KEY,
                           "AI_ASSISTANT_LLM_MODEL": "scripted-model"}) as server:
        yield server


def test_the_demo_ada_has_a_persona_a_description_and_a_room_written_for_her(game):
    client = login(game)
    try:
        room = client.command("look", r"talk Ada[^\n]*\n")
        assert "harbour tower" in room and "Welcome to your new" not in room
        ada = client.command("look Ada", r"ink-stained[^\n]*\n")
        assert "This is a character." not in ada
        persona = client.command("@assistant/persona Ada", r"Description[^\n]*\n")
        assert "the archivist of the harbour tower" in persona
        # the endpoint came from the environment, read by the contrib itself
        status = client.command("@assistant Ada", r"provider:[^\n]*\n")
        assert "scripted-model at http://127.0.0.1" in status and KEY not in status
    finally:
        client.close()


def test_persona_and_description_of_a_new_assistant(game, llm):
    client = login(game)
    try:
        created = client.command(f"@assistant/create Cleo = {PERSONA}",
                                 r"Created assistant Cleo[^\n]*\n")
        assert "with your persona" in created
        client.command("@desc Cleo = A weathered woman leaning on a long pole.",
                       r"(?i)description[^\n]*\n|set[^\n]*\n")
        looked = client.command("look Cleo", r"long pole[^\n]*\n")
        assert "This is a character." not in looked
        shown = client.command("@assistant/persona Cleo", r"Description[^\n]*\n")
        assert PERSONA in shown and "long pole" in shown

        client.command("talk Cleo = can you take me across?",
                       r'Cleo says, "A coin for the crossing\."', timeout=40)
        systems = [m["content"] for r in llm.requests for m in r["messages"]
                   if m["role"] == "system" and "Cleo" in m["content"]]
        assert systems and systems[-1].rstrip().endswith(PERSONA)  # last: it takes precedence
        log = game.logs()
        assert re.search(r"first LLM request of this server process: endpoint "
                         r"http://127\.0\.0\.1:\d+/v1 \(from environment "
                         r"\(AI_ASSISTANT_LLM_BASE_URL\)\), model scripted-model \(from "
                         r"environment \(AI_ASSISTANT_LLM_MODEL\)\), key sk-\.\.\.4321", log)
        assert log.count("first LLM request of this server process") == 1
        assert KEY not in log
    finally:
        client.close()


def test_config_is_checked_before_it_is_stored_and_a_bad_stored_value_survives_a_reload(game):
    client = login(game)
    try:
        client.command("@assistant/create Dora", r"Created assistant Dora[^\n]*\n")
        refused = client.command("@assistant/config Dora = ticks.awake banana",
                                 r"Dora: not changed[^\n]*\n")
        assert "a whole number from 1 to 86400; got 'banana'" in refused
        refused = client.command("@assistant/config Dora = ticks.awake -5",
                                 r"Dora: not changed[^\n]*\n")
        assert "got -5" in refused and "ticker" not in refused.lower()
        refused = client.command("@assistant/config Dora = llm.temperature 99",
                                 r"Dora: not changed[^\n]*\n")
        assert "a number from 0.0 to 2.0" in refused
        done = client.command("@assistant/config Dora = ticks.awake 10", r"Dora: ticks[^\n]*\n")
        assert "= 10" in done and "emergency stop" not in done
        status = client.command("@assistant Dora", r"provider:[^\n]*\n")
        assert "ticker: every 10s" in status

        # a value an older version stored, written by hand, then a reload
        client.command("py me.search('Dora').attributes.add('config_overrides', "
                       "{'ticks.awake': 'banana'})", r">>>[^\n]*\n")
        game.reload(client)
        time.sleep(1)
        status = client.command("@assistant Dora", r"provider:[\s\S]*?journal:[^\n]*\n",
                                timeout=60)
        status += client.drain(0.5)
        assert "ticker: every 5s" in status
        assert "ignored setting ticks.awake = 'banana' from per-NPC config" in status
    finally:
        client.close()
    log = game.logs()
    assert "Traceback" not in log and "ValueError" not in log


def test_a_forced_wake_in_the_middle_of_compacting(game, llm):
    client = login(game)
    try:
        client.command("@assistant/create Eli", r"Created assistant Eli[^\n]*\n")
        for text in ("The north bridge fell", "Wolves at the quarry", "The mill burned"):
            client.command(f'@assistant/tool Eli = add_journal_entry {{"content": "{text}"}}',
                           r"success[^\n]*\n")
        responder = llm.responder
        responder.held.set()  # the scoring call hangs: compacting cannot end
        asked = responder.scoring
        client.command("@assistant/sleep Eli", r"now asleep[^\n]*\n")
        wait_until(lambda: responder.scoring > asked, "compacting never asked the model")
        deferred = client.command("@assistant/wake Eli", r"Eli: [^\n]*\n")
        assert "wake deferred: compacting" in deferred
        forced = client.command("@assistant/wake/force Eli", r"Eli: [^\n]*\n")
        assert "awake (forced: compacting was interrupted" in forced
        status = client.command("@assistant Eli", r"provider:[^\n]*\n")
        assert "mode: awake" in status and "ticker: every 5s" in status
        # the hanging call comes back later: it must not put the awake assistant to dreaming
        answered = responder.scored
        responder.held.clear()
        responder.release.set()
        wait_until(lambda: responder.scored > answered, "the held scoring call never ended")
        time.sleep(6)  # its answer reaches the game, and an awake tick (every 5 s) passes
        status = client.command("@assistant Eli", r"journal:[^\n]*\n")
        assert "mode: awake" in status
    finally:
        llm.responder.release.set()  # never leave the model server's thread waiting
        client.close()
    assert "Traceback" not in game.logs()
