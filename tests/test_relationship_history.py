"""A profile's relationship course (`relationship_history`) is kept by `People.observe`."""

import pytest
from support import make_ports

from ai_assistant.memory import entities
from ai_assistant.memory.entities import People

pytestmark = pytest.mark.core


def test_each_interaction_adds_a_point_that_outlives_the_observations(monkeypatch):
    ports = make_ports()
    people = People(ports)
    people.observe("#9", "Alice", "Thank you, friend!")
    people.observe("#9", "Alice", "Overheard chatter.", interaction=False)
    people.observe("#9", "Alice", "You idiot.")
    stored = people.profiles()["#9"]
    course = stored["relationship_history"]
    assert len(course) == 2  # the overheard line is no interaction
    assert course[0]["favorability"] > course[1]["favorability"]
    assert course[-1] == {"time": stored["relationship"]["updated_at"],
                          "favorability": stored["relationship"]["favorability"],
                          "state": stored["relationship"]["state"]}
    people.merge_attributes("#9", {"mood": "changeable"}, {1, 2, 3}, 10)
    assert people.profiles()["#9"]["observations"] == []
    assert people.profiles()["#9"]["relationship_history"] == course

    monkeypatch.setattr(entities, "RELATIONSHIP_HISTORY_LIMIT", 2)
    people.observe("#9", "Alice", "Please help.")
    assert len(people.profiles()["#9"]["relationship_history"]) == 2
