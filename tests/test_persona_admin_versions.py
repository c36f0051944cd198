"""The admins' persona changes are numbered versions beside the assistant's own guidelines
(`memory.persona.Persona.instruct` with `by`), and a revert puts back the text it names."""

import pytest
from support import make_ports

from ai_assistant.memory.persona import Persona

pytestmark = pytest.mark.core


def test_an_admins_change_is_a_version_and_its_revert_restores_the_persona_only():
    persona = Persona(make_ports())
    persona.rewrite("Be brief.", reason="short", by="assistant")
    first = persona.instruct("You are Ada.", by="admin Root")
    assert first["which"] == "persona" and first["previous"] is None
    persona.instruct("You are a pirate.", by="admin Root")
    assert persona.instruct("You are a pirate.", by="admin Root") is None  # unchanged: no version
    listed = [(v["version"], v["which"], v["prompt"]) for v in persona.versions()]
    # the persona as it was before its first versioned change (none) is kept as a version too
    assert listed[1:] == [(1, "guidelines", "Be brief."), (2, "persona", None),
                          (3, "persona", "You are Ada."), (4, "persona", "You are a pirate.")]
    back = persona.revert(3, "admin Root")
    assert back["which"] == "persona" and back["version"] == 5
    assert persona.admin_instructions() == "You are Ada."
    assert persona.own_guidelines() == "Be brief."  # the assistant's own text is untouched
    persona.revert(2, "admin Root")
    assert persona.admin_instructions() is None


def test_instructions_set_without_an_author_are_not_versioned():
    persona = Persona(make_ports())
    assert persona.instruct("Be kind.") is None
    assert persona.admin_instructions() == "Be kind." and persona.versions() == []
