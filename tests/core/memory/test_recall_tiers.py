"""
Recall over every tier: memory nodes (the patrol's scenes) and what entity profiles learnt
about people are ranked with the journal and the long-term store, in the prompt and in
`search_journal` alike.

Core tests, no Evennia.
"""

from datetime import UTC, datetime

from support import make_ports, result_of
from test_recall_pipeline import ListingStore, memory

from ai_assistant.memory.recall import pipeline
from ai_assistant.memory.recall.pipeline import RecallQuery
from ai_assistant.memory.recall.tiers import node_item, profile_item, tier_items
from ai_assistant.plumbing import documents

NOW = datetime(2023, 6, 1, 12, 0, tzinfo=UTC)


def scene_node(node_id, action, *, when="2023-05-20", status="active", audience=None):
    node = {"id": node_id, "status": status, "importance": 0.7, "feeling": "proud",
            "themes": ["music"], "created_at": "2023-05-21T08:00:00Z",
            "scene": {"when": [when], "setting": "the market square", "action": action,
                      "dialogue": []}}  # fmt: skip
    if audience:
        node["audience"] = audience
    return node


def profile(entity_id, name, attributes):
    return {"entity_id": entity_id, "name": name, "attributes": attributes,
            "observations": [], "last_consolidated": "2023-05-25T09:00:00Z",
            "last_seen": "2023-05-25T09:00:00Z"}  # fmt: skip


def ports_with(nodes=(), profiles=(), memories=()):
    ports = make_ports(semantic=ListingStore(memories),
                       overrides={"recall.embedding_weight": 0.0})  # fmt: skip
    ports.clock.current = NOW
    ports.state.set(documents.MEMORY_NODES, {node["id"]: node for node in nodes})
    ports.state.set(documents.ENTITY_PROFILES, {p["entity_id"]: p for p in profiles})
    return ports


def recalled_lines(ports, text, viewer="#12"):
    _, lines = result_of(pipeline.recall(ports, RecallQuery(text=text, viewer=viewer,
                                                            limit=5, budget=400)))
    return lines


def test_a_scene_the_patrol_filed_is_recalled_dated_by_when_it_happened():
    ports = ports_with(nodes=[scene_node("n1", "Tova played the fiddle for the crowd"),
                              scene_node("n2", "a cart lost a wheel", when="2023-05-02")])
    recalled, lines = result_of(pipeline.recall(ports, RecallQuery(
        text="Did Tova play the fiddle?", viewer="#12", limit=5, budget=400)))
    assert recalled[0].item["id"] == "node:n1"  # the best match first...
    # ...shown dated by the scene's own day, the scenes in time order
    assert ("- [20 May 2023] the market square — Tova played the fiddle for the crowd "
            "— (proud)") in lines


def test_a_forgotten_scene_is_never_recalled():
    assert node_item(scene_node("n1", "Tova played the fiddle", status="dead")) is None
    ports = ports_with(nodes=[scene_node("n1", "Tova played the fiddle", status="dead")])
    assert recalled_lines(ports, "fiddle") == []


def test_what_a_profile_learnt_about_someone_absent_is_recalled():
    ports = ports_with(profiles=[
        profile("#30", "Tova", {"instrument": "fiddle", "children": "two"}),
        profile("#31", "Wenna", {"job": "counsellor"}),
    ])  # fmt: skip
    lines = recalled_lines(ports, "What instrument does Tova play?")
    # lines of the same moment are shown in a fixed order, not by rank: look for it
    assert ("- [25 May 2023] What I know about Tova: instrument: fiddle; children: two"
            in lines)
    # a person the assistant learnt nothing about is no item at all
    assert profile_item(profile("#32", "Passer-by", {})) is None


def test_a_private_scene_is_recalled_for_its_audience_only():
    ports = ports_with(nodes=[scene_node("n1", "Ilse hid the key under the fiddle case",
                                         audience="#12")])  # fmt: skip
    assert recalled_lines(ports, "where is the key hidden", viewer="#12")
    assert recalled_lines(ports, "where is the key hidden", viewer="#2") == []


def test_every_tier_competes_in_one_ranking_and_one_budget():
    ports = ports_with(
        nodes=[scene_node("n1", "Tova played the fiddle at the fair")],
        profiles=[profile("#30", "Tova", {"instrument": "fiddle"})],
        memories=[memory("m1", "Tova said to me: \"I practise the fiddle daily.\"",
                         entry_id=7, speaker="Tova")],
    )  # fmt: skip
    lines = recalled_lines(ports, "Tova fiddle")
    assert len(lines) == 3  # a memory, a scene and a profile, one line each
    assert any("practise" in line for line in lines)
    assert any("at the fair" in line for line in lines)
    assert any("What I know about Tova" in line for line in lines)
    # the long-term store only (`journal=False`) leaves the other tiers out
    _, only = result_of(pipeline.recall(ports, RecallQuery(text="Tova fiddle",
                                                           viewer="#12", journal=False)))
    assert len(only) == 1 and "practise" in only[0]


def test_the_tiers_items_are_made_from_the_documents_as_they_are():
    items = tier_items({"n1": scene_node("n1", "a song")}, {"#30": profile("#30", "Mel",
                                                                           {"job": "baker"})})
    assert [item["tier"] for item in items] == ["node", "profile"]
    assert items[0]["id"] == "node:n1" and items[1]["id"] == "profile:#30"
