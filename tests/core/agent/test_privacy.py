"""
Private stays private, in the core: what is whispered carries its audience (the whisperer's
stable id) into the journal, working memory, entity observations, scene notes and nodes,
memories' metadata and what the model journals in a whispered conversation; it stays out of
the shared conversation history, reflections, profile attributes, the patrol's merges and
diary; it is answered privately; and a prompt built for another player never shows it.
"""

import pytest
import support
from scripted_llm import FakeWorld, Reply, drive, sync_runner
from test_nodes import FakeEmbedder, scene
from twisted.internet import task

from ai_assistant.agent import awake, perception
from ai_assistant.agent.blocks.people import entity_context_block
from ai_assistant.agent.react import run_react_cycle
from ai_assistant.memory import audience, entities, node_vectors, nodes
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.nodes import Nodes
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.ports import MemoryState, iso
from ai_assistant.plumbing.settings import DEFAULTS, deep_merge
from ai_assistant.sleep import entity_consolidation, patrol, reflection
from ai_assistant.sleep.consolidation import consolidation_metadata
from ai_assistant.tools.catalogue import load_all_tools

SECRET = "my secret password is swordfish"
BOB = {"id": "#2", "name": "Bob", "is_player": True}
CARA = {"id": "#3", "name": "Cara", "is_player": True}


@pytest.fixture
def clock():
    return task.Clock()


@pytest.fixture
def make(llm_config, clock):
    def factory(**overrides):
        state, log = MemoryState(), support.Log()
        client = LLMClient(deep_merge(DEFAULTS, {"llm": llm_config})["llm"], npc_key="ada-t",
                           npc_name="Ada", state=state, log=log, runner=sync_runner, clock=clock)
        return support.make_ports({"llm": llm_config}, key="ada-t", state=state, llm=client,
                                  world=FakeWorld(present=[BOB, CARA]), log=log,
                                  overrides={"react.thinking_delay": 0,
                                             "perception.speaker_cooldown": 0, **overrides})
    return factory


def hear(ports, kind, text, who=BOB):
    PerceptionQueue(ports).add(perception.make_event(
        kind=kind, text=text, sender=who["name"], sender_id=who["id"],
        time=iso(ports.clock.now()), classification=perception.classify(kind, text,
                                                                        names=["Ada"])))


def tick(ports, clock):
    return drive(awake.run_awake_tick(ports, run_cycle=run_react_cycle), clock)


def whole_request(request):
    return " ".join(str(m.get("content") or "") for m in request["messages"])


# --- the contract ------------------------------------------------------------------------------


def test_visible_to_and_the_audience_of_items():
    public, private = {"content": "hi"}, {"content": SECRET, "audience": "#2"}
    hit = {"memory": SECRET, "metadata": {"audience": "#2"}}
    assert audience.audience_of(public) is audience.PUBLIC
    assert audience.audience_of(private) == audience.audience_of(hit) == "#2"
    assert audience.visible_to(public, None) and audience.visible_to(public, "#3")
    assert audience.visible_to(private, "#2") and audience.visible_to(hit, "#2")
    assert not audience.visible_to(private, "#3") and not audience.visible_to(hit, None)


def test_a_conversation_turn_knows_its_viewer_and_audience():
    ports = support.make_ports(world=FakeWorld(present=[BOB]))
    open_talk = awake.ConversationWorld(ports.world, ports, BOB)
    assert audience.turn_viewer(open_talk) == "#2"
    assert audience.turn_audience(open_talk) is audience.PUBLIC
    open_talk.private = True
    assert audience.turn_audience(open_talk) == "#2"
    # outside a conversation (sleep, an autonomous tick) nobody in particular
    assert audience.turn_viewer(ports.world) is None
    assert audience.turn_audience(None) is audience.PUBLIC


# --- what a whisper leaves behind ----------------------------------------------------------------


def test_a_whisper_is_journaled_private_and_answered_privately(llm_server, make, clock):
    ports = make()
    llm_server.script(Reply.tool("say", {"message": "Your secret is safe with me."}))
    hear(ports, "whisper", SECRET)
    tick(ports, clock)
    assert ports.world.said == []
    assert ports.world.whispers == [("Bob", "Your secret is safe with me.")]
    entry = Journal(ports).entries()[-1]
    assert SECRET in entry["content"] and entry["audience"] == "#2"
    # not in the history every later summary is made of; kept in Bob's own working memory
    shared = ports.state.get(documents.CONVERSATION_HISTORY) or []
    assert not any(SECRET in m["content"] or "secret is safe" in m["content"] for m in shared)
    # and the observation in Bob's profile is his alone
    observation = entities.get_profiles(ports)["#2"]["observations"][-1]
    assert observation["text"] == SECRET and observation["audience"] == "#2"


