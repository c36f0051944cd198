"""Context compaction: usage, thresholds, split, summary marker, journal synthesis, extraction."""

import json

import pytest
import support
from scripted_llm import Reply, sync_runner
from support import FakeLLM
from twisted.internet import defer, task

from ai_assistant.agent import context
from ai_assistant.agent.react import run_react_cycle
from ai_assistant.memory import journal
from ai_assistant.memory.conversation import SUMMARY_PREFIX, Conversation, history_tokens
from ai_assistant.memory.journal import Journal
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.ports import (
    LLMReply,
    LLMTimeout,
    MemoryState,
)
from ai_assistant.plumbing.settings import deep_merge
from ai_assistant.plumbing.tokens import count_message_tokens
from ai_assistant.sleep import compaction

SUMMARY = "Alice asked about the missing cat; Bob said he saw it near the mill."


class FlakyState(MemoryState):
    """Fails the next write of one document (a crash between two writes)."""

    def __init__(self, fail_on=None):
        super().__init__()
        self.fail_on = fail_on

    def set(self, name, value, change=None):
        if name == self.fail_on:
            self.fail_on = None
            raise RuntimeError(f"database error writing {name}")
        super().set(name, value, change)


def make_ports(llm=None, settings=None, state=None):
    # the tests' context limits are tiny: let one summary request take all of the old part
    tree = {"compaction": {"preserve_messages": 4, "summary_input_share": 1.0}}
    ports = support.make_ports(deep_merge(tree, settings or {}), state=state, llm=llm)
    return ports, ports.log


def result_of(deferred):
    results = []
    deferred.addBoth(results.append)
    assert results, "the Deferred did not fire synchronously"
    if hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


def fill(ports, count=10):
    for number in range(count):
        role, name = ("user", "Alice") if number % 2 == 0 else ("assistant", "Ada")
        Conversation(ports).append(role, name, f"line {number} about the missing cat")
        ports.clock.advance(minutes=1)


def set_usage(ports, ratio, below=False):
    """Set llm.context_limit so the history's usage is just at (or just below) `ratio`."""
    tokens = history_tokens(Conversation(ports).history())
    limit = int(tokens / ratio) + (1 if below else 0)
    ports.settings = ports.settings.with_overrides({"llm.context_limit": limit})
    usage = Conversation(ports).usage()
    assert (usage < ratio) if below else (usage >= ratio)


def mark_extracted(ports):
    state = ports.state.get(documents.COMPACTION_STATE, {}) or {}
    state["extracted_version"] = state.get("version", 0)
    ports.state.set(documents.COMPACTION_STATE, state)


def summaries(ports):
    return [e for e in Journal(ports).entries() if "conversation_summary" in e["tags"]]


# ----------------------------------------------------------------------------------------------
# History and usage


def test_history_tokens_match_count_message_tokens():
    ports, _ = make_ports()
    fill(ports, 6)
    history = Conversation(ports).history()
    plain = [{"role": m["role"], "name": m["name"], "content": m["content"]} for m in history]
    assert history_tokens(history) == count_message_tokens(plain)
    assert history_tokens(plain) == count_message_tokens(plain)  # uncached too
    assert history[0]["time"] == "2025-01-01T12:00:00Z" and history[0]["name"] == "Alice"


def test_the_emergency_compaction_waits_while_asleep():
    ports, _ = make_ports(FakeLLM(SUMMARY))
    fill(ports, 10)
    set_usage(ports, 0.80)
    ports.state.set("operating_mode", "sleep")
    report = result_of(compaction.compact_if_emergency(ports, run_cycle=run_react_cycle))
    assert report == {"compacted": False, "reason": "asleep"}
    assert len(Conversation(ports).history()) == 10  # its sleep compacts it


