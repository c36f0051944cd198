"""
What the shell works out once per line said in a room, not once per assistant that hears it.

One line said in a room reaches every assistant there in the same reactor turn
(`AssistantHandler.receive`, then `hear`): with 20 assistants in a room, stripping its colour
markup and checking its speaker's admin lock once per assistant were 6% and 5% of the
reactor's time (`bench.reactor`).
"""

import functools

from evennia.utils.ansi import strip_ansi
from twisted.internet import reactor

from ai_assistant.agent.perception import is_out_of_character


@functools.lru_cache(maxsize=256)
def plain_text(message):
    """
    A message without its colour markup. One line said in a room reaches every assistant
    there, each of which strips it (`AssistantHandler.receive`): with 20 assistants in a room
    Evennia's ANSI parser was 6% of the reactor's time (`bench.reactor`), so it runs once.
    """
    return strip_ansi(message)


# whether a speaker is an admin, by id, until the end of this reactor turn
admins_this_turn = {}


def is_admin(sender):
    """
    Whether `sender` passes the admin lock (the same as the @assistant command's).

    One line said in a room is heard by every assistant there, in one reactor turn: the lock
    is parsed and checked once per speaker and turn, not once per assistant (5% of the
    reactor's time with 20 assistants in a room, `bench.reactor`). With no reactor running
    (a script, a test) there is no turn to end, and it is checked every time.
    """
    def check():
        return bool(sender.locks.check_lockstring(sender, "cmd:perm(Admin)"))

    if not reactor.running:
        return check()
    found = admins_this_turn.get(sender.id)
    if found is None:
        if not admins_this_turn:
            reactor.callLater(0, admins_this_turn.clear)
        found = admins_this_turn[sender.id] = check()
    return found


def not_sent_notice(location, text):
    """
    Who in `location` is not sent an assistant's emote `text`: the other assistants, when it is
    a notice with no words of the character in it (the "thinking" emote, an out-of-character
    notice). Each would drop it unheard (`perception.is_out_of_character`) after Evennia had
    formatted it for them: with 20 assistants in a room, the "thinking" emote alone was 12% of
    the reactor's time (`bench.reactor`). Players still see it.

    Returns:
        list or None: The objects to exclude (None: everyone is sent it).
    """
    if not is_out_of_character("pose", text):
        return None
    # an assistant's class has the `assistant` handler (`handler.AssistantMixin`, whose
    # module imports this one); one an admin puppets shows it to the admin, as before
    return [obj for obj in location.contents
            if hasattr(type(obj), "assistant") and not obj.sessions.count()]
