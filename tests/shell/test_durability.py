"""
Crash safety in the Evennia shell: the write-ahead log behind `AttributeState`, its replay, the
flush when the reactor stops and the flush schedule kept in memory.

A "crash" (kill -9) is simulated by dropping everything the process held in memory - every
`ndb` cache of the NPC and its script, its runtime with the open log - without a flush; the
next touch of its state is what the restarted server does.
"""

import copy
import os
import shutil
from unittest.mock import patch

from assistant_npc import MECHANICAL, WithAda, game_dir, run_reactor_turns
from django.test import override_settings
from evennia.typeclasses.attributes import Attribute
from evennia.utils import create
from evennia.utils.test_resources import EvenniaTest

from ai_assistant import durability
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.state_log import read_log
from ai_assistant.typeclasses import AssistantCharacter

GAME_DIR = game_dir("durability")
TEST_SETTINGS = MECHANICAL
NDB = ("ai_runtime", "ai_ports", "ai_state_cache", "ai_state_dirty", "llm_client",
       "llm_client_signature", "assistant_script")


def crash(npc):
    """Forget what the process held (kill -9): nothing is flushed."""
    runtime = npc.ndb.ai_runtime
    if runtime is not None and "state_log" in runtime.caches:
        runtime.caches["state_log"].close()
    for owner in (npc, npc.assistant.script):
        for name in NDB:
            setattr(owner.ndb, name, None)
        owner.ndb.ticks_since_flush = None


