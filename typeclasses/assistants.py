"""
The demo game's assistant NPC: the game's own Character made an AI assistant by the contrib's
mixin.

Customise your assistants here (descriptions, extra hooks); `@assistant/create` uses this class
because `AI_ASSISTANT["typeclass"]` in server/conf/settings.py points at it. Everything the
assistant does is on its handler, `npc.assistant` (see `ai_assistant/handler.py`).
"""

from ai_assistant.handler import AssistantMixin

from .characters import Character


class Assistant(AssistantMixin, Character):
    """An AI assistant NPC of the demo game."""