def test_the_emergency_compaction_stays_quiet_below_its_threshold():
    ports, _ = make_ports(FakeLLM(SUMMARY), settings={"llm": {"context_limit": 100000}})
    Conversation(ports).append("user", "Alice", "hello")
    report = result_of(compaction.compact_if_emergency(ports, run_cycle=run_react_cycle))
    assert report == {"compacted": False, "reason": "below emergency threshold"}


# ----------------------------------------------------------------------------------------------
# Sleep-time compaction


def test_compaction_splits_summarises_journals_and_installs_the_marker():
    llm = FakeLLM(SUMMARY)
    ports, logs = make_ports(llm)
    fill(ports, 10)
    set_usage(ports, 0.70)
    mark_extracted(ports)
    before = Conversation(ports).history()
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["compacted"] is True and report["messages"] == 6
    assert report["tokens_after"] < report["tokens_before"]
    history = Conversation(ports).history()
    marker = history[0]
    assert marker["role"] == "system" and marker["name"] == "summary" and marker["summary"]
    assert marker["content"] == f"[Summary of earlier conversation] {SUMMARY}"
    assert history[1:] == before[6:]  # the preserve window, word for word
    (entry,) = summaries(ports)
    assert entry["content"] == f"[SYNTHESIS] Conversation summary: {SUMMARY}"
    assert entry["tags"] == ["synthesis", "conversation_summary"]
    assert entry["importance"] == 6 and journal.is_synthesis(entry)
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "line 0 about the missing cat" in prompt and "line 6" not in prompt
    assert llm.calls[0]["purpose"] == "compaction"
    state = ports.state.get(documents.COMPACTION_STATE)
    assert state["version"] == 1 and state["compactions"] == 1 and state["pending"] is None
    assert Conversation(ports).summary() == marker["content"]
    assert any("compacted 6 messages" in line for line in logs)


def test_below_the_sleep_threshold_nothing_happens():
    llm = FakeLLM(SUMMARY)
    ports, _ = make_ports(llm)
    fill(ports, 10)
    set_usage(ports, 0.70, below=True)
    mark_extracted(ports)
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["compacted"] is False and report["reason"] == "below threshold"
    assert llm.calls == [] and len(Conversation(ports).history()) == 10


def test_force_compacts_below_threshold_and_the_preserve_window_is_a_setting():
    ports, _ = make_ports(FakeLLM(SUMMARY), settings={"compaction": {"preserve_messages": 2}})
    fill(ports, 5)
    report = result_of(compaction.compact_conversation_history(ports, force=True))
    assert report["compacted"] and report["messages"] == 3
    history = Conversation(ports).history()
    assert len(history) == 3 and [m["content"][:6] for m in history[1:]] == ["line 3", "line 4"]


def test_one_summary_request_takes_at_most_its_share_of_the_context():
    llm = FakeLLM(SUMMARY)
    ports, _ = make_ports(llm, settings={"compaction": {"summary_input_share": 0.3}})
    fill(ports, 10)
    set_usage(ports, 0.70)
    history = Conversation(ports).history()
    budget = ports.settings.get("llm.context_limit") * 0.3
    old, kept = compaction.split_history(ports, history)
    assert 0 < len(old) < 6 and old + kept == history
    assert history_tokens(old) <= budget < history_tokens(history[:6])
    report = result_of(compaction.compact_conversation_history(ports, force=True))
    assert report["messages"] == len(old)
    assert Conversation(ports).history()[1:] == kept  # the rest waits, word for word


def test_nothing_to_compact_within_the_preserve_window():
    llm = FakeLLM()
    ports, _ = make_ports(llm)
    fill(ports, 4)
    report = result_of(compaction.compact_conversation_history(ports, force=True))
    assert report == {"compacted": False, "usage": report["usage"], "reason": "nothing to compact"}
    assert llm.calls == []


def test_compaction_waits_for_the_pre_compaction_extraction():
    llm = FakeLLM(SUMMARY)
    ports, _ = make_ports(llm)
    fill(ports, 10)
    set_usage(ports, 0.70)
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["reason"] == "waiting for pre-compaction extraction" and llm.calls == []


