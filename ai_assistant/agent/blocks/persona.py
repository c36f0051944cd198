"""
Persona blocks: who the assistant is, in the system message.

The persona comes from two state documents: `documents.ASSISTANT_SYSTEM_PROMPT`, which the
assistant may rewrite itself (the `update_system_prompt` tool), and
`documents.USER_SYSTEM_PROMPT`, set by admins, which the assistant cannot change and which is
placed last in the system message so it wins.
"""

from ai_assistant.plumbing import documents

DEFAULT_PERSONA = (
    "You are {name}, a character living in a text-based multiplayer game (a MUD). You talk "
    "with the players around you, remember what happens, and act in character. Keep replies "
    "short and natural, like speech in a room."
)


def persona_block(ports, situation):
    """The assistant's self-managed prompt, or a default persona."""
    custom = ports.state.get(documents.ASSISTANT_SYSTEM_PROMPT, None)
    persona = DEFAULT_PERSONA.format(name=ports.name)
    if custom and str(custom).strip():
        return f"{persona}\n\nYour own guidelines (you may revise these):\n{str(custom).strip()}"
    return persona


def user_prompt_block(ports, situation):
    """The admin's prompt: placed last in the system message, it takes precedence."""
    prompt = ports.state.get(documents.USER_SYSTEM_PROMPT, None)
    if not prompt or not str(prompt).strip():
        return None
    return (
        "These instructions come from the game's administrators. They take precedence over "
        "everything above, and you cannot change them:\n" + str(prompt).strip()
    )
