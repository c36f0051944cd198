"""
Crash safety below the shell: the write-ahead log (`plumbing.state_log`) and consolidation that
a kill -9 anywhere in a sleep leaves with no duplicate and no lost memory.

A "crash" here is what a kill -9 leaves: the documents as last flushed, the log of every change
since (replayed), and the vector store with whatever it had written. `LoggedState` is a state
store that logs each `set` as the game's does; `crash()` rebuilds one from the flushed
snapshot plus its log, as the next server start does.
"""

import copy
import os
import pickle
import struct

import pytest
from support import make_ports as support_ports
from support import result_of, sync_runner
from twisted.internet import defer

from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.plumbing import documents
from ai_assistant.plumbing import state_changes as changes
from ai_assistant.plumbing.ports import MemoryState
from ai_assistant.plumbing.settings import DEFAULTS, Settings
from ai_assistant.plumbing.state_log import StateLog, read_log, read_writer
from ai_assistant.sleep.consolidation import run_sleep_consolidation

# ----------------------------------------------------------------------------------------------
# The log


def test_the_last_value_of_each_document_is_replayed_in_order(tmp_path):
    path = str(tmp_path / "logs" / "assistant_1_0.log")
    log = StateLog(path)
    assert log.append("character", "journal", {"entries": [1]})
    assert log.append("script", "tick_count", 1)
    assert log.append("character", "journal", {"entries": [1, 2]})
    log.close()

    changes, records, damaged = read_log(path)
    assert records == 3 and damaged is False
    assert list(changes.items()) == [(("script", "tick_count"), 1),
                                     (("character", "journal"), {"entries": [1, 2]})]


def test_a_record_cut_short_by_a_crash_ends_the_replay_and_keeps_what_came_before(tmp_path):
    path = str(tmp_path / "state.log")
    log = StateLog(path)
    log.append("character", "current_goals", ["find the map"])
    log.append("character", "current_goals", ["find the map", "learn magic"])
    log.close()
    with open(path, "rb+") as handle:  # killed in the middle of the second write
        handle.truncate(os.path.getsize(path) - 5)
    changes, records, damaged = read_log(path)
    assert damaged is True and records == 1
    assert changes == {("character", "current_goals"): ["find the map"]}


def test_a_damaged_record_is_not_replayed(tmp_path):
    path = str(tmp_path / "state.log")
    payload = pickle.dumps(("character", "journal", "x"))
    with open(path, "wb") as handle:
        handle.write(struct.pack("<II", len(payload), 12345) + payload)
    assert read_log(path) == ({}, 0, True)
    assert read_log(str(tmp_path / "missing.log")) == ({}, 0, False)


def test_truncate_empties_the_log_and_appends_go_on_after_it(tmp_path):
    path = str(tmp_path / "state.log")
    log = StateLog(path)
    log.append("character", "journal", "old")
    assert log.size > 0
    log.truncate()
    assert log.size == 0 and os.path.getsize(path) == 0
    log.append("character", "journal", "new")
    log.sync()
    assert read_log(path)[0] == {("character", "journal"): "new"}
    reopened = StateLog(path)  # a new process appends after what is there
    assert reopened.size == os.path.getsize(path)
    log.close()
    log.sync()  # closed: nothing to do, no error
    assert log.append("character", "journal", "late") is False
    reopened.close()


def test_a_value_that_does_not_pickle_is_refused_not_half_written(tmp_path):
    path = str(tmp_path / "state.log")
    log = StateLog(path)
    assert log.append("character", "journal", {"lock": (lambda: None)}) is False
    assert log.size == 0 and os.path.getsize(path) == 0
    log.close()


def logged_journal(path, count=3):
    """A log holding a journal whole, then `count` added entries as changes."""
    log = StateLog(path)
    journal = {"entries": [{"id": 1, "content": "One."}], "entry_count": 1,
               "consolidated_entry_ids": []}
    assert log.append("character", "journal", journal)
    for number in range(2, 2 + count):
        entry = {"id": number, "content": f"Line {number}."}
        assert log.append_change("character", "journal", [
            changes.assign(("entry_count",), number), changes.append(("entries",), entry)])
    log.close()
    return path


