"""The perception queue (`memory.perception_queue`): bounded, taken by priority."""

from support import ChangeCheckingState, make_ports

from ai_assistant.agent import perception
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing.ports import iso


def event(ports, kind, text, sender="Bob"):
    return perception.make_event(
        kind=kind, text=text, sender=sender, sender_id="#2", time=iso(ports.clock.now()),
        classification=perception.classify(kind, text, names=["Ada"]))


def test_events_wait_in_the_order_they_came_and_are_taken_most_urgent_first():
    # each add says what it changed (one event), and the change gives the queue written
    ports = make_ports(state=ChangeCheckingState())
    queue = PerceptionQueue(ports)
    for kind, text in (("say", "chatter"), ("arrive", "Bob arrives."), ("talk", "hello")):
        assert queue.add(event(ports, kind, text)) is None
    assert [e["text"] for e in queue.waiting()] == ["chatter", "Bob arrives.", "hello"]
    assert ports.state.described == 2  # the first add wrote the queue whole
    assert [e["text"] for e in queue.take_all()] == ["hello", "chatter", "Bob arrives."]
    assert queue.waiting() == [] and queue.take_all() == []


def test_a_full_queue_drops_the_oldest_of_the_lowest_priority_and_counts_it():
    ports = make_ports(state=ChangeCheckingState(), overrides={"perception.queue_size": 2})
    queue = PerceptionQueue(ports)
    queue.add(event(ports, "say", "chatter one"))
    queue.add(event(ports, "say", "chatter two"))
    assert queue.add(event(ports, "talk", "urgent"))["text"] == "chatter one"
    assert queue.add(event(ports, "arrive", "Cy arrives.", sender="Cy"))["text"] == "Cy arrives."
    assert [e["text"] for e in queue.waiting()] == ["chatter two", "urgent"]
    assert queue.dropped() == 2
    assert ports.state.described == 3  # the drops too, as the event added and the one gone


def test_an_out_of_character_event_is_never_queued_nor_counted():
    ports = make_ports()
    queue = PerceptionQueue(ports)
    ooc = event(ports, "say", "(OOC: brb)")
    assert queue.add(ooc) is ooc
    assert queue.waiting() == [] and queue.dropped() == 0


def test_waiting_hands_out_a_new_list():
    ports = make_ports()
    queue = PerceptionQueue(ports)
    queue.add(event(ports, "talk", "hello"))
    queue.waiting().clear()
    assert len(queue.waiting()) == 1
