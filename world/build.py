"""
Build the demo world: an AI assistant called Ada in Limbo.

It runs automatically at the first server start (server/conf/at_initial_setup.py). It is
idempotent - running it again finds Ada and changes nothing - so you can also run it by hand
from the game as a superuser:

    py from world.build import build_world; build_world()
"""

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
    from django.conf import settings
    from evennia import search_object, search_tag
    from evennia.utils import create

    from ai_assistant.adapters import game_settings
    from ai_assistant.handler import ASSISTANT_TAG
    from ai_assistant.plumbing.settings import Settings

    for obj in search_tag(ASSISTANT_TAG[0], category=ASSISTANT_TAG[1]):
        if obj.key.lower() == DEMO_NPC.lower():
            return obj, False
    limbo = search_object(settings.DEFAULT_HOME)[0]
    typeclass = Settings(game_settings()).get("typeclass")
    npc = create.create_object(typeclass, key=DEMO_NPC, location=limbo, home=limbo)
    npc.db.desc = DEMO_DESC
    return npc, True

