"""One NPC's LLM statistics (`plumbing.llm.LLMStats`), read with or without a client."""

from support import make_ports

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.llm import LLMStats, empty_stats


def test_statistics_never_written_read_as_zero():
    assert LLMStats(make_ports().state).read() == empty_stats()
    assert LLMStats().read() == empty_stats()


def test_saved_statistics_are_read_back_and_missing_keys_filled():
    ports = make_ports()
    stats = LLMStats(ports.state)
    changed = stats.read()
    changed.update(calls=3, failures=1, emergency_stop=True)
    stats.save(changed)
    assert LLMStats(ports.state).read()["calls"] == 3
    assert LLMStats(ports.state).read()["emergency_stop"] is True
    ports.state.set(documents.LLM_STATS, {"calls": 7})  # written by an older version
    assert LLMStats(ports.state).read() == {**empty_stats(), "calls": 7}
    ports.state.set(documents.LLM_STATS, "damaged")
    assert LLMStats(ports.state).read() == empty_stats()


def test_without_a_state_they_live_in_memory():
    stats = LLMStats()
    changed = stats.read()
    changed["calls"] = 2
    stats.save(changed)
    assert stats.read()["calls"] == 2 and LLMStats().read()["calls"] == 0
