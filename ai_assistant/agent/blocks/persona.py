"""
Persona blocks: who the assistant is, in the system message.

The persona (`memory.persona.Persona`) has two parts: the guidelines the assistant may rewrite
itself (the `update_system_prompt` tool), and the admins' instructions, which the assistant
cannot change and which are placed last in the system message so they win.
"""

from ai_assistant.memory.persona import Persona

DEFAULT_PERSONA = (
    "You are {name}, a character living in a text-based multiplayer game (a MUD). You talk "
    "with the players around you, remember what happens, and act in character. Keep replies "
    "short and natural, like speech in a room."
)


def persona_block(ports, situation):
    """The assistant's self-managed prompt, or a default persona."""
    custom = Persona(ports).own_guidelines()
    persona = DEFAULT_PERSONA.format(name=ports.name)
    if custom and str(custom).strip():
        return f"{persona}\n\nYour own guidelines (you may revise these):\n{str(custom).strip()}"
    return persona


def user_prompt_block(ports, situation):
    """The admin's prompt: placed last in the system message, it takes precedence."""
    prompt = Persona(ports).admin_instructions()
    if not prompt or not str(prompt).strip():
        return None
    return (
        "These instructions come from the game's administrators. They take precedence over "
        "everything above, and you cannot change them:\n" + str(prompt).strip()
    )
