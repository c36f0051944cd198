"""Perception, working memory and the awake tick (core, no database)."""

from datetime import timedelta

import pytest
import support
from scripted_llm import FakeWorld, Reply, sync_runner
from twisted.internet import defer

from ai_assistant.agent import awake, perception
from ai_assistant.agent.react import run_react_cycle
from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.ports import iso


def make_ports(llm=None, world=None, **overrides):
    ports = support.make_ports(key="assistant_1", llm=llm, overrides=overrides,
                               world=world if world is not None else FakeWorld())
    return ports, ports.log


def event(ports, kind, text, sender="Bob", sender_id="#2"):
    classification = perception.classify(kind, text, names=["Ada"])
    return perception.make_event(
        kind=kind, text=text, sender=sender, sender_id=sender_id,
        classification=classification, time=iso(ports.clock.now()),
    )


def result_of(deferred):
    results = []
    deferred.addBoth(results.append)
    assert results, "the Deferred did not fire synchronously"
    if hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


# --- perception --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, text, expected",
    [
        ("talk", "anything", "direct_message"),
        ("whisper", "psst", "direct_message"),
        ("say", "Ada, where is the inn?", "direct_addressing"),
        ("say", "where is the inn, ada?", "direct_addressing"),
        ("say", "Adam went north", "room_chatter"),
        ("say", "nice weather", "room_chatter"),
        ("pose", "waves at Ada", "direct_addressing"),
        ("arrive", "Bob arrives.", "ambient"),
    ],
)
def test_classification(kind, text, expected):
    assert perception.classify(kind, text, names=["Ada"]) == expected


def test_own_echo_is_self():
    assert perception.classify("say", "Ada here", names=["Ada"], from_self=True) == "self"


def test_extract_speech_from_a_say_line():
    assert perception.extract_speech('Bob says, "Ada, hi there"') == "Ada, hi there"
    assert perception.extract_speech("no quotes at all") == "no quotes at all"


def test_direct_events_are_urgent_and_chatter_is_not():
    ports, _ = make_ports()
    assert event(ports, "talk", "hi")["urgent"] is True
    assert event(ports, "say", "Ada?")["priority"] == 8
    assert event(ports, "say", "hm")["urgent"] is False


def test_queue_is_bounded_and_drops_oldest_lowest_priority_first():
    ports, _ = make_ports(**{"perception.queue_size": 3})
    PerceptionQueue(ports).add(event(ports, "say", "chatter one"))
    PerceptionQueue(ports).add(event(ports, "talk", "urgent one"))
    PerceptionQueue(ports).add(event(ports, "say", "chatter two"))
    dropped = PerceptionQueue(ports).add(event(ports, "talk", "urgent two"))
    assert dropped["text"] == "chatter one"
    dropped = PerceptionQueue(ports).add(event(ports, "arrive", "Bob arrives."))
    assert dropped["text"] == "Bob arrives."  # the newcomer had the lowest priority
    assert ports.state.get(documents.PERCEPTION_STATS)["dropped"] == 2
    drained = PerceptionQueue(ports).take_all()
    assert [e["text"] for e in drained] == ["urgent one", "urgent two", "chatter two"]
    assert ports.state.get(documents.PENDING_EVENTS) == []


# --- working memory ------------------------------------------------------------------------------


def test_working_memory_is_bounded_and_stale_conversations_clear():
    ports, _ = make_ports(**{"working_memory.max_messages": 3})
    bob, cy = {"id": "#2", "name": "Bob"}, {"id": "#3", "name": "Cy"}
    for number in range(5):
        Conversation(ports).append("user", "Bob", f"line {number}", interlocutor=bob)
    kept = Conversation(ports).for_speaker("#2")
    assert [m["content"] for m in kept] == ["line 2", "line 3", "line 4"]
    Conversation(ports).append("user", "Cy", "hello", interlocutor=cy)
    ports.clock.advance(minutes=59)
    Conversation(ports).append("user", "Cy", "still here", interlocutor=cy)
    ports.clock.advance(minutes=2)
    assert Conversation(ports).forget_stale() == ["#2"]
    assert set(ports.state.get("working_memory")) == {"#3"}


# --- the awake tick ------------------------------------------------------------------------------


def test_idle_tick_does_nothing():
    ports, _ = make_ports()
    calls = []
    report = result_of(awake.run_awake_tick(ports, run_cycle=lambda *a, **k: calls.append(a)))
    assert report == {"events": 0, "answered": 0, "cycles": []}
    assert calls == [] and ports.state.saves == 0


