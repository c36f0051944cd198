"""
The idle awake tick costs the same whatever the assistant remembers (issue 20): the work of
`AssistantScript.at_assistant_tick` with nothing heard is counted (Python calls, database
queries, bytes sent to the database), not timed, on an assistant with empty documents and on
one whose growing documents are near their bounds.
"""

import sys
from datetime import UTC, datetime, timedelta

from assistant_npc import AssistantsInPlace
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from evennia.utils import create
from evennia.utils.test_resources import EvenniaTest
from twisted.internet import reactor

from ai_assistant.plumbing import documents
from ai_assistant.typeclasses import AssistantCharacter

TEST_SETTINGS = {
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {"base_url": None, "api_key": None},
    "memory": {"enabled": False},
}
TICKS = 48  # four flushes at the default ticks.flush_every (12)


def grown_documents(size=2000):
    """Documents as a long-lived assistant's: thousands of links, profiles, messages, nodes."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    when = [(start + timedelta(hours=n)).isoformat() for n in range(size)]
    return {
        documents.MEMORY_LINKS: {
            f"mem-{n:05d}": {"linked_to": [{"id": f"mem-{m:05d}", "score": 0.8}
                                           for m in range(n, n + 5)],
                             "journal_ids": [n], "processed_at": when[n]}
            for n in range(size)},
        documents.ENTITY_PROFILES: {
            f"#{n}": {"name": f"Stranger{n}", "observations": [f"Said hello on day {n}."] * 3,
                      "last_seen": when[n]} for n in range(size)},
        documents.CONVERSATION_HISTORY: [
            {"role": "user", "name": f"Stranger{n}", "content": "Did you hear about the dragon?",
             "time": when[n], "tokens": 12} for n in range(size)],
        documents.MEMORY_NODES: {
            f"node-{n}": {"id": f"node-{n}", "status": "active", "importance": 0.5,
                          "created_at": when[n], "scene": {"action": "Talked."}}
            for n in range(size // 4)},
    }  # fmt: skip


@override_settings(AI_ASSISTANT=TEST_SETTINGS)
class TestIdleTickWork(AssistantsInPlace, EvenniaTest):
    def setUp(self):
        super().setUp()
        self.small = self.assistant("Small")
        self.grown = self.assistant("Grown")
        state = self.grown.assistant.ports().state
        for name, value in grown_documents().items():
            state.set(name, value)
        self.grown.assistant.flush()

    def assistant(self, key):
        npc = create.create_object(AssistantCharacter, key=key, location=self.room1,
                                   home=self.room1)
        npc.assistant.script.unsubscribe()  # the test drives its ticks
        return npc

    def idle_work(self, npc):
        """`(python calls, queries, bytes of SQL)` of TICKS idle ticks, each with its turn."""
        script = npc.assistant.script

        def tick():
            script.at_assistant_tick()
            reactor.runUntilCurrent()  # the work it scheduled for the next reactor turn

        for _ in range(TICKS):  # the same point of the flush cycle for both, caches warm
            tick()
        calls = [0]

        def count(frame, event, arg):
            if event in ("call", "c_call"):
                calls[0] += 1

        with CaptureQueriesContext(connection) as queries:
            sys.setprofile(count)
            try:
                for _ in range(TICKS):
                    tick()
            finally:
                sys.setprofile(None)
        return calls[0], len(queries), sum(len(query["sql"]) for query in queries)

    def test_the_idle_tick_does_the_same_work_whatever_the_state_holds(self):
        grown_bytes = sum(len(repr(value)) for value in grown_documents().values())
        assert grown_bytes > 1_000_000  # the grown assistant really holds a lot
        small = self.idle_work(self.small)
        grown = self.idle_work(self.grown)
        calls, queries, sql_bytes = grown
        # a flush every twelfth tick: a few queries for the two small documents it writes, in
        # one transaction per flush (its savepoint and release, inside the test's transaction)
        assert queries == small[1] and queries <= TICKS + 2 * (TICKS // 12)
        # the same rows written (tick counter, awake state), whatever else is stored
        assert sql_bytes == small[2]
        # Python calls within 1% (a few differ between two objects' caches); reading, copying
        # or scanning any grown document in a tick would add thousands of calls a tick
        assert abs(calls - small[0]) <= small[0] // 100, (small, grown)
        print(f"idle work per {TICKS} ticks: small {small}, grown {grown}")

    def test_the_idle_tick_writes_no_big_document(self):
        self.idle_work(self.grown)
        with CaptureQueriesContext(connection) as queries:
            for _ in range(12):
                self.grown.assistant.script.at_assistant_tick()
                reactor.runUntilCurrent()
        assert queries.captured_queries  # one flush in twelve ticks
        assert max(len(query["sql"]) for query in queries) < 2_000
