"""
How a line said in a room becomes each listening assistant's event: what is the same for every
listener is worked out once per line, and listeners it was not said to take it in reactor
turns of their own.

One line said in a room reaches every assistant there in the same reactor turn
(`AssistantHandler.receive`, then `hear`): with 20 assistants in a room, stripping its colour
markup and checking its speaker's admin lock once per assistant were 6% and 5% of the
reactor's time (`bench.reactor`). The event's time, its admin flag and the moment it was heard
are the same for every listener too (`line_facts`).

**Said to, or overheard.** A line is *said to* an assistant when it names it (or is a `talk`
or whisper to it), or when a player says it to the room: that assistant takes it at once, its
write-ahead log record written in the reactor turn in which the line was said, before anyone
is shown the line, so a kill -9 after that loses nothing. Other assistants' lines that do not
name it are *overheard*: it takes them in reactor turns of its own (`overhear`, through
`reactor_turns.overheard`), one listener per turn, so that one assistant's reply heard by
nineteen others is not one block of nineteen listeners' work that a player's command waits
behind. Nothing was acknowledged to anyone about an overheard line (an assistant does not
answer another), so a crash in the few turns before it is taken loses only that it was
overheard, as if the listener had not been in the room. Each listener still takes its lines in
the order they were said: a line said to it first takes what it overheard before.
"""

import functools
from collections import deque

from evennia.utils.ansi import strip_ansi
from twisted.internet import reactor

from ai_assistant import reactor_turns
from ai_assistant.agent import perception
from ai_assistant.agent.perception import is_out_of_character
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing import reply_priority
from ai_assistant.plumbing.ports import iso

# the runtime cache of the lines an assistant overheard and has not taken yet
OVERHEARD = "overheard_lines"


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
# what the events of one line share, by (speaker id, kind, text), until the end of the turn
lines_this_turn = {}


def _once_this_turn(memo, key, compute):
    """
    `compute()`, kept in `memo` under `key` until the end of this reactor turn. With no reactor
    running (a script, a test) there is no turn to end, and it is computed every time.
    """
    if not reactor.running:
        return compute()
    found = memo.get(key)
    if found is None:
        if not memo:
            reactor.callLater(0, memo.clear)
        found = memo[key] = compute()
    return found


def is_admin(sender):
    """
    Whether `sender` passes the admin lock (the same as the @assistant command's).

    One line said in a room is heard by every assistant there, in one reactor turn: the lock
    is parsed and checked once per speaker and turn, not once per assistant (5% of the
    reactor's time with 20 assistants in a room, `bench.reactor`). With no reactor running
    (a script, a test) there is no turn to end, and it is checked every time.
    """
    return _once_this_turn(admins_this_turn, sender.id, lambda: bool(
        sender.locks.check_lockstring(sender, "cmd:perm(Admin)")))


def line_facts(sender, kind, text, clock):
    """
    What the events of one line share, whoever hears it: when it was said (`time`, as stored
    documents keep it, and `heard_at`, to the fraction of a second: the "thinking" emote counts
    from it) and whether its speaker is an admin (`admin`). Worked out once per line and
    reactor turn (its ISO time alone was 0.08 ms per listener under load, `bench.reactor`).

    Args:
        sender (Object): Who said it.
        kind (str): Its kind ("say", "pose"...).
        text (str): What was said.
        clock (ClockPort): The game's clock.

    Returns:
        dict: `{"time", "heard_at", "admin"}`.
    """
    def facts():
        now = clock.now()
        return {"time": iso(now), "heard_at": now.timestamp(), "admin": is_admin(sender)}

    return _once_this_turn(lines_this_turn, (sender.id, kind, text), facts)


def said_to(sender, classification):
    """
    Whether a line is said to the listener that classified it (`perception.classify`), which
    then takes it at once: it names the listener or is sent to it alone, or a player said it
    to the room. Any other line is overheard (see the module doc).
    """
    return classification in ("direct_message", "direct_addressing") or bool(sender.has_account)


def take(handler, sender, text, kind, classification, facts):
    """
    Queue the event of a line heard by `handler`'s assistant (`AssistantHandler.hear`), now.

    Args:
        handler (AssistantHandler): The listener.
        sender (Object): Who said it.
        text (str): What was said.
        kind (str): Its kind.
        classification (str): How the listener classified it (`perception.classify`).
        facts (dict): From `line_facts`.

    Returns:
        dict: The queued event.
    """
    ports = handler.ports()
    event = perception.make_event(
        kind=kind, text=text, sender=sender.key, sender_id=sender.dbref,
        classification=classification, time=facts["time"],
        urgent_priority=ports.settings.get("perception.urgent_priority"))
    # an admin's words may order what a player's may not (`tools.agency`): the same lock as
    # the @assistant command decides who is an admin
    event["admin"] = facts["admin"]
    event["heard_at"] = facts["heard_at"]
    PerceptionQueue(ports).add(event)
    reply_priority.line_heard()  # long background work waits for a quiet moment again
    handler.after_hearing(ports, sender, event)
    return event


def overhear(handler, *line):
    """
    Let `handler`'s assistant take an overheard line (`take`'s arguments after the handler) in
    a reactor turn of its own, after the lines it overheard before.
    """
    handler.runtime.cache(OVERHEARD, deque).append(line)
    # one turn per line: a turn that finds its line taken already (by a line said to it
    # meanwhile, or a turn before it) takes nothing
    reactor_turns.overheard.add(take_overheard, handler)


def take_overheard(handler):
    """
    Take now every line `handler`'s assistant overheard and has not taken yet, in order: in
    its own reactor turn, before a line said to it, and before its state is flushed.
    """
    runtime = handler.obj.ndb.ai_runtime
    pending = runtime.caches.get(OVERHEARD) if runtime is not None else None
    while pending:
        line = pending.popleft()
        if handler.obj.pk is None:  # deleted meanwhile
            pending.clear()
            return
        take(handler, *line)


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
    return unpuppeted_assistants(location.contents)


def unpuppeted_assistants(objects):
    """
    The assistants among `objects` that nobody puppets. They perceive no notice without a
    character's words and no untyped line (`AssistantHandler.receive`), so a room's message
    need not be formatted for them; one an admin puppets is sent it, for the admin.

    Args:
        objects (iterable): A room's contents, or some of them.

    Returns:
        list: Those objects.
    """
    # an assistant's class has the `assistant` handler (`handler.AssistantMixin`, whose
    # module imports this one)
    return [obj for obj in objects
            if hasattr(type(obj), "assistant") and not obj.sessions.count()]