def test_what_was_said_aloud_stays_public(llm_server, make, clock):
    ports = make()
    llm_server.script(Reply.tool("say", {"message": "Hello."}))
    hear(ports, "talk", "hello there")
    tick(ports, clock)
    entry = Journal(ports).entries()[-1]
    assert "audience" not in entry and ports.world.said == ["Hello."]
    assert any("hello there" in m["content"]
               for m in ports.state.get(documents.CONVERSATION_HISTORY))


def test_a_prompt_for_another_player_never_shows_the_whisper(llm_server, make, clock):
    ports = make()
    llm_server.script(Reply.tool("say", {"message": "Noted."}),
                      Reply.tool("say", {"message": "Welcome, Cara."}),
                      Reply.tool("say", {"message": "Of course, Bob."}))
    hear(ports, "whisper", SECRET)
    tick(ports, clock)
    hear(ports, "talk", "What is the password, Ada? Tell me about swordfish.", who=CARA)
    tick(ports, clock)
    cara_prompt = whole_request(llm_server.requests[1])
    assert "swordfish" not in cara_prompt.replace("Tell me about swordfish", "")
    assert "secret password" not in cara_prompt
    # Bob himself still gets it back
    hear(ports, "talk", "Ada, what did I tell you about the password?")
    tick(ports, clock)
    assert "secret password is swordfish" in whole_request(llm_server.requests[2])


def test_what_the_model_journals_or_notes_in_a_whispered_turn_is_private():
    registry = load_all_tools()
    ports = support.make_ports(world=FakeWorld(present=[BOB]))
    conversation = awake.ConversationWorld(ports.world, ports, BOB, private=True)
    turn = support.make_ports(world=conversation, state=ports.state)
    registry.get("add_journal_entry").run(turn, content="Bob's password is swordfish")
    assert Journal(ports).entries()[-1]["audience"] == "#2"
    registry.get("note_scene").run(turn, **scene("told me his password"))
    assert Nodes(ports).scene_notes()[-1]["audience"] == "#2"
    conversation.private = False
    registry.get("add_journal_entry").run(turn, content="Bob likes bread")
    assert "audience" not in Journal(ports).entries()[-1]


# --- sleep carries the audience over, or keeps private things out --------------------------------


def test_memories_made_from_a_private_entry_carry_its_audience():
    private = {"id": 4, "content": SECRET, "audience": "#2", "source_type": "direct"}
    assert consolidation_metadata(private)["audience"] == "#2"
    assert "audience" not in consolidation_metadata({"id": 5, "content": "hello"})


def test_private_observations_never_become_profile_attributes():
    ports = support.make_ports()
    People(ports).observe_events([
        {"sender_id": "#2", "sender": "Bob", "kind": "whisper", "text": SECRET,
         "classification": "direct_message"},
        {"sender_id": "#2", "sender": "Bob", "kind": "talk", "text": "I love bread",
         "classification": "direct_message"},
    ])
    profile = entities.get_profiles(ports)["#2"]
    prompt = entity_consolidation.consolidation_prompt(profile)
    assert "I love bread" in prompt and "swordfish" not in prompt
    # shown in a prompt for Bob, not in one for Cara (Bob standing by)
    for_bob = entity_context_block(ports, {"interlocutor": BOB, "present": [BOB]})
    for_cara = entity_context_block(ports, {"interlocutor": CARA, "present": [BOB, CARA]})
    assert "swordfish" in for_bob and "swordfish" not in for_cara
    assert "I love bread" in for_cara


def test_reflection_reads_public_entries_only():
    ports = support.make_ports()
    Journal(ports).add(f"Bob whispered: {SECRET}", audience="#2")
    Journal(ports).add("Bob said the bread was stale")
    state = {"entries_since_reflection": [1, 2]}
    window = reflection._window_entries(ports, Journal(ports), state)
    assert [e["id"] for e in window] == [2]
    hits = [{"id": "a", "memory": SECRET, "metadata": {"audience": "#2"}, "score": 0.9},
            {"id": "b", "memory": "bread", "metadata": {}, "score": 0.5}]
    assert [h["id"] for h in reflection._normalise_semantic_hits(hits)] == ["mem:b"]


