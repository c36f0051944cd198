"""
Which assistants keep their heavy data in memory (`plumbing.residency`): a bounded LRU over the
process's assistants, and what releasing one drops (`AssistantRuntime.release`).
"""

import pytest

from ai_assistant.plumbing import residency
from ai_assistant.plumbing.residency import Residency
from ai_assistant.plumbing.runtime import AssistantRuntime
from ai_assistant.plumbing.settings import DEFAULTS, Settings


class Holder:
    """A resident that counts its releases."""

    def __init__(self, name):
        self.name = name
        self.releases = 0

    def release(self):
        self.releases += 1


@pytest.fixture
def process_residency():
    """The process-wide residency at a small capacity, restored afterwards."""
    saved = residency.RESIDENCY
    residency.RESIDENCY = Residency(capacity=2)
    yield residency.RESIDENCY
    residency.RESIDENCY = saved


def test_the_least_recently_used_beyond_the_capacity_is_released():
    lru = Residency(capacity=2)
    ada, bob, cleo = Holder("ada"), Holder("bob"), Holder("cleo")
    lru.touch(ada)
    lru.touch(bob)
    lru.touch(ada)  # ada used again: bob is now the least recently used
    lru.touch(cleo)
    assert bob.releases == 1 and ada.releases == 0 and cleo.releases == 0
    assert ada in lru and cleo in lru and bob not in lru and len(lru) == 2
    lru.touch(bob)  # back in: the least recently used of the others (ada) goes
    assert ada.releases == 1 and lru.released == 2


def test_resizing_releases_at_once_and_forgetting_releases_nothing():
    lru = Residency(capacity=3)
    holders = [Holder(name) for name in "abc"]
    for holder in holders:
        lru.touch(holder)
    lru.forget(holders[2])
    assert holders[2] not in lru and holders[2].releases == 0
    lru.resize(1)
    assert [holder.releases for holder in holders] == [1, 0, 0] and len(lru) == 1
    lru.release_all()
    assert holders[1].releases == 1 and len(lru) == 0


def test_configure_takes_the_game_setting(process_residency):
    residency.configure(Settings(DEFAULTS, {"memory.resident_assistants": 5}))
    assert process_residency.capacity == 5
    assert DEFAULTS["memory"]["resident_assistants"] == residency.DEFAULT_CAPACITY


def test_a_release_drops_the_derived_caches_and_keeps_the_others(process_residency):
    ada, bob, cleo = AssistantRuntime(), AssistantRuntime(), AssistantRuntime()
    index = ada.derived_cache("journal_index", dict)
    index["built"] = True
    ada.cache("state_log", list).append("what must outlive a release")
    dropped = []
    ada.on_release("documents", lambda: dropped.append("documents"))
    assert ada.derived_cache("journal_index", dict) is index  # kept while resident
    bob.touch()
    cleo.derived_cache("journal_index", dict)  # a third resident: ada, the oldest, goes
    assert ada.derived == {} and dropped == ["documents"]
    assert ada.caches["state_log"] == ["what must outlive a release"]
    rebuilt = ada.derived_cache("journal_index", dict)
    assert rebuilt == {} and rebuilt is not index and ada in process_residency
