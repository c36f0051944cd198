"""The journal document: entries, validation, auto-prune, lifecycle pruning, formatting."""

import copy

import pytest
from support import make_ports

from ai_assistant.memory import journal
from ai_assistant.memory.journal import Journal, JournalError
from ai_assistant.plumbing import documents


def ids(ports):
    return [e["id"] for e in Journal(ports).entries()]


def test_an_entry_has_the_specified_structure():
    ports = make_ports()
    entry = Journal(ports).add("  Player Alice prefers formal address and dislikes jokes ",
        tags=["player_preference", "communication", "communication"],
        related_projects=["alice_quest"],
        source_type="direct",
        source_entity="Alice",
    )
    assert entry == {
        "id": 1,
        "timestamp": "2025-01-01T12:00:00Z",
        "content": "Player Alice prefers formal address and dislikes jokes",
        "source_type": "direct",
        "source_trust": 0.9,
        "source_entity": "Alice",
        "importance": 9,
        "importance_method": "heuristic",
        "tags": ["player_preference", "communication"],
        "related_projects": ["alice_quest"],
        # where it came from: read from the source fields, since the writer gave none
        "provenance": {"speaker_id": None, "speaker": "Alice", "channel": "told",
                       "trust": 0.9, "derived_from": []},
    }
    doc = ports.state.get(documents.JOURNAL)
    assert doc["entries"] == [entry]
    assert doc["entry_count"] == 1
    assert doc["max_entries"] == 100
    assert doc["last_reflection"] is None
    assert doc["consolidated_entry_ids"] == []


@pytest.mark.parametrize(
    "source_type, trust",
    [("direct", 0.9), ("observation", 0.8), ("inference", 0.6), ("environmental", 0.3)],
)
def test_trust_defaults_by_source_type(source_type, trust):
    assert Journal(make_ports()).add("x", source_type=source_type)["source_trust"] == trust


def test_explicit_trust_and_importance_win():
    entry = Journal(make_ports()).add("x", source_trust=0.42, importance=3)
    assert entry["source_trust"] == 0.42
    assert (entry["importance"], entry["importance_method"]) == (3, "manual")


def test_timestamps_follow_the_clock_and_ids_count_up():
    ports = make_ports()
    Journal(ports).add("first")
    ports.clock.advance(hours=2)
    second = Journal(ports).add("second")
    assert second["id"] == 2
    assert second["timestamp"] == "2025-01-01T14:00:00Z"


def test_ids_never_repeat_after_pruning():
    ports = make_ports(overrides={"journal.max_entries": 2})
    for text in ("a", "b", "c", "d"):
        Journal(ports).add(text, importance=5)
    assert ids(ports) == [3, 4]
    assert Journal(ports).add("e", importance=5)["id"] == 5
    assert journal.get_journal(ports)["entry_count"] == 5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"content": None}, "content is required"),
        ({"content": "   "}, "content is required"),
        ({"content": "x" * 4001}, "too long"),
        ({"importance": 0}, "from 1 to 10"),
        ({"importance": 11}, "from 1 to 10"),
        ({"importance": 5.5}, "whole number"),
        ({"importance": True}, "whole number"),
        ({"importance": "7"}, "whole number"),
        ({"source_type": "gossip"}, "unknown source_type 'gossip'"),
        ({"source_type": ["direct"]}, "unknown source_type"),
        ({"tags": "quest"}, "tags must be a list of strings"),
        ({"tags": ["ok", 3]}, "tags must be a list of strings"),
        ({"tags": ["t"] * 0 + [f"t{i}" for i in range(21)]}, "at most 20"),
        ({"related_projects": "alice_quest"}, "related_projects must be a list"),
        ({"source_trust": 1.5}, "source_trust must be from 0.0 to 1.0"),
        ({"source_trust": "high"}, "source_trust must be a number"),
        ({"source_entity": 42}, "source_entity must be a name"),
    ],
)
def test_bad_fields_are_refused_and_nothing_changes(kwargs, message):
    ports = make_ports()
    Journal(ports).add("existing entry", importance=4)
    before = copy.deepcopy(ports.state.data)
    saves = ports.state.saves
    fields = {"content": "fine text", **kwargs}
    with pytest.raises(JournalError, match=message):
        Journal(ports).add(fields.pop("content"), **fields)
    assert ports.state.data == before
    assert ports.state.saves == saves


def test_journal_error_is_a_value_error():
    assert issubclass(JournalError, ValueError)


def test_content_limit_is_a_setting():
    ports = make_ports(overrides={"journal.max_content_chars": 10})
    with pytest.raises(JournalError, match="limit is 10"):
        Journal(ports).add("eleven char")
    assert Journal(ports).add("ten chars!")["id"] == 1


# ----------------------------------------------------------------------------------------------
# Auto-prune


