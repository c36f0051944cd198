"""The journal's owner: `Journal(ports)` and `ReflectionState(ports)` are the only writers."""

import pickle

import pytest
from support import ChangeCheckingState, make_ports

from ai_assistant.memory.journal import Journal, JournalError
from ai_assistant.memory.reflection_state import ReflectionState
from ai_assistant.plumbing import documents


def test_an_owner_keeps_nothing_and_sees_every_write():
    ports = make_ports()
    held = Journal(ports)
    Journal(ports).add("Written by another instance.", importance=5)
    assert [entry["content"] for entry in held.entries()] == ["Written by another instance."]
    assert held.entry(1)["importance"] == 5
    assert held.entry(2) is None


def test_add_counts_toward_the_next_reflection_unless_told_not_to():
    ports = make_ports()
    Journal(ports).add("Counted.", importance=6)
    Journal(ports).add("Not counted.", importance=9, count_for_reflection=False)
    state = ReflectionState(ports).current()
    assert state["cumulative_importance"] == 6
    assert state["entries_since_reflection"] == [1]


def test_update_changes_entries_in_place_in_one_write_and_skips_the_gone():
    ports = make_ports()
    journal = Journal(ports)
    first = journal.add("One.", importance=3)
    journal.add("Two.", importance=3)
    saves = ports.state.saves
    assert journal.update({1: {"importance": 8}, 2: {"facts": ["x"]}, 99: {"importance": 1}}) \
        == [1, 2]
    assert ports.state.saves == saves + 1
    assert first["importance"] == 8  # the same object: the search index keeps its view
    assert journal.entry(2)["facts"] == ["x"]
    assert journal.update({42: {"importance": 1}}) == []
    assert ports.state.saves == saves + 1  # nothing changed, nothing written


def test_replace_gives_a_new_entry_object():
    ports = make_ports()
    journal = Journal(ports)
    old = journal.add("Before.")
    new = journal.replace(1, lambda entry: entry.update(content="After."))
    assert new is not old and old["content"] == "Before."
    assert journal.entry(1)["content"] == "After."
    with pytest.raises(JournalError, match="#7"):
        journal.replace(7, lambda entry: None)


def test_remove_drops_the_entry_and_its_consolidation_mark():
    ports = make_ports()
    journal = Journal(ports)
    journal.add("Kept.")
    journal.add("Gone.")
    journal.mark_consolidated([1, 2])
    assert journal.remove(2)["content"] == "Gone."
    assert journal.consolidated_ids() == [1]
    assert [entry["id"] for entry in journal.entries()] == [1]
    with pytest.raises(JournalError):
        journal.remove(2)


def test_unconsolidated_leaves_out_consolidated_and_synthesis_entries():
    ports = make_ports()
    journal = Journal(ports)
    journal.add("Plain.")
    journal.add("[SYNTHESIS] A pattern.")
    journal.add("Moved to long-term memory.")
    assert journal.mark_consolidated([3, 3, 50]) == [3]
    assert [entry["id"] for entry in journal.unconsolidated()] == [1]


def test_mark_reflected_records_the_time():
    ports = make_ports()
    journal = Journal(ports)
    assert journal.document()["last_reflection"] is None
    ports.clock.advance(hours=3)
    journal.mark_reflected()
    assert journal.document()["last_reflection"] == "2025-01-01T15:00:00Z"


def test_set_importance_is_manual_and_refuses_unknown_entries():
    ports = make_ports()
    journal = Journal(ports)
    journal.add("Something.")
    assert journal.set_importance(1, 4)["importance_method"] == "manual"
    assert journal.entry(1)["importance"] == 4
    with pytest.raises(JournalError):
        journal.set_importance(2, 4)


def test_prune_low_importance_removes_only_old_trivial_plain_entries():
    ports = make_ports()
    journal = Journal(ports)
    journal.add("Old and trivial.", importance=2)
    journal.add("Old and important.", importance=9)
    ports.clock.advance(days=40)
    journal.add("New and trivial.", importance=1)
    report = journal.prune_low_importance()
    assert report == {"pruned": [1], "remaining_candidates": 0, "entries": 2}


def test_reflection_state_rescore_follows_only_the_window():
    ports = make_ports()
    Journal(ports).add("In the window.", importance=4)
    reflection = ReflectionState(ports)
    reflection.rescore({1: (4, 9), 2: (1, 10)})
    assert reflection.current()["cumulative_importance"] == 9
    reflection.rescore({1: (9, 0)})
    assert reflection.current()["cumulative_importance"] == 0


def test_reflection_state_due_and_reset():
    ports = make_ports(overrides={"reflection.threshold": 10})
    reflection = ReflectionState(ports)
    Journal(ports).add("Big.", importance=8)
    assert not reflection.due()
    Journal(ports).add("Bigger.", importance=3)
    assert reflection.due()
    state = reflection.reset([1], 8)
    assert state["entries_since_reflection"] == [2]
    assert state["cumulative_importance"] == 3
    assert state["reflection_count"] == 1
    assert ports.state.get(documents.REFLECTION_STATE)["reflection_count"] == 1


def test_every_write_says_what_changed_and_the_change_gives_the_document():
    # the game's write-ahead log records these changes instead of the whole journal: replayed
    # onto the document as it was, each must give the document written (the store checks)
    state = ChangeCheckingState()
    ports = make_ports(state=state, overrides={"journal.max_entries": 6})
    journal = Journal(ports)
    for number in range(9):  # past max_entries: auto-prune removes entries as it adds
        journal.add(f"Line {number} about the harbour.", source_type="direct",
                    source_entity=f"Speaker{number % 3}", importance=2 + number % 5)
    journal.mark_consolidated([entry["id"] for entry in journal.entries()[:2]])
    journal.update({journal.entries()[-1]["id"]: {"importance": 9, "facts": ["a fact"]}})
    journal.set_importance(journal.entries()[2]["id"], 4)
    journal.remove(journal.entries()[0]["id"])
    journal.mark_reflected()
    ports.clock.advance(days=40)
    journal.add("A trivial line, later.", importance=1)
    assert journal.prune_low_importance(max_importance=3)["pruned"]
    removed = journal.remove(journal.entries()[0]["id"])
    journal.restore(removed)  # a whole write
    journal.replace(removed["id"], lambda entry: entry.update(content="Changed."))  # whole
    assert state.described >= 15
    assert state.replayed[documents.JOURNAL] == journal.document()


def test_a_heard_line_is_described_by_its_entry_not_by_the_whole_journal():
    described = []

    class Recording(ChangeCheckingState):
        def set(self, name, value, change=None):
            if name == documents.JOURNAL:
                described.append((len(pickle.dumps(value)), len(pickle.dumps(change))))
            super().set(name, value, change)

    ports = make_ports(state=Recording(), overrides={"journal.max_entries": 1000})
    journal = Journal(ports)
    for number in range(300):
        journal.add(f"Orla told me that Bram mended lantern number {number} near the mill.",
                    source_type="direct", source_entity="Orla")
    whole, change = described[-1]
    assert whole > 50_000 and change < 1_000
