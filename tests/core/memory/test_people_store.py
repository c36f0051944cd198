"""The people's owner: `People(ports)` is the only writer of the entity profiles."""

import pytest
from support import ChangeCheckingState, make_ports

from ai_assistant.memory.entities import People
from ai_assistant.memory.entity_pruning import profiles_to_drop
from ai_assistant.plumbing import documents


def talk(text, sender="Alice", sender_id="#12", kind="talk", classification="direct_message"):
    return {"kind": kind, "text": text, "sender": sender, "sender_id": sender_id,
            "classification": classification}


def test_observe_creates_a_profile_and_a_direct_line_moves_the_relationship():
    # each observation says what it changed (one profile), and the change gives the profiles
    ports = make_ports(state=ChangeCheckingState())
    people = People(ports)
    stored = people.observe("#12", "Alice", "thank you, kind friend")
    assert stored["observations"][0]["text"] == "thank you, kind friend"
    assert stored["relationship"]["interaction_count"] == 1
    assert stored["relationship"]["favorability"] > 0.1
    overheard = people.observe("#13", "Bob", "nice weather", interaction=False)
    assert overheard["relationship"]["interaction_count"] == 0
    assert set(ports.state.get(documents.ENTITY_PROFILES)) == {"#12", "#13"}
    assert ports.state.described == 1


def test_observe_events_skips_itself_and_only_moves_last_seen_of_known_arrivals():
    ports = make_ports(key="ada", state=ChangeCheckingState())
    people = People(ports)
    people.observe_events([talk("hello"), talk("me", sender="Ada", sender_id="ada")])
    ports.clock.advance(hours=1)
    people.observe_events([{"kind": "arrive", "sender": "Alice", "sender_id": "#12"},
                           {"kind": "arrive", "sender": "Zed", "sender_id": "#99"}])
    assert set(people.profiles()) == {"#12"}
    assert people.profile("#12")["last_seen"] == "2025-01-01T13:00:00Z"
    assert ports.state.described == 1  # the arrival's last_seen


def test_a_whisper_is_an_observation_only_its_speaker_may_see():
    ports = make_ports()
    People(ports).observe_events([talk("my secret", kind="whisper")])
    observation = People(ports).profile("#12")["observations"][0]
    assert observation["audience"] == "#12" and observation["source"] == "whisper"


def test_find_by_id_name_and_unique_prefix():
    ports = make_ports()
    people = People(ports)
    people.observe("#12", "Alice", "hi")
    people.observe("#13", "Alfred", "hi")
    assert people.find("12")["name"] == "Alice"
    assert people.find("alice")["entity_id"] == "#12"
    assert people.find("Alf")["entity_id"] == "#13"
    assert people.find("Al") is None  # two names start so
    assert people.find("") is None


def test_relevant_puts_the_people_present_first():
    ports = make_ports()
    people = People(ports)
    for entity_id, name in (("#1", "Ann"), ("#2", "Ben"), ("#3", "Cid")):
        ports.clock.advance(minutes=1)
        people.observe(entity_id, name, "hello")
    chosen = people.relevant(["#1"], limit=2)
    assert [(profile["name"], present) for profile, present in chosen] == [
        ("Ann", True), ("Cid", False)]


def test_set_attribute_replaces_the_profile_and_removes_with_an_empty_value():
    ports = make_ports()
    people = People(ports)
    before = people.observe("#12", "Alice", "hi")
    after = people.set_attribute("#12", "title", "Captain")
    assert after is not before and people.profiles()["#12"]["attributes"] == {"title": "Captain"}
    people.set_attribute("#12", "title", "")
    assert people.profiles()["#12"]["attributes"] == {}
    with pytest.raises(KeyError):
        people.set_attribute("#404", "title", "x")


def test_merge_attributes_keeps_the_newest_and_prunes_what_was_read():
    ports = make_ports(overrides={"entities.consolidation_min_observations": 2})
    people = People(ports)
    for line in ("I love tea", "Tea again", "More tea"):
        people.observe("#12", "Alice", line)
    assert people.due_for_consolidation() == ["#12"]
    result = people.merge_attributes("#12", {"drink": "tea"}, {1, 2}, max_attributes=5)
    assert result == {"entity_id": "#12", "attributes": {"drink": "tea"}, "pruned": 2}
    profile = people.profiles()["#12"]
    assert [o["id"] for o in profile["observations"]] == [3]
    assert profile["consolidated_through"] == 2
    assert people.due_for_consolidation() == []  # one unreviewed left, below the minimum
    assert people.merge_attributes("#404", {"a": "b"}, set(), 5)["pruned"] == 0


def test_prune_forgets_passers_by_and_caps_the_rest():
    ports = make_ports(overrides={"entities.max_profiles": 2})
    people = People(ports)
    people.observe("#1", "Passer", "hi", interaction=False)
    ports.clock.advance(days=31)
    people.observe("#2", "Known", "hi")
    people.set_attribute("#2", "job", "smith")
    people.observe("#3", "Fresh", "hi", interaction=False)
    people.observe("#4", "Fresher", "hi", interaction=False)
    assert people.prune() == {"success": True, "forgotten": 1, "capped": 1, "kept": 2}
    assert "#2" in people.profiles() and "#1" not in people.profiles()


def test_profiles_to_drop_changes_nothing():
    ports = make_ports(overrides={"entities.max_profiles": 1})
    profiles = {"#1": {"observation_count": 9, "last_seen": "2025-01-01T00:00:00Z"},
                "#2": {"observation_count": 1, "last_seen": "2025-01-01T00:00:00Z"}}
    forgotten, capped = profiles_to_drop(profiles, ports.clock.now(), ports.settings,
                                         band=lambda profile: "stranger")
    assert forgotten == [] and capped == ["#2"]
    assert set(profiles) == {"#1", "#2"}