def test_changes_are_replayed_onto_the_last_whole_value_in_order(tmp_path):
    path = logged_journal(str(tmp_path / "state.log"))
    log = StateLog(path)
    assert log.append_change("character", "journal", [changes.extend(
        ("consolidated_entry_ids",), [1, 2])])
    assert log.append("script", "tick_count", 3)
    log.close()
    found, records, damaged = read_log(path)
    assert records == 6 and damaged is False
    assert list(found) == [("character", "journal"), ("script", "tick_count")]
    journal = found[("character", "journal")]
    assert [entry["id"] for entry in journal["entries"]] == [1, 2, 3, 4]
    assert journal["entry_count"] == 4 and journal["consolidated_entry_ids"] == [1, 2]
    # a log is read, never consumed: reading it again gives the same documents
    assert read_log(path) == (found, records, damaged)


def test_a_change_cut_short_by_a_crash_keeps_the_document_as_the_changes_before_left_it(
        tmp_path):
    path = logged_journal(str(tmp_path / "state.log"))
    with open(path, "rb+") as handle:  # killed in the middle of the last change's write
        handle.truncate(os.path.getsize(path) - 3)
    found, records, damaged = read_log(path)
    assert damaged is True and records == 3
    assert [entry["id"] for entry in found[("character", "journal")]["entries"]] == [1, 2, 3]


def test_a_change_that_does_not_fit_ends_the_replay_with_the_document_unharmed(tmp_path):
    path = logged_journal(str(tmp_path / "state.log"), count=1)
    log = StateLog(path)
    # its first operation fits, its second does not: the first must not stay applied
    assert log.append_change("character", "journal", [
        changes.append(("entries",), {"id": 9}), changes.append(("missing",), 1)])
    assert log.append("script", "tick_count", 3)  # after the damage: not replayed
    log.close()
    found, records, damaged = read_log(path)
    assert damaged is True and records == 2
    assert found == {("character", "journal"): {
        "entries": [{"id": 1, "content": "One."}, {"id": 2, "content": "Line 2."}],
        "entry_count": 2, "consolidated_entry_ids": []}}


def test_a_change_with_no_whole_value_before_it_is_not_guessed_at(tmp_path):
    path = str(tmp_path / "state.log")
    log = StateLog(path)
    assert log.append("script", "tick_count", 1)
    assert log.append_change("character", "journal", [changes.assign(("entry_count",), 5)])
    log.close()
    assert read_log(path) == ({("script", "tick_count"): 1}, 1, True)


def test_a_written_through_mark_drops_what_the_log_held_of_that_document(tmp_path):
    path = logged_journal(str(tmp_path / "state.log"), count=1)
    log = StateLog(path)
    assert log.append("script", "tick_count", 1)
    assert log.append_written("character", "journal")  # the database has a newer journal
    log.close()
    assert read_log(path) == ({("script", "tick_count"): 1}, 4, False)
    log = StateLog(path)  # written whole again afterwards: that value counts
    assert log.append("character", "journal", {"entries": []})
    log.close()
    assert read_log(path)[0][("character", "journal")] == {"entries": []}


# ----------------------------------------------------------------------------------------------
# Consolidation under kill -9


class LoggedState(MemoryState):
    """
    A state store whose every `set` is logged, as the game's `AttributeState` does: a
    document's first write whole, the next ones as the change its owner describes.
    """

    def __init__(self, initial, path):
        super().__init__(initial)
        self.flushed = copy.deepcopy(self.data)
        self.path = path
        self.log = StateLog(path)
        self.whole = set()
        self.changes_logged = 0

    def set(self, name, value, change=None):
        super().set(name, value, change)
        if change is not None and name in self.whole:
            assert self.log.append_change("character", name, change)
            self.changes_logged += 1
        else:
            assert self.log.append("character", name, value)
            self.whole.add(name)

    def crash(self):
        """What the next start sees: the last flush plus the replayed log."""
        self.log.close()
        data = copy.deepcopy(self.flushed)
        for (_, name), value in read_log(self.path)[0].items():
            data[name] = value
        return LoggedState(data, self.path)