@override_settings(AI_ASSISTANT=TEST_SETTINGS, GAME_DIR=GAME_DIR)
class TestWriteAheadLog(WithAda, EvenniaTest):
    def setUp(self):
        shutil.rmtree(durability.log_folder(), ignore_errors=True)
        super().setUp()

    def state(self):
        return self.npc.assistant.ports().state

    def test_an_unflushed_change_survives_a_crash(self):
        self.state().set(documents.CURRENT_GOALS, [{"text": "find the map"}])
        self.npc.assistant.hear(self.char1, "Ada, where is the inn?", "talk")
        assert self.script.attributes.get(documents.CURRENT_GOALS) is None  # written behind
        crash(self.npc)

        assert self.state().get(documents.CURRENT_GOALS) == [{"text": "find the map"}]
        # replayed into the Attributes themselves, for readers that bypass the state store
        assert self.script.attributes.get(documents.CURRENT_GOALS) == [{"text": "find the map"}]
        pending = self.state().get(documents.PENDING_EVENTS)
        assert [event["text"] for event in pending] == ["Ada, where is the inn?"]
        # replayed once: the log is empty again
        assert read_log(durability.log_path(self.npc))[1] == 0

    def test_script_documents_come_back_on_the_script(self):
        self.script.at_assistant_tick()
        self.script.at_assistant_tick()
        crash(self.npc)
        self.script.at_server_start()  # the replay happens when the server starts
        assert self.script.attributes.get(documents.TICK_COUNT) == 2
        assert self.npc.attributes.get(documents.TICK_COUNT) is None

    def test_a_flush_empties_the_log(self):
        self.state().set(documents.CURRENT_GOALS, ["a"])
        path = durability.log_path(self.npc)
        assert read_log(path)[1] == 1
        self.npc.assistant.flush()
        assert read_log(path) == ({}, 0, False)  # what is left names its writer alone
        assert self.script.attributes.get(documents.CURRENT_GOALS) == ["a"]

    def test_a_flush_writes_every_document_or_none(self):
        self.state().set(documents.CURRENT_GOALS, ["a"])
        self.state().set(documents.TICK_COUNT, 7)
        real_save = Attribute.save
        calls = []

        def second_write_fails(attribute, *args, **kwargs):
            calls.append(attribute.db_key)
            if len(calls) == 2:
                raise RuntimeError("disk full")
            return real_save(attribute, *args, **kwargs)

        with patch.object(Attribute, "save", second_write_fails):
            with self.assertRaises(RuntimeError):
                self.npc.assistant.flush()
        assert calls == [documents.CURRENT_GOALS, documents.TICK_COUNT]
        # the first document's write was rolled back with the second's
        found = self.script.db_attributes.filter(db_key__in=calls[:1]).values_list("db_value")
        assert list(found) == []
        assert read_log(durability.log_path(self.npc))[1] == 2  # the log still has both
        self.script.attributes.reset_cache()
        self.npc.assistant.flush()  # nothing was marked written: both are written now
        assert self.script.attributes.get(documents.CURRENT_GOALS) == ["a"]
        assert self.script.attributes.get(documents.TICK_COUNT) == 7
        assert read_log(durability.log_path(self.npc)) == ({}, 0, False)

    def test_a_flush_saves_each_changed_attribute_once(self):
        # Evennia's `attributes.add` saves an existing Attribute twice, each save deep-copying
        # and pickling the value: for a grown journal, a third of the flush
        journal = self.npc.assistant.journal
        journal.add("Bram mended the lantern.", source_type="direct", source_entity="Bram")
        self.npc.assistant.flush()  # the journal's Attribute exists now
        journal.add("Orla sold the kettle.", source_type="direct", source_entity="Orla")
        self.state().set(documents.CURRENT_GOALS, ["find the map"])
        with patch.object(Attribute, "save", autospec=True, side_effect=Attribute.save) as save:
            self.npc.assistant.flush()
        saved = sorted(call.args[0].db_key for call in save.call_args_list)
        assert saved == sorted(set(saved)) and documents.JOURNAL in saved
        assert documents.CURRENT_GOALS in saved
        # and what was written reads back whole, from the database
        crash(self.npc)
        texts = [entry["content"] for entry in self.npc.assistant.journal.entries()]
        assert texts[-2:] == ["Bram mended the lantern.", "Orla sold the kettle."]
        assert self.state().get(documents.CURRENT_GOALS) == ["find the map"]

    def test_the_flush_schedule_does_not_restart_from_a_rolled_back_counter(self):
        # the stored counter says 11: the old schedule flushed at the next tick, or - rolled
        # back by each crash - never; counted in memory, twelve ticks of this process flush
        # at least once (where in the twelve depends on the assistant: see test_shell)
        self.script.attributes.add(documents.TICK_COUNT, 11)
        crash(self.npc)
        ticks = 0
        while ticks < 12 and self.script.attributes.get(documents.TICK_COUNT) == 11:
            self.script.at_assistant_tick()
            run_reactor_turns()
            ticks += 1
        assert self.script.attributes.get(documents.TICK_COUNT) == 11 + ticks

    def test_a_big_log_is_flushed_at_once(self):
        self.npc.attributes.add(documents.CONFIG_OVERRIDES, {"durability.max_log_kb": 16})
        crash(self.npc)
        from twisted.internet import reactor

        with patch.object(reactor, "callLater") as call_later:
            self.state().set(documents.SCENE_NOTES, ["x" * 20_000])
        flushes = [call for call in call_later.call_args_list if call.args[0] == 0]
        assert len(flushes) == 1
        flushes[0].args[1]()
        assert read_log(durability.log_path(self.npc)) == ({}, 0, False)
        assert self.npc.attributes.get(documents.SCENE_NOTES) == ["x" * 20_000]

    # -- a grown journal: its changes are logged, not the whole journal per heard line

    def grown_journal(self, entries=150):
        """A journal of `entries` lines, flushed (the log empty), then 5 more heard lines."""
        journal = self.npc.assistant.journal
        for number in range(entries):
            journal.add(f"Orla told me that Bram mended lantern {number} near the mill.",
                        source_type="direct", source_entity="Orla")
        self.npc.assistant.flush()
        for number in range(5):
            self.npc.assistant.hear(self.char1, f"Ada, word {number} is heard.", "talk")
            journal.add(f"Heard word {number}.", source_type="direct", source_entity="Char")
        return copy.deepcopy(journal.document())  # the cache's own copy changes on

    def journal_after_crash(self):
        crash(self.npc)
        return self.npc.assistant.journal.document()

    def test_a_grown_journal_logs_each_new_entry_not_the_whole_journal_and_survives_kill_9(self):
        import pickle

        before = self.grown_journal()
        path = durability.log_path(self.npc)
        whole = len(pickle.dumps(before))
        # the journal once whole (its first change since the flush), then four small changes
        # (logged whole each time, the five copies were more than five times this)
        assert os.path.getsize(path) < 2 * whole
        assert read_log(path)[0][("character", documents.JOURNAL)] == before
        after = self.journal_after_crash()
        assert after == before
        assert self.npc.attributes.get(documents.JOURNAL)["entries"] == before["entries"]
        pending = self.state().get(documents.PENDING_EVENTS)
        assert [event["text"] for event in pending][-1] == "Ada, word 4 is heard."

    def test_replaying_the_log_twice_gives_the_same_documents(self):
        # killed again after the replay wrote the Attributes but before it emptied the log
        before = self.grown_journal()
        path = durability.log_path(self.npc)
        kept = path + ".copy"
        shutil.copyfile(path, kept)
        assert self.journal_after_crash() == before
        os.replace(kept, path)
        after = self.journal_after_crash()
        assert after == before
        assert len({entry["id"] for entry in after["entries"]}) == len(after["entries"])

    def test_a_log_left_full_by_a_flush_that_committed_is_replayed_without_harm(self):
        # the flush's transaction committed, then the process died before emptying the log
        before = self.grown_journal()
        with patch.object(durability.Durability, "flushed"):
            self.npc.assistant.flush()
        assert read_log(durability.log_path(self.npc))[1] > 0
        assert self.journal_after_crash() == before

    def test_changes_logged_after_a_flush_start_again_from_a_whole_value(self):
        self.grown_journal()
        self.npc.assistant.flush()
        assert read_log(durability.log_path(self.npc)) == ({}, 0, False)
        self.npc.assistant.journal.add("After the flush.", source_type="direct")
        self.npc.assistant.journal.add("And one more.", source_type="direct")
        before = copy.deepcopy(self.npc.assistant.journal.document())
        after = self.journal_after_crash()
        assert [e["content"] for e in after["entries"]][-2:] == ["After the flush.",
                                                                 "And one more."]
        assert after == before

    def test_a_torn_last_record_keeps_every_change_before_it(self):
        before = self.grown_journal()
        self.npc.assistant.journal.add("Cut short.", count_for_reflection=False)  # the last
        path = durability.log_path(self.npc)
        with open(path, "rb+") as handle:  # killed in the middle of the last write
            handle.truncate(os.path.getsize(path) - 7)
        after = self.journal_after_crash()
        assert after["entries"] == before["entries"]
        assert read_log(path) == ({}, 0, False)  # replayed, then emptied

    def test_a_document_written_through_is_not_rolled_back_by_what_the_log_held(self):
        self.state().set(documents.SCENE_NOTES, ["logged"])
        log = self.npc.ndb.ai_runtime.caches["state_log"].log
        with patch.object(log, "append", return_value=False):
            self.state().set(documents.SCENE_NOTES, ["written through"])
        crash(self.npc)
        assert self.state().get(documents.SCENE_NOTES) == ["written through"]

    def test_a_value_the_log_refuses_is_written_through(self):
        log = self.npc.ndb.ai_runtime.caches["state_log"]
        with patch.object(log, "record", return_value=False):
            self.state().set(documents.SCENE_NOTES, ["kept"])
        assert self.npc.attributes.get(documents.SCENE_NOTES) == ["kept"]

    def test_without_write_ahead_nothing_is_logged(self):
        self.npc.attributes.add(documents.CONFIG_OVERRIDES, {"durability.write_ahead": False})
        crash(self.npc)
        if os.path.exists(durability.log_path(self.npc)):  # an empty log is made when used
            os.remove(durability.log_path(self.npc))
        self.state().set(documents.CURRENT_GOALS, ["lost"])
        assert not os.path.exists(durability.log_path(self.npc))
        crash(self.npc)
        assert self.state().get(documents.CURRENT_GOALS) is None  # what a crash lost before

    def test_a_log_of_an_earlier_npc_with_the_same_id_is_not_replayed(self):
        import subprocess

        from ai_assistant.game_data import database_identity
        from ai_assistant.plumbing.state_log import StateLog

        gone = subprocess.Popen(["true"])
        gone.wait()  # its writer, a process that is gone
        other = os.path.join(durability.log_folder(), f"assistant_{self.npc.id}_1.log")
        stale = StateLog(other, writer=(database_identity(), gone.pid, None))
        stale.append("character", documents.CURRENT_GOALS, ["someone else's goal"])
        stale.close()
        crash(self.npc)
        assert self.state().get(documents.CURRENT_GOALS) is None
        assert not os.path.exists(other)

    def test_deleting_the_assistant_deletes_its_log(self):
        self.state().set(documents.CURRENT_GOALS, ["secret"])
        path = durability.log_path(self.npc)
        assert os.path.exists(path)
        self.npc.delete()
        assert not os.path.exists(path)

    def test_the_reactor_shutdown_trigger_is_added_once_and_flushes_every_assistant(self):
        from twisted.internet import reactor

        with patch.object(durability, "_shutdown_hooked", []), \
                patch.object(reactor, "addSystemEventTrigger") as add:
            durability.hook_shutdown()
            durability.hook_shutdown()
        add.assert_called_once_with("before", "shutdown", durability.flush_all)

        second = create.create_object(AssistantCharacter, key="Bea", location=self.room1,
                                      home=self.room1)
        self.state().set(documents.CURRENT_GOALS, ["ada's"])
        second.assistant.ports().state.set(documents.CURRENT_GOALS, ["bea's"])
        assert durability.flush_all() >= 2
        assert self.script.attributes.get(documents.CURRENT_GOALS) == ["ada's"]
        assert second.assistant.script.attributes.get(documents.CURRENT_GOALS) == ["bea's"]
        assert read_log(durability.log_path(second)) == ({}, 0, False)

    def test_the_log_is_fsynced_off_the_reactor(self):
        from twisted.internet import reactor

        crash(self.npc)
        with patch.object(reactor, "callLater") as call_later, \
                patch.object(reactor, "running", True), \
                patch("ai_assistant.durability.threads.run_blocking") as run_blocking:
            self.state().set(documents.CURRENT_GOALS, ["a"])
            self.state().set(documents.CURRENT_GOALS, ["b"])
            syncs = [call for call in call_later.call_args_list if call.args[0] == 1.0]
            assert len(syncs) == 1  # one fsync for a burst of changes
            syncs[0].args[1]()
        log = self.npc.ndb.ai_runtime.caches["state_log"].log
        run_blocking.assert_called_once_with(log.sync)
