"""Who the assistant is told to be (`memory.persona.Persona`): its guidelines, their versions,
and the admins' instructions."""

import pytest
from support import make_ports

from ai_assistant.memory.persona import Persona, PersonaVersionError, admin_instructions_attribute


def test_the_admins_instructions_are_set_and_removed():
    persona = Persona(make_ports())
    assert persona.admin_instructions() is None
    persona.instruct("You are Ada, the harbour archivist.")
    assert persona.admin_instructions() == "You are Ada, the harbour archivist."
    assert persona.own_guidelines() is None  # the admins' words are not the assistant's
    persona.instruct(None)
    assert persona.admin_instructions() is None


def test_a_prototype_gives_the_instructions_as_the_attribute_the_persona_reads():
    name, value = admin_instructions_attribute("Be kind.")
    ports = make_ports()
    ports.state.set(name, value)
    assert Persona(ports).admin_instructions() == "Be kind."


def test_each_rewrite_is_a_numbered_version_with_the_text_it_replaced():
    ports = make_ports(overrides={"workspace.system_prompt.history_max": 2})
    persona = Persona(ports)
    first = persona.rewrite("Be brief.", reason="players want short answers", by="assistant")
    assert first["version"] == 1 and first["previous"] is None and first["new_len"] == 9
    persona.rewrite("Be brief and warm.", reason="warmer", by="assistant")
    third = persona.rewrite("Be warm.", reason="admin says so", by="admin Root")
    assert persona.own_guidelines() == "Be warm."
    assert third["previous"] == "Be brief and warm." and third["version"] == 3
    # two kept: what the oldest kept change replaced is still listed, as version 1
    assert [(v["version"], v["prompt"], v["by"]) for v in persona.versions()] == [
        (1, "Be brief.", None), (2, "Be brief and warm.", "assistant"),
        (3, "Be warm.", "admin Root")]


def test_a_revert_is_a_new_version_and_an_unknown_one_is_refused():
    persona = Persona(make_ports())
    persona.rewrite("Be brief.", reason="short", by="assistant")
    persona.rewrite("Shout.", reason="loud", by="assistant")
    back = persona.revert(1, "admin Root")
    assert back["version"] == 3 and back["reason"] == "reverted to version 1"
    assert persona.own_guidelines() == "Be brief."
    persona.revert(0, "admin Root")
    assert persona.own_guidelines() is None
    with pytest.raises(PersonaVersionError, match="no version 9"):
        persona.revert(9, "admin Root")
