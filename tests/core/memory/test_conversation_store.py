"""
The conversation store (`memory.conversation.Conversation`): the shared history and the working
memory of each interlocutor, one owner; and the awake tick that records a line once and hands
a full history to the emergency compaction it was given.
"""

from scripted_llm import FakeWorld
from support import ChangeCheckingState, make_ports, result_of
from twisted.internet import defer

from ai_assistant.agent import awake, perception
from ai_assistant.memory.conversation import (
    SUMMARY_PREFIX,
    Conversation,
    history_tokens,
    summary_marker,
    transcript,
)
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing.ports import iso
from ai_assistant.plumbing.tokens import count_message_tokens

BOB = {"id": "#2", "name": "Bob"}
CY = {"id": "#3", "name": "Cy"}


def test_a_line_goes_in_the_shared_history_and_the_interlocutors_working_memory():
    # each line says what it changed (the line), and the change gives the document written
    ports = make_ports(state=ChangeCheckingState())
    conversation = Conversation(ports)
    line = conversation.append("user", "Bob", "Where is the inn?", interlocutor=BOB)
    ports.clock.advance(minutes=1)
    conversation.append("assistant", "Ada", "North of the square.", interlocutor=BOB)
    assert line == {"role": "user", "name": "Bob", "content": "Where is the inn?",
                    "tokens": line["tokens"], "time": "2025-01-01T12:00:00Z"}
    assert [(m["role"], m["name"], m["content"]) for m in conversation.history()] == [
        ("user", "Bob", "Where is the inn?"), ("assistant", "Ada", "North of the square.")]
    assert [(m["name"], m["content"], m["time"]) for m in conversation.for_speaker("#2")] == [
        ("Bob", "Where is the inn?", "2025-01-01T12:00:00Z"),
        ("Ada", "North of the square.", "2025-01-01T12:01:00Z")]
    assert conversation.interlocutors() == ["#2"] and conversation.for_speaker("#9") == []
    assert ports.state.described == 2  # the history and the working memory, second line


def test_a_whispered_line_stays_out_of_the_shared_history():
    ports = make_ports()
    conversation = Conversation(ports)
    assert conversation.append("user", "Bob", "(whispered) the key", interlocutor=BOB,
                               private=True) is None
    assert conversation.history() == []
    assert [m["content"] for m in conversation.for_speaker("#2")] == ["(whispered) the key"]


def test_a_line_with_nobody_in_particular_is_in_the_history_only():
    ports = make_ports()
    Conversation(ports).append("user", "Bob", "Lovely weather.")
    assert len(Conversation(ports).history()) == 1 and Conversation(ports).interlocutors() == []


def test_working_memory_is_bounded_and_hands_out_copies():
    ports = make_ports(state=ChangeCheckingState(), overrides={"working_memory.max_messages": 3})
    conversation = Conversation(ports)
    for number in range(5):
        conversation.append("user", "Bob", f"line {number}", interlocutor=BOB)
    kept = conversation.for_speaker("#2")
    assert [m["content"] for m in kept] == ["line 2", "line 3", "line 4"]
    kept[0]["content"] = "changed by a reader"
    assert conversation.for_speaker("#2")[0]["content"] == "line 2"
    assert len(conversation.history()) == 5  # the shared history is bounded by compaction
    assert ports.state.described == 8  # the dropped lines too


def test_stale_conversations_are_forgotten():
    ports = make_ports(overrides={"working_memory.stale_seconds": 3600})
    conversation = Conversation(ports)
    conversation.append("user", "Bob", "hello", interlocutor=BOB)
    conversation.append("user", "Cy", "hello", interlocutor=CY)
    ports.clock.advance(minutes=59)
    conversation.append("user", "Cy", "still here", interlocutor=CY)
    ports.clock.advance(minutes=2)
    assert conversation.forget_stale() == ["#2"]
    assert conversation.interlocutors() == ["#3"]
    assert conversation.forget_stale(max_age_seconds=30) == ["#3"]
    assert conversation.forget_stale() == []


def test_tokens_are_cached_per_line_and_measure_the_history():
    ports = make_ports(overrides={"llm.context_limit": 1000})
    conversation = Conversation(ports)
    for number in range(4):
        conversation.append("user", "Bob", f"line {number} about the cat", interlocutor=BOB)
    history = conversation.history()
    plain = [{"role": m["role"], "name": m["name"], "content": m["content"]} for m in history]
    assert conversation.tokens() == history_tokens(history) == count_message_tokens(plain)
    assert conversation.usage() == conversation.tokens() / 1000
    assert history_tokens([]) == 0 and Conversation(make_ports()).usage() == 0