def test_auto_prune_drops_consolidated_entries_first_oldest_first():
    ports = make_ports(overrides={"journal.max_entries": 4})
    for importance in (9, 9, 2, 9):
        Journal(ports).add("entry", importance=importance)
    Journal(ports).mark_consolidated([2, 1])
    Journal(ports).add("new", importance=5)
    assert ids(ports) == [2, 3, 4, 5]  # #1: consolidated and oldest, despite importance 9
    assert journal.get_journal(ports)["consolidated_entry_ids"] == [2]


def test_auto_prune_never_drops_a_high_unconsolidated_entry_before_a_low_one():
    ports = make_ports(overrides={"journal.max_entries": 3})
    Journal(ports).add("crucial", importance=10)
    Journal(ports).add("trivial", importance=2)
    Journal(ports).add("middling", importance=5)
    Journal(ports).add("also trivial", importance=2)
    assert ids(ports) == [1, 3, 4]  # the oldest of the two lowest went
    Journal(ports).add("noise", importance=1)
    assert ids(ports) == [1, 3, 4]  # the new entry itself was the least important


def test_auto_prune_keeps_synthesis_entries_to_the_last():
    ports = make_ports(overrides={"journal.max_entries": 2})
    Journal(ports).add("[SYNTHESIS] players trust patient guides", importance=3)
    Journal(ports).add("ordinary", importance=9)
    Journal(ports).add("another", importance=9)
    assert ids(ports) == [1, 3]


# ----------------------------------------------------------------------------------------------
# Lifecycle pruning


def test_prune_low_importance_old_entries_only():
    ports = make_ports()
    Journal(ports).add("old and trivial", importance=3)
    Journal(ports).add("old but important", importance=4)
    Journal(ports).add("old, trivial, consolidated", importance=1)
    Journal(ports).add("[SYNTHESIS] old insight", importance=2)
    Journal(ports).mark_consolidated([3])
    ports.clock.advance(days=30, minutes=1)
    Journal(ports).add("new and trivial", importance=1)
    report = Journal(ports).prune_low_importance()
    assert report == {"pruned": [1], "remaining_candidates": 0, "entries": 4}
    assert ids(ports) == [2, 3, 4, 5]


def test_an_entry_exactly_30_days_old_is_kept():
    ports = make_ports()
    Journal(ports).add("trivial", importance=1)
    ports.clock.advance(days=30)
    assert Journal(ports).prune_low_importance()["pruned"] == []


def test_prune_removes_at_most_ten_per_call_oldest_first():
    ports = make_ports()
    for i in range(13):
        Journal(ports).add(f"trivial {i}", importance=2)
    ports.clock.advance(days=31)
    report = Journal(ports).prune_low_importance()
    assert report["pruned"] == list(range(1, 11))
    assert report["remaining_candidates"] == 3
    assert Journal(ports).prune_low_importance()["pruned"] == [11, 12, 13]


def test_prune_rules_are_settings():
    ports = make_ports(overrides={
        "journal.prune_importance": 5, "journal.prune_age_days": 1, "journal.prune_batch": 1,
    })
    Journal(ports).add("a", importance=5)
    Journal(ports).add("b", importance=5)
    ports.clock.advance(days=2)
    assert Journal(ports).prune_low_importance()["pruned"] == [1]


# ----------------------------------------------------------------------------------------------
# Helpers


def test_mark_consolidated_is_idempotent_and_ignores_unknown_ids():
    ports = make_ports()
    Journal(ports).add("a")
    Journal(ports).add("b")
    assert Journal(ports).mark_consolidated([1, 7]) == [1]
    assert Journal(ports).mark_consolidated([1]) == []
    assert [e["id"] for e in Journal(ports).unconsolidated()] == [2]


def test_unconsolidated_entries_exclude_synthesis():
    ports = make_ports()
    Journal(ports).add("[SYNTHESIS] pattern")
    Journal(ports).add("fact")
    assert [e["id"] for e in Journal(ports).unconsolidated()] == [2]


def test_set_importance_by_hand():
    ports = make_ports()
    Journal(ports).add("a")
    assert Journal(ports).set_importance(1, 2)["importance_method"] == "manual"
    with pytest.raises(JournalError, match="no journal entry #9"):
        Journal(ports).set_importance(9, 2)
    with pytest.raises(JournalError):
        Journal(ports).set_importance(1, 0)


def test_reflection_can_be_left_out_for_an_entry():
    ports = make_ports()
    Journal(ports).add("a", importance=8, count_for_reflection=False)
    assert ports.state.get(documents.REFLECTION_STATE) is None


def test_format_entry_is_one_line():
    entry = Journal(make_ports()).add(
        "Alice asked\nabout the  quest", source_type="direct", source_entity="Alice"
    )
    assert journal.format_entry(entry) == (
        "#1 2025-01-01 12:00 9(heuristic) direct/Alice: Alice asked about the quest"
    )
    long = journal.format_entry({**entry, "content": "word " * 100})
    assert "\n" not in long and long.endswith("...") and len(long) < 220