class KilledStore:
    """
    Delegates to a real store; at the `kill_on`-th add the process dies, after the store wrote
    it (`written`) or before.
    """

    def __init__(self, store, kill_on=None, written=True, hide_from_lookup=False):
        self.store = store
        self.kill_on = kill_on
        self.written = written
        self.hide_from_lookup = hide_from_lookup
        self.adds = []

    def add(self, text, *, metadata=None, infer=False):
        self.adds.append(text)
        if len(self.adds) == self.kill_on:
            if self.written:
                self.store.add(text, metadata=metadata, infer=False)
            return defer.Deferred()  # never answers: the process is gone
        return self.store.add(text, metadata=metadata, infer=False)

    def list(self, *, limit=100, filters=None):
        if self.hide_from_lookup and filters:
            return defer.succeed([])  # a store whose metadata lookup misses them
        return self.store.list(limit=limit, filters=filters)

    def __getattr__(self, name):
        return getattr(self.store, name)


FACTS = ["Alice prefers tea over coffee.", "Bob lost his sword in the swamp.",
         "The blacksmith closes at sunset.", "Carol is searching for the ancient map."]
REWORDED = ["Alice likes tea more than coffee.", "Bob's sword was lost in the swamp.",
            "At sunset the blacksmith closes.", "Carol looks for the ancient map."]


def scored_entry(number, facts):
    return {"id": f"entry-{number}", "timestamp": "2025-01-01T12:00:00Z",
            "content": f"Report {number}: " + " ".join(facts), "source_type": "observation",
            "source_trust": 0.8, "source_entity": None, "importance": 6,
            "importance_method": "llm", "tags": [], "related_projects": [],
            "facts": list(facts), "facts_method": "llm"}


@pytest.fixture
def sleeper(tmp_path):
    opened = []

    def _make(state, **store_options):
        store = make_semantic_store(Settings(DEFAULTS), str(tmp_path / "mem"), "ada",
                                    runner=sync_runner)
        opened.append(store)
        return support_ports(key="ada", state=state, semantic=KilledStore(store, **store_options))

    yield _make
    for store in opened:
        store.close()


def journal_of(entries):
    return {documents.JOURNAL: {"entries": entries, "entry_count": len(entries),
                                "max_entries": 100, "last_reflection": None,
                                "consolidated_entry_ids": []}}


def memories_by_entry(ports):
    found = {}
    for memory in result_of(ports.semantic.list(limit=1000)):
        found.setdefault(memory["metadata"]["entry_id"], []).append(memory["memory"])
    return found


@pytest.mark.parametrize("written", [True, False])
@pytest.mark.parametrize("kill_on", [1, 2, 3, 4, 5])
def test_kill_9_anywhere_in_compacting_leaves_no_duplicate_and_no_lost_memory(
        tmp_path, sleeper, kill_on, written):
    entries = [scored_entry(0, FACTS[:3]), scored_entry(1, FACTS[3:])]
    state = LoggedState(journal_of(entries), str(tmp_path / "state.log"))
    ports = sleeper(state, kill_on=kill_on, written=written)
    run_sleep_consolidation(ports)  # killed at the kill_on-th store write
    ports.semantic.store.close()
    # by the last write the journal's second consolidation mark is a logged change, not the
    # whole journal again: the replay below rebuilds it
    assert state.changes_logged == (1 if kill_on == 5 else 0)

    # the next start: the log replayed; and the entry's facts, had the log lost them, would be
    # extracted again in other words - the record by position still holds
    restarted = state.crash()
    for item in restarted.data[documents.JOURNAL]["entries"]:
        if item["id"] not in restarted.data[documents.JOURNAL]["consolidated_entry_ids"]:
            item["facts"] = REWORDED[:3] if item["id"] == "entry-0" else REWORDED[3:]
    again = sleeper(restarted)
    result = result_of(run_sleep_consolidation(again))

    assert result["completed"] is True
    stored = memories_by_entry(again)
    assert len(stored["entry-0"]) == 3 and len(stored["entry-1"]) == 1
    assert sum(len(texts) for texts in stored.values()) == 4  # 4 facts, 4 memories
    journal = restarted.data[documents.JOURNAL]
    assert journal["consolidated_entry_ids"] == ["entry-0", "entry-1"]
    assert not restarted.data[documents.MEMORY_CONSOLIDATION].get("stored")


