"""
Build the demo world: an AI assistant called Ada - the archivist - in Limbo, written for her.

It runs automatically at the first server start (server/conf/at_initial_setup.py). It is
idempotent - running it again finds Ada and the room as they are and changes nothing - so you
can also run it by hand from the game as a superuser:

    py from world.build import build_world; build_world()

Ada is made from the prototype `ARCHIVIST` (world/prototypes.py), as `spawn archivist` would
make another: her persona, her description and her settings come from it.
"""

ROOM_DESC = (
    "A round reading room at the top of the harbour tower. Shelves of ledgers, charts and "
    "letters climb the walls to a ceiling of smoked glass; gulls argue somewhere above it. A "
    "long oak desk stands in the middle, its lamp always lit, and behind it sits the archivist, "
    "who writes down everything she hears. Speak to her with |wtalk Ada = <words>|n, or just "
    "say her name."
)
# Evennia's stock text for Limbo starts with this: only that text is replaced
STOCK_LIMBO_START = "Welcome to your new"


def build_world():
    """
    Write Limbo for Ada (if it still has Evennia's stock text) and spawn Ada there unless an
    assistant called Ada already exists.

    Returns:
        tuple: `(npc, created)`.
    """
    from django.conf import settings
    from evennia import search_object, search_tag
    from evennia.prototypes.spawner import spawn

    from ai_assistant.handler import ASSISTANT_TAG
    from world.prototypes import ARCHIVIST

    limbo = search_object(settings.DEFAULT_HOME)[0]
    if str(limbo.db.desc or "").startswith(STOCK_LIMBO_START) or not limbo.db.desc:
        limbo.db.desc = ROOM_DESC
    for obj in search_tag(ASSISTANT_TAG[0], category=ASSISTANT_TAG[1]):
        if obj.key.lower() == ARCHIVIST["key"].lower():
            return obj, False
    npc = spawn(dict(ARCHIVIST, location=limbo, home=limbo))[0]
    return npc, True