def test_replace_span_swaps_the_head_for_a_marker_only_while_it_is_still_the_head():
    ports = make_ports()
    conversation = Conversation(ports)
    for number in range(4):
        conversation.append("user", "Bob", f"line {number}")
        ports.clock.advance(minutes=1)
    head = conversation.history()[:2]
    marker = summary_marker("Bob counted to one.", iso(ports.clock.now()))
    assert conversation.summary() is None
    new = conversation.replace_span(head, marker)
    assert [m["content"] for m in new] == [f"{SUMMARY_PREFIX} Bob counted to one.",
                                           "line 2", "line 3"]
    assert conversation.history() == new
    assert conversation.summary() == f"{SUMMARY_PREFIX} Bob counted to one."
    # the old head is gone: replacing it again changes nothing
    assert conversation.replace_span(head, marker) is None
    assert conversation.history() == new


def test_a_transcript_names_the_assistant_and_keeps_earlier_summaries():
    messages = [
        {"role": "system", "content": f"{SUMMARY_PREFIX} Bob came by.", "summary": True},
        {"role": "user", "name": "Bob", "content": "hi", "time": "T1"},
        {"role": "assistant", "name": "whoever", "content": "hello", "time": "T2"},
    ]
    assert transcript(messages, "Ada").splitlines() == [
        f"(Earlier summary) {SUMMARY_PREFIX} Bob came by.", "[T1] Bob: hi", "[T2] Ada: hello"]


# --- the awake tick records each line once, and compacts with what it was handed -----------


def heard(ports, text, kind="talk"):
    PerceptionQueue(ports).add(perception.make_event(
        kind=kind, text=text, sender="Bob", sender_id="#2", time=iso(ports.clock.now()),
        classification=perception.classify(kind, text, names=["Ada"])))


class SilentLLM:
    """An LLM the fake cycles below never call (an assistant with one is not mechanical)."""

    def complete(self, messages, **kwargs):
        raise AssertionError("the fake cycle asks no model")


def answers(reply):
    """A ReAct cycle that says `reply` through the world it was given."""
    def run_cycle(ports, situation, **kwargs):
        ports.world.say(reply)
        return defer.succeed({"terminal": True, "tools": ["say"], "stopped": None})
    return run_cycle


def test_the_awake_tick_records_what_was_heard_and_said_once_each():
    ports = make_ports(world=FakeWorld(), llm=SilentLLM())
    heard(ports, "Where is the inn?")
    result_of(awake.run_awake_tick(ports, run_cycle=answers("North.")))
    history = Conversation(ports).history()
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Where is the inn?"), ("assistant", "North.")]
    assert [m["content"] for m in Conversation(ports).for_speaker("#2")] == [
        "Where is the inn?", "North."]


def test_a_full_history_is_handed_to_the_emergency_compaction():
    ports = make_ports(world=FakeWorld(), llm=SilentLLM(), overrides={
        "llm.context_limit": 100, "compaction.emergency_threshold": 0.3})
    compactions = []

    def compact(given, *, run_cycle):
        compactions.append((given, run_cycle))
        return defer.succeed({"compacted": True})

    cycle = answers("North, past the well, then left at the old mill.")
    heard(ports, "Where is the inn, and is it open tonight?")
    report = result_of(awake.run_awake_tick(ports, run_cycle=cycle, compact=compact))
    assert Conversation(ports).usage() >= ports.settings.get("compaction.emergency_threshold")
    assert compactions == [(ports, cycle)] and report["compaction"] == {"compacted": True}
    # without a compaction handed in, the full history waits for the next sleep
    heard(ports, "Thanks!")
    report = result_of(awake.run_awake_tick(ports, run_cycle=cycle))
    assert "compaction" not in report and len(compactions) == 1


def test_a_history_with_room_left_is_not_compacted():
    ports = make_ports(world=FakeWorld(), llm=SilentLLM())
    compactions = []
    heard(ports, "hello")
    report = result_of(awake.run_awake_tick(
        ports, run_cycle=answers("Hello."),
        compact=lambda given, **kwargs: compactions.append(given)))
    assert compactions == [] and "compaction" not in report