def test_the_record_finds_what_the_store_lookup_misses(tmp_path, sleeper):
    state = LoggedState(journal_of([scored_entry(0, FACTS[:3])]), str(tmp_path / "state.log"))
    ports = sleeper(state, kill_on=3, written=False)
    run_sleep_consolidation(ports)
    ports.semantic.store.close()
    restarted = state.crash()
    assert set(restarted.data[documents.MEMORY_CONSOLIDATION]["stored"]["entry-0"]) == {"0", "1"}

    again = sleeper(restarted, hide_from_lookup=True)
    result = result_of(run_sleep_consolidation(again))
    assert again.semantic.adds == [FACTS[2]]  # the two recorded facts are not stored again
    assert result["consolidated"] == ["entry-0"]
    assert sorted(memories_by_entry(again)["entry-0"]) == sorted(FACTS[:3])


def test_a_recorded_memory_the_store_lost_is_stored_again(tmp_path, sleeper):
    state = LoggedState(journal_of([scored_entry(0, FACTS[:2])]), str(tmp_path / "state.log"))
    ports = sleeper(state, kill_on=2)
    run_sleep_consolidation(ports)
    lost = result_of(ports.semantic.list(limit=10))
    for memory in lost:  # the store's own write never reached its disk
        result_of(ports.semantic.store.delete(memory["id"]))
    ports.semantic.store.close()

    again = sleeper(state.crash())
    result_of(run_sleep_consolidation(again))
    assert sorted(memories_by_entry(again)["entry-0"]) == sorted(FACTS[:2])


def test_an_empty_log_rests_with_no_file_open_and_opens_again_on_the_next_record(tmp_path):
    path = str(tmp_path / "npc.log")
    log = StateLog(path, writer="this process")
    log.append("character", "goals", ["a"])
    assert not log.rest()  # it holds a record the database lacks
    log.truncate()
    assert log.rest() and log.resting and not log.closed
    log.truncate()  # nothing to empty: the header stays
    log.sync()
    assert read_writer(path) == "this process"
    assert log.append("character", "goals", ["b"]) and not log.resting
    assert read_log(path)[0] == {("character", "goals"): ["b"]}
    log.close()
    assert log.closed and not log.rest()
    assert not log.append("character", "goals", ["c"])  # closed for good, not resting


def test_a_log_opened_resting_is_left_untouched_until_its_first_record(tmp_path):
    path = str(tmp_path / "npc.log")
    StateLog(path, writer="the last process").close()  # a header only, nothing to replay
    before = os.stat(path)
    log = StateLog(path, writer="this process", resting=True)
    assert log.resting and os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert read_writer(path) == "the last process"
    assert log.append("character", "goals", ["a"])
    assert read_writer(path) == "this process"  # emptied for its new writer, then recorded
    assert read_log(path)[:2] == ({("character", "goals"): ["a"]}, 1)
    log.close()
    missing = str(tmp_path / "new.log")
    log = StateLog(missing, writer="this process", resting=True)
    assert not os.path.exists(missing)
    log.append_written("character", "goals")
    assert read_writer(missing) == "this process"
    log.close()
