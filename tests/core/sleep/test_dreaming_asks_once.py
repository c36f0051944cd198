"""
A dreaming step that has nothing new to work on is not asked again until new input arrives.

The model here answers every sleep request the minimal valid way a real model often does
("nothing stable to say yet", "no insight"): entity consolidation and reflection must take
that as an answer, record their progress in the owners' documents (so a reload keeps it), and
not ask about the same observations or the same reflection window on the next dreaming tick.
"""

import json
from collections import Counter

from support import make_ports, result_of
from twisted.internet import defer

from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.reflection_state import ReflectionState
from ai_assistant.plumbing.ports import LLMReply, MemoryState
from ai_assistant.sleep import cycle, entity_consolidation, modes
from ai_assistant.workspace.mode import Mode

# Long, distinct observations: together far more than one consolidation prompt shows.
HOBBIES = ("rowing", "pottery", "chess", "falconry", "cartography", "beekeeping", "fencing",
           "glassblowing", "astronomy", "weaving", "archery", "calligraphy")  # fmt: skip


def observation(number):
    hobby = HOBBIES[number % len(HOBBIES)]
    return (f"Observation {number}: Wren spent the whole afternoon on {hobby}, talking at length "
            f"about the tools it needs, the people she learnt it from and the village fair where "
            f"she hopes to show what she made; she said she would keep at it every week.")


class NothingNewModel:
    """Answers each sleep request minimally and validly; counts the requests by purpose."""

    def __init__(self):
        self.calls = Counter()
        self.shown = []  # the observation prompts entity consolidation sent

    def complete(self, messages, *, tools=None, purpose="chat", **params):
        self.calls[purpose] += 1
        if purpose == "entity_consolidation":
            self.shown.append(messages[-1]["content"])
        answer = {"entity_consolidation": {"attributes": {}},
                  "reflection_questions": {"questions": ["What does Wren spend the afternoon on?"]},
                  "reflection_insights": {"insights": []}}.get(purpose, {})  # fmt: skip
        return defer.succeed(LLMReply(content=json.dumps(answer)))


def dreaming_ports(model, state=None):
    ports = make_ports(key="ada", llm=model, state=state if state is not None else MemoryState(),
                       settings={"reflection": {"threshold": 20}})  # fmt: skip
    return ports


def fall_asleep_dreaming(ports):
    modes.enter_sleep(ports, "test", lambda target, reason: None)
    Mode(ports).set_phase(modes.DREAMING)


def dream(ports, ticks):
    for _ in range(ticks):
        ports.clock.advance(minutes=1)
        result_of(cycle.run_sleep_tick(ports, lambda target, reason: None))


def hear(ports, first, last):
    for number in range(first, last):
        People(ports).observe("#7", "Wren", observation(number))
        Journal(ports).add(f'Wren said to me: "{observation(number)}"', importance=5,
                           source_type="direct", source_entity="Wren")  # fmt: skip


def test_observations_over_one_prompt_are_each_read_once_then_not_asked_again():
    model = NothingNewModel()
    ports = dreaming_ports(model)
    hear(ports, 0, 30)
    fall_asleep_dreaming(ports)
    dream(ports, 12)
    asked = model.calls["entity_consolidation"]
    # more than one prompt's worth: several passes, each reading observations not read before
    assert 2 <= asked <= 4
    for number in range(30):
        assert any(f"Observation {number}:" in prompt for prompt in model.shown), number
    profile = People(ports).profile("#7")
    assert profile["consolidated_through"] == max(o["id"] for o in profile["observations"])
    assert len(profile["observations"]) == 30  # nothing stable said: nothing pruned
    assert People(ports).due_for_consolidation() == []

    # a reload (fresh ports over the same state documents) keeps that progress
    reloaded = NothingNewModel()
    ports = dreaming_ports(reloaded, state=ports.state)
    dream(ports, 5)
    assert reloaded.calls["entity_consolidation"] == 0

    # new input: asked again, once
    People(ports).observe("#7", "Wren", observation(31))
    dream(ports, 5)
    assert reloaded.calls["entity_consolidation"] == 1
    assert "Observation 31:" in reloaded.shown[0]


def test_a_reflection_with_no_insight_is_not_asked_again_until_the_threshold_is_reached_again():
    model = NothingNewModel()
    ports = dreaming_ports(model)
    hear(ports, 0, 6)  # 30 importance: over the threshold of 20
    fall_asleep_dreaming(ports)
    dream(ports, 10)
    assert model.calls["reflection_questions"] == 1
    assert model.calls["reflection_insights"] == 1
    state = ReflectionState(ports).current()
    assert state["cumulative_importance"] == 0 and state["reflection_count"] == 1
    assert not any(entry["content"].startswith("[SYNTHESIS]")
                   for entry in Journal(ports).entries())  # fmt: skip

    reloaded = NothingNewModel()
    ports = dreaming_ports(reloaded, state=ports.state)
    dream(ports, 5)
    assert reloaded.calls["reflection_questions"] == 0

    hear(ports, 6, 10)  # 20 more: due again
    dream(ports, 5)
    assert reloaded.calls["reflection_questions"] == 1


def test_shown_observations_put_the_unread_first_and_keep_read_ones_as_room_allows():
    profile = {"consolidated_through": 3, "observations": [
        {"id": number, "text": "x" * 50, "time": "t", "source": "talk"}
        for number in range(1, 8)]}  # fmt: skip
    line = len(entity_consolidation._observation_line(profile["observations"][0])) + 1
    shown = entity_consolidation.shown_observations(profile, budget=line * 5)
    # the four unread (4-7) first, then the newest read one (3), in their own order
    assert [o["id"] for o in shown] == [3, 4, 5, 6, 7]
    shown = entity_consolidation.shown_observations(profile, budget=line * 2)
    assert [o["id"] for o in shown] == [4, 5]
    # one observation is always shown, even one larger than the budget
    assert [o["id"] for o in entity_consolidation.shown_observations(profile, budget=1)] == [4]
