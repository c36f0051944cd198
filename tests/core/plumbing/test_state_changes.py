"""A change to a state document as its owner describes it (`plumbing.state_changes`)."""

import pytest

from ai_assistant.plumbing import state_changes as changes
from ai_assistant.plumbing.state_changes import ChangeError, apply


def journal():
    return {"entries": [{"id": 1, "content": "One."}, {"id": 2, "content": "Two."}],
            "entry_count": 2, "consolidated_entry_ids": [1], "meta": {"version": 1}}


def test_each_operation_changes_what_its_path_names():
    document = apply(journal(), [
        changes.assign(("entry_count",), 3),
        changes.append(("entries",), {"id": 3, "content": "Three."}),
        changes.extend(("consolidated_entry_ids",), [2, 3]),
        changes.merge(("entries",), "id", 2, {"importance": 8}),
        changes.assign(("meta", "version"), 2),
        changes.assign(("meta", "added"), True),
    ])
    assert document == {
        "entries": [{"id": 1, "content": "One."}, {"id": 2, "content": "Two.", "importance": 8},
                    {"id": 3, "content": "Three."}],
        "entry_count": 3, "consolidated_entry_ids": [1, 2, 3],
        "meta": {"version": 2, "added": True}}


def test_remove_drops_by_key_or_by_value_and_keeps_the_order_of_the_rest():
    document = journal()
    document["entries"].append({"id": 3, "content": "Three."})
    apply(document, [changes.remove(("entries",), [2], key="id"),
                     changes.remove(("consolidated_entry_ids",), [1, 99])])
    assert [entry["id"] for entry in document["entries"]] == [1, 3]
    assert document["consolidated_entry_ids"] == []


def test_pop_drops_the_item_at_an_index():
    assert apply([1, 2, 3], [changes.pop((), 1), changes.pop((), -1)]) == [1]
    with pytest.raises(ChangeError, match="no item 3"):
        apply([1, 2, 3], [changes.pop((), 3)])


def test_the_whole_document_can_be_assigned_and_a_list_document_appended_to():
    assert apply({"old": True}, [changes.assign((), {"new": True})]) == {"new": True}
    assert apply([1], [changes.append((), 2), changes.extend((), [3])]) == [1, 2, 3]


def test_an_operation_is_small_plain_data_that_holds_no_view_of_the_caller_s_list():
    ids = [4, 5]
    operation = changes.extend(("consolidated_entry_ids",), ids)
    ids.append(6)
    assert operation == ("extend", ("consolidated_entry_ids",), [4, 5])


@pytest.mark.parametrize("change, message", [
    ([changes.append(("missing",), 1)], "no 'missing'"),
    ([changes.append(("entry_count",), 1)], "not a list"),
    ([changes.assign(("entry_count", "x"), 1)], "not a dict"),
    ([changes.remove(("entries",), [{"unhashable": 1}])], "hashable"),
    ([("rename", ("entries",))], "unknown operation"),
    (["assign"], "not an operation"),
])
def test_a_change_that_does_not_fit_the_document_says_why(change, message):
    with pytest.raises(ChangeError, match=message):
        apply(journal(), change)