def test_a_private_scene_becomes_a_private_node_left_out_of_merges_and_the_diary():
    fake = FakeEmbedder()
    previous = node_vectors.set_embedding(fake, sync_runner)
    try:
        ports = support.make_ports()
        Nodes(ports).add_scene_note(scene("told me a secret"), audience="#2")
        Nodes(ports).add_scene_note(scene("bought bread"))
        support.result_of(patrol.convert_scene_notes(ports))
    finally:
        node_vectors.set_embedding(**previous)
    graph = Nodes(ports).nodes()
    by_action = {n["scene"]["action"]: n for n in graph.values()}
    assert by_action["told me a secret"]["audience"] == "#2"
    assert "audience" not in by_action["bought bread"]
    for cluster_id in {n["cluster_id"] for n in graph.values()}:
        members = nodes.public_members(graph, cluster_id)
        assert all(n["scene"]["action"] != "told me a secret" for n in members)


@pytest.mark.parametrize("tool, arguments", [
    ("search_journal", {"query": "password swordfish"}),
    ("recall_memories", {"query": "password swordfish"}),
])
def test_lookup_tools_in_another_players_turn_never_return_the_whisper(
        llm_server, make, clock, tool, arguments):
    ports = make()
    llm_server.script(Reply.tool("say", {"message": "Noted."}),
                      Reply.tool(tool, arguments),
                      Reply.tool("say", {"message": "I know nothing of that."}))
    hear(ports, "whisper", SECRET)
    tick(ports, clock)
    hear(ports, "talk", "Ada, what is Bob's password?", who=CARA)
    tick(ports, clock)
    # the tool's result went back to the model in the next request: nothing of the secret
    assert len(llm_server.requests) == 3
    assert "swordfish" not in whole_request(llm_server.requests[2]).replace(
        "password swordfish", "")
    assert ports.world.said == ["I know nothing of that."]


# --- deleting an assistant forgets its memories --------------------------------------------------


def test_delete_all_empties_one_scope_and_its_history_only(tmp_path):
    import sqlite3

    from ai_assistant.memory.longterm.mem0_store import close_all_stores, make_semantic_store
    from ai_assistant.plumbing.settings import Settings

    settings = Settings(DEFAULTS)
    ada = make_semantic_store(settings, str(tmp_path), "assistant_ada", runner=sync_runner)
    bea = make_semantic_store(settings, str(tmp_path), "assistant_bea", runner=sync_runner)
    try:
        for text in (SECRET, "Bob hides the vault key under the swordfish statue",
                     "The guild meets at midnight in the cellar"):
            support.result_of(ada.add(text))
        support.result_of(bea.add("The bakery opens at dawn"))
        assert support.result_of(ada.delete_all()) == 3
        assert support.result_of(ada.list()) == []
        assert [m["memory"] for m in support.result_of(bea.list())] == [
            "The bakery opens at dawn"]
        assert support.result_of(ada.delete_all()) == 0
    finally:
        close_all_stores()
    with sqlite3.connect(tmp_path / "history.db") as db:
        texts = db.execute("SELECT old_memory, new_memory FROM history").fetchall()
    assert texts and not any("swordfish" in str(row) for row in texts)
    assert any("bakery" in str(row) for row in texts)


def test_private_scenes_are_recalled_for_their_teller_only():
    from ai_assistant.agent.blocks.memory_nodes import recent_nodes_block
    from ai_assistant.tools.nodes import search_nodes

    ports = support.make_ports(world=FakeWorld(present=[BOB, CARA]))
    graph = {
        "n1": {**nodes.new_node("n1", nodes.parse_scene_input(scene("hid the swordfish key"))),
               "audience": "#2", "last_activated": "2025-01-01T12:00:00Z"},
        "n2": {**nodes.new_node("n2", nodes.parse_scene_input(scene("baked the swordfish pie"))),
               "last_activated": "2025-01-01T12:00:00Z"},
    }
    ports.state.set(documents.MEMORY_NODES, graph)
    for who, expected in ((BOB, {"n1", "n2"}), (CARA, {"n2"})):
        turn = support.make_ports(state=ports.state, world=awake.ConversationWorld(
            ports.world, ports, who))
        assert {n["id"] for n in search_nodes(turn, "swordfish")} == expected
        block = recent_nodes_block(ports, {"interlocutor": who})
        assert ("hid the swordfish key" in block) == (who is BOB)
