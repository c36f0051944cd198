"""
Build the demo world: an AI assistant called Ada in Limbo.

It runs automatically at the first server start (server/conf/at_initial_setup.py). It is
idempotent - running it again finds Ada and changes nothing - so you can also run it by hand
from the game as a superuser:

    py from world.build import build_world; build_world()
"""

from django.conf import settings

DEMO_NPC = "Ada"
DEMO_DESC = (
    "A calm woman with ink-stained fingers and a notebook that never seems to fill up. "
    "She listens carefully and remembers what she is told."
)


def build_world():
    """
    Create Ada in Limbo unless an assistant called Ada already exists.

    Returns:
        tuple: `(npc, created)`.
    """
    from evennia import search_object, search_tag
    from evennia.utils import create

    for obj in search_tag("ai_assistant", category="ai_assistant"):
        if obj.key.lower() == DEMO_NPC.lower():
            return obj, False
    limbo = search_object(settings.DEFAULT_HOME)[0]
    typeclass = settings.AI_ASSISTANT.get("typeclass", "ai_assistant.typeclasses.AssistantCharacter")
    npc = create.create_object(typeclass, key=DEMO_NPC, location=limbo, home=limbo)
    npc.db.desc = DEMO_DESC
    return npc, True