@pytest.mark.parametrize("failure", [LLMTimeout("timed out"), "   "])
def test_a_failed_summary_leaves_history_and_journal_untouched(failure):
    ports, logs = make_ports(FakeLLM(failure))
    fill(ports, 10)
    set_usage(ports, 0.70)
    mark_extracted(ports)
    before = json.loads(json.dumps(Conversation(ports).history()))
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["compacted"] is False and report["error"]
    assert Conversation(ports).history() == before and summaries(ports) == []


def test_mechanical_mode_trims_the_history_into_the_journal_without_losing_a_line():
    ports, logs = make_ports(llm=None)
    ports.settings = ports.settings.with_overrides({"compaction.preserve_messages": 4})
    fill(ports, 10)  # Alice and Ada in turn
    history = Conversation(ports).history()
    set_usage(ports, 0.70)
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["compacted"] is True and report["mechanical"] is True
    assert report["messages"] == 6
    after = Conversation(ports).history()
    assert after[1:] == history[-4:] and after[0]["summary"]
    # heard lines are journaled as they are heard; only the assistant's own lines are archived
    assert report["archived"] == 3 and len(report["entry_ids"]) == 1
    assert "(6 earlier lines" in after[0]["content"]
    archived = Journal(ports).entry(report["entry_ids"][0])
    assert archived["content"].startswith(compaction.TRANSCRIPT_LABEL)
    assert all(f"Ada: line {n} about" in archived["content"] for n in (1, 3, 5))
    assert "Alice" not in archived["content"]
    assert "conversation_transcript" in archived["tags"]
    assert len(logs) == 1 and "without an LLM" in logs[0]


def test_mechanical_mode_archives_everything_when_heard_lines_are_not_journaled():
    ports, _ = make_ports(llm=None)
    ports.settings = ports.settings.with_overrides({"compaction.preserve_messages": 2,
                                                    "journal.max_content_chars": 200})
    fill(ports, 10)
    old_lines = [m["content"] for m in Conversation(ports).history()[:8]]
    ports.settings = ports.settings.with_overrides({"journal.record_heard": False})
    set_usage(ports, 0.70)
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["archived"] == 8
    entries = [Journal(ports).entry(i)["content"] for i in report["entry_ids"]]
    assert len(entries) > 1 and all(len(text) <= 200 for text in entries)
    assert all(line in "\n".join(entries) for line in old_lines)
    # a second pass keeps the first marker's text and archives only what came since
    fill(ports, 6)
    set_usage(ports, 0.70)
    again = result_of(compaction.compact_conversation_history(ports))
    marker = Conversation(ports).history()[0]
    assert again["archived"] == 6
    # one note, counting both trims (the marker does not grow with every trim)
    assert marker["content"].count("in the journal") == 1
    assert "(14 earlier lines" in marker["content"]


def test_a_mechanical_trim_keeps_the_text_of_an_llm_summary_it_folds_in():
    llm = FakeLLM(SUMMARY)
    ports, _ = make_ports(llm)
    fill(ports, 10)
    result_of(compaction.compact_conversation_history(ports, force=True))
    ports.llm = None  # the game's LLM went away
    fill(ports, 6)
    set_usage(ports, 0.70)
    report = result_of(compaction.compact_conversation_history(ports))
    marker = Conversation(ports).history()[0]
    assert report["mechanical"] is True
    assert marker["content"].startswith(f"{SUMMARY_PREFIX} {SUMMARY}")
    assert "in the journal" in marker["content"]