def test_mechanical_mode_gives_an_in_character_notice_and_journals():
    ports, _ = make_ports()
    PerceptionQueue(ports).add(event(ports, "talk", "hello Ada"))
    report = result_of(awake.run_awake_tick(ports, run_cycle=None))
    assert report["cycles"] == [{"interlocutor": "#2", "mechanical": True, "notice": True}]
    # to the speaker alone, never to the room
    assert ports.world.emotes == [] and "no LLM is configured" in ports.world.told[0][1]
    assert ports.world.told[0][0] == "#2"
    entries = ports.state.get("journal")["entries"]
    assert entries[0]["content"] == 'Bob said to me: "hello Ada"'
    assert entries[0]["source_type"] == "direct" and entries[0]["source_entity"] == "Bob"
    assert [m["content"] for m in Conversation(ports).for_speaker("#2")] == ["hello Ada"]
    # the notice is shown, not remembered as something the assistant said
    assert [m["role"] for m in ports.state.get("conversation_history")] == ["user"]


def test_chatter_is_journaled_as_overheard_but_not_answered():
    ports, _ = make_ports()
    PerceptionQueue(ports).add(event(ports, "say", "the north gate closes at midnight"))
    report = result_of(awake.run_awake_tick(ports, run_cycle=None))
    assert report["answered"] == 0 and ports.world.actions == []
    entry = ports.state.get("journal")["entries"][0]
    assert entry["source_type"] == "environmental"
    assert entry["source_trust"] == 0.3


def test_conversation_turn_through_the_real_llm_client(llm_server, llm_config):
    llm_server.script(Reply.tool("say", {"message": "The inn is north, Bob."}))
    world = FakeWorld()
    ports, _ = make_ports(world=world)
    ports.llm = LLMClient(llm_config, npc_key="assistant_1", npc_name="Ada", state=ports.state,
                          runner=sync_runner)
    PerceptionQueue(ports).add(event(ports, "say", "Ada, where is the inn?"))
    report = result_of(awake.run_awake_tick(ports, run_cycle=run_react_cycle))
    assert world.said == ["The inn is north, Bob."]
    assert report["answered"] == 1 and report["cycles"][0]["terminal"] is True
    history = Conversation(ports).for_speaker("#2")
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Ada, where is the inn?"), ("assistant", "The inn is north, Bob.")]
    prompt = llm_server.requests[0]["messages"][-1]["content"]
    assert "where is the inn" in prompt


def test_no_answer_to_an_empty_room():
    world = FakeWorld()

    def leaves_then_answers(ports, situation, cache=None):
        world.people = []  # Bob walked out while the LLM was thinking
        ports.world.say("Sure, Bob!")
        return defer.succeed({"iterations": 1, "tools": ["say"], "terminal": True})

    ports, logs = make_ports(world=world, **{"llm.base_url": "x"})
    ports.llm = object()  # not mechanical; the cycle above never calls it
    PerceptionQueue(ports).add(event(ports, "talk", "hi"))
    report = result_of(awake.run_awake_tick(ports, run_cycle=leaves_then_answers))
    assert world.said == []
    assert report["cycles"][0]["suppressed"] == ["Sure, Bob!"]
    assert any("empty room" in line for line in logs)


def test_thinking_emote_is_scheduled_and_cancelled():
    scheduled = []

    class Call:
        def __init__(self):
            self.cancelled = False

        def active(self):
            return not self.cancelled

        def cancel(self):
            self.cancelled = True

    def call_later(delay, func, *args):
        call = Call()
        scheduled.append((delay, func, args, call))
        return call

    ports, _ = make_ports()
    ports.llm = object()
    PerceptionQueue(ports).add(event(ports, "talk", "hi"))
    result_of(awake.run_awake_tick(
        ports, call_later=call_later,
        run_cycle=lambda p, s, cache=None: defer.succeed({"tools": [], "terminal": True})))
    # (the reply deadline and the speaker's cooldown are scheduled too)
    delay, func, args, call = next(s for s in scheduled if s[2] == ("pauses, thinking.",))
    assert delay == 2.0 and call.cancelled


def test_llm_failure_gets_the_in_character_fallback_line():
    ports, logs = make_ports()
    ports.llm = object()
    PerceptionQueue(ports).add(event(ports, "talk", "hi"))
    result_of(awake.run_awake_tick(
        ports, run_cycle=lambda p, s, cache=None: defer.succeed(
            {"tools": [], "stopped": "llm_error: emergency stop"})))
    assert ports.world.said == [ports.settings.get("react.fallback_line")]
    assert "could not answer Bob: llm_error: emergency stop" in logs.text()


def test_a_broken_listener_does_not_stop_the_tick(monkeypatch):
    def broken(ports, events):
        raise RuntimeError("boom")

    monkeypatch.setattr(awake, "PERCEPTION_LISTENERS", (broken, *awake.PERCEPTION_LISTENERS))
    ports, logs = make_ports()
    PerceptionQueue(ports).add(event(ports, "talk", "hi"))
    report = result_of(awake.run_awake_tick(ports, run_cycle=None))
    assert report["events"] == 1
    assert any("broken failed: boom" in line for line in logs)


def test_stale_threshold_is_a_setting():
    ports, _ = make_ports(**{"working_memory.stale_seconds": 60})
    Conversation(ports).append("user", "Bob", "hi", interlocutor={"id": "#2", "name": "Bob"})
    ports.clock.current += timedelta(seconds=61)
    assert Conversation(ports).forget_stale() == ["#2"]
