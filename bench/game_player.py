"""
A player character for `bench.game_recall`: a character that counts as a player (`has_account`)
without an account or a session, so the assistant hears, greets and lists it as the game would
a logged-in player. Imported only once Django and Evennia are up (`bench.scale.boot`).
"""

from evennia.objects.objects import DefaultCharacter


class BenchPlayer(DefaultCharacter):
    """A character that the assistant takes for a player."""

    has_account = True