def test_a_second_compaction_folds_the_previous_summary_in():
    llm = FakeLLM(SUMMARY, "Everything so far: the cat was found at the mill.")
    ports, _ = make_ports(llm)
    fill(ports, 10)
    result_of(compaction.compact_conversation_history(ports, force=True))
    fill(ports, 6)
    report = result_of(compaction.compact_conversation_history(ports, force=True))
    assert report["compacted"]
    history = Conversation(ports).history()
    assert len(history) == 5 and history[0]["content"].endswith("found at the mill.")
    assert sum(1 for m in history if m.get("summary")) == 1
    assert (
        f"(Earlier summary) [Summary of earlier conversation] {SUMMARY}"
        in (llm.calls[1]["messages"][-1]["content"])
    )
    assert len(summaries(ports)) == 2


def test_idempotent_after_a_crash_between_journal_and_history_writes():
    state = FlakyState()
    ports, _ = make_ports(FakeLLM(SUMMARY), state=state)
    fill(ports, 10)
    set_usage(ports, 0.70)
    mark_extracted(ports)
    state.fail_on = documents.CONVERSATION_HISTORY
    with pytest.raises(RuntimeError):
        result_of(compaction.compact_conversation_history(ports))
    assert len(summaries(ports)) == 1 and len(Conversation(ports).history()) == 10
    # the retry needs no LLM call and writes no second summary
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["compacted"] and report["resumed"]
    assert len(summaries(ports)) == 1
    history = Conversation(ports).history()
    assert len(history) == 5 and history[0]["content"].endswith(SUMMARY)
    # and running again finds nothing left to do
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["compacted"] is False and len(summaries(ports)) == 1


def test_lines_heard_while_summarising_are_kept():
    pending = defer.Deferred()

    class SlowLLM:
        def complete(self, messages, **kwargs):
            return pending

    ports, _ = make_ports(SlowLLM())
    fill(ports, 10)
    results = []
    compaction.compact_conversation_history(ports, force=True).addBoth(results.append)
    Conversation(ports).append("user", "Bob", "did I miss anything?")
    pending.callback(LLMReply(content=SUMMARY))
    assert results[0]["compacted"]
    history = Conversation(ports).history()
    assert history[-1]["content"] == "did I miss anything?" and len(history) == 6


def test_summary_marker_reaches_the_prompt_as_quoted_data():
    ports, _ = make_ports(FakeLLM(SUMMARY))
    fill(ports, 10)
    result_of(compaction.compact_conversation_history(ports, force=True))
    user_message = context.build_messages(ports, {"events": []})[1]["content"]
    assert "## Earlier conversation" in user_message
    assert "<<<BEGIN SUMMARY OF EARLIER CONVERSATION>>>" in user_message
    assert SUMMARY in user_message


# ----------------------------------------------------------------------------------------------
# Pre-compaction extraction and the emergency path


def journal_call(content):
    args = json.dumps({"content": content, "source_entity": "Alice", "source_type": "direct"})
    return LLMReply(tool_calls=[_call("add_journal_entry", args)])


def _call(name, arguments="{}"):
    from ai_assistant.plumbing.ports import ToolCall

    return ToolCall(name=name, arguments=arguments, id=f"call_{name}")


def test_pre_compaction_extraction_journals_a_fact_once_per_history_version():
    llm = FakeLLM(journal_call("Alice's cat is called Whiskers"), LLMReply(
        tool_calls=[_call("noop")]))  # fmt: skip
    ports, _ = make_ports(llm)
    fill(ports, 10)
    set_usage(ports, 0.70)
    report = result_of(compaction.run_pre_compaction_extraction(ports, run_cycle=run_react_cycle))
    assert report["ran"] and report["tools"] == ["add_journal_entry", "noop"]
    entries = Journal(ports).entries()
    assert [e["content"] for e in entries] == ["Alice's cat is called Whiskers"]
    offered = sorted(spec["function"]["name"] for spec in llm.calls[0]["tools"])
    assert offered == ["add_journal_entry", "noop"]
    prompt = llm.calls[0]["messages"][1]["content"]
    assert "line 0 about the missing cat" in prompt and "line 9" not in prompt
    assert compaction.EXTRACTION_TASK in prompt
    assert llm.calls[0]["purpose"] == "pre_compaction"
    # not again for the same history
    again = result_of(compaction.run_pre_compaction_extraction(ports, run_cycle=run_react_cycle))
    assert again == {"ran": False, "reason": "already extracted for this history"}
    assert len(llm.calls) == 2
    # ...and compaction may now proceed
    llm.replies.append(SUMMARY)
    assert result_of(compaction.compact_conversation_history(ports))["compacted"]


