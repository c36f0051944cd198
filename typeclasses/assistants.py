"""
The demo game's assistant NPC: the contrib's AssistantCharacter with this game's object parent.

Customise your assistants here (descriptions, extra hooks); `@assistant/create` uses this class
because `AI_ASSISTANT["typeclass"]` in server/conf/settings.py points at it.
"""

from ai_assistant.typeclasses import AssistantCharacter

from .objects import ObjectParent


class Assistant(ObjectParent, AssistantCharacter):
    """An AI assistant NPC of the demo game."""
