"""
The floor of `bench.reactor`: the same traffic served by plain Evennia characters, no assistant.

`bench.reactor --floor` creates `FloorCharacter`s instead of assistants, and its players `say`
their lines to the room ("Floor3, how is the harbour today?") instead of `talk`ing. A floor
character that hears its name from a player answers after the scripted model's delay with
Evennia's own `at_say`, as an assistant's `say` tool does. What a `look` then waits for is
Evennia's own work for that traffic (the players' commands, the room's messages, the telnet and
AMP traffic): the least any assistant could add to it is nothing, so the contrib's share of the
tail is what lies above this floor.

The Server imports this module (`bench.reactor.SERVER_SETTINGS` puts the repository on its
path); `create_floor` and `remove_floor` run in it through `py`.
"""

import re

from evennia import DefaultCharacter
from evennia.utils.utils import delay

REPLY = "Noted, friend."


def _said(text):
    """The plain text of what `msg` was given (Evennia passes a string or `(text, options)`)."""
    if isinstance(text, tuple | list):
        text = text[0] if text else ""
    return text if isinstance(text, str) else ""


class FloorCharacter(DefaultCharacter):
    """A character that answers a player who names it, `reply_delay` seconds later."""

    def at_msg_receive(self, text=None, from_obj=None, **kwargs):
        """Answer a player's line that names this character; never another character's."""
        speaker = from_obj[0] if isinstance(from_obj, list | tuple) and from_obj else from_obj
        named = re.search(rf"\b{re.escape(self.key)}\b", _said(text))
        if named and speaker is not None and getattr(speaker, "account", None):
            delay(self.db.reply_delay or 1.0, self._answer)
        return False  # nobody plays it: there is no session to send the line to

    def _answer(self):
        if self.location:
            self.at_say(REPLY)


def create_floor(caller, names, reply_delay):
    """
    Create a `FloorCharacter` for each of `names` in the caller's room (run in the Server,
    through `py`); the caller is told how many.
    """
    from evennia.utils.create import create_object

    for name in names:
        character = create_object(FloorCharacter, key=name, location=caller.location,
                                  home=caller.location)  # fmt: skip
        character.db.reply_delay = reply_delay
    caller.msg(f"floor: {len(names)} characters")


def remove_floor(caller, names):
    """Delete the floor characters of `names` (a lent server is left as it was found)."""
    from evennia.objects.models import ObjectDB

    gone = 0
    for character in ObjectDB.objects.filter(db_key__in=names,
                                             db_typeclass_path__endswith="FloorCharacter"):
        character.delete()
        gone += 1
    caller.msg(f"floor removed: {gone} characters")