def test_extraction_only_when_a_compaction_is_due_and_retried_after_llm_failure():
    llm = FakeLLM(LLMTimeout("down"))
    ports, _ = make_ports(llm)
    fill(ports, 10)
    set_usage(ports, 0.70, below=True)
    report = result_of(compaction.run_pre_compaction_extraction(ports, run_cycle=run_react_cycle))
    assert report["ran"] is False
    assert llm.calls == []
    set_usage(ports, 0.70)
    report = result_of(compaction.run_pre_compaction_extraction(ports, run_cycle=run_react_cycle))
    assert report["ran"] is False and report["reason"].startswith("llm_error")
    state = ports.state.get(documents.COMPACTION_STATE, {}) or {}
    assert state.get("extracted_version") is None  # it will be tried again


def test_emergency_compaction_at_80_percent_extracts_then_compacts():
    llm = FakeLLM(LLMReply(tool_calls=[_call("noop")]), SUMMARY)
    ports, _ = make_ports(llm)
    fill(ports, 10)
    set_usage(ports, 0.80, below=True)
    report = result_of(compaction.compact_if_emergency(ports, run_cycle=run_react_cycle))
    assert report == {"compacted": False, "reason": "below emergency threshold"}
    set_usage(ports, 0.80)
    report = result_of(compaction.compact_if_emergency(ports, run_cycle=run_react_cycle))
    assert report["compacted"] and report["extraction"]["ran"]
    assert [call["purpose"] for call in llm.calls] == ["pre_compaction", "compaction"]
    assert Conversation(ports).history()[0]["summary"]


def test_extraction_through_the_real_llm_client(llm_server, llm_config):
    ports, _ = make_ports(settings={"llm": llm_config})
    ports.llm = LLMClient(
        ports.settings.get("llm"), npc_key=ports.key, npc_name="Ada", state=ports.state,
        log=ports.log, runner=sync_runner, clock=task.Clock(),
    )  # fmt: skip
    fill(ports, 10)
    set_usage(ports, 0.70)
    llm_server.script(
        Reply.tool("add_journal_entry", {"content": "Bob saw the cat near the mill",
                                         "source_entity": "Alice"}),  # who said it
        Reply.tool("noop", {}),
        Reply.text(SUMMARY),
    )  # fmt: skip
    ports.state.set("operating_mode", "sleep")
    report = result_of(compaction.run_pre_compaction_extraction(ports, run_cycle=run_react_cycle))
    assert report["ran"] and report["tools"] == ["add_journal_entry", "noop"]
    assert Journal(ports).entries()[0]["content"] == "Bob saw the cat near the mill"
    first = llm_server.requests[0]
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["add_journal_entry", "noop"]
    report = result_of(compaction.compact_conversation_history(ports))
    assert report["compacted"]
    assert "line 0 about the missing cat" in llm_server.requests[-1]["messages"][-1]["content"]
    assert summaries(ports)[0]["content"].endswith(SUMMARY)


def test_a_mechanical_assistant_awake_at_the_emergency_threshold_trims_at_once():
    ports, _ = make_ports(llm=None)
    fill(ports, 10)
    set_usage(ports, 0.80)
    report = result_of(compaction.compact_if_emergency(ports, run_cycle=run_react_cycle))
    assert report["extraction"] == {"ran": False, "reason": "mechanical mode"}
    assert report["compacted"] is True and report["mechanical"] is True
    assert Conversation(ports).usage() < 0.80
