"""`Journal.restore`: a removed entry goes back in its place (undoing a staff deletion)."""

import pytest
from support import make_ports

from ai_assistant.memory.journal import Journal, JournalError

pytestmark = pytest.mark.core


def test_a_removed_entry_comes_back_in_its_place_with_its_consolidated_mark():
    ports = make_ports()
    journal = Journal(ports)
    for text in ("One.", "Two.", "Three."):
        journal.add(text, importance=4)
    journal.mark_consolidated([2])
    removed = journal.remove(2)
    assert [entry["id"] for entry in journal.entries()] == [1, 3]
    assert 2 not in journal.consolidated_ids()

    journal.restore(removed, consolidated=True)
    assert [entry["id"] for entry in journal.entries()] == [1, 2, 3]
    assert journal.entry(2)["content"] == "Two." and 2 in journal.consolidated_ids()
    assert journal.add("Four.", importance=4)["id"] == 4  # ids still never repeat
    with pytest.raises(JournalError, match="#2 is there already"):
        journal.restore(removed)


def test_an_entry_restored_unconsolidated_stays_unconsolidated():
    ports = make_ports()
    journal = Journal(ports)
    journal.add("Only.", importance=4)
    journal.restore(journal.remove(1))
    assert journal.entry(1)["content"] == "Only." and journal.consolidated_ids() == []
