"""
What the first command said in an assistant's room pays once per Server process, done ahead.

A fresh Server process (every start and `reload`) has read nothing yet: the first line a player
says to an assistant - `talk Ada = ...` - makes Evennia read the player's nicks (two queries a
category), load the room's objects and their foreign keys, parse each object's locks, build the
command sets of the objects in the room (the assistant's own: a character's ~90 commands), find
the assistant through a search whose query shape Django has not built before; and it makes the
assistant read its aliases, its room's description and its documents (the light ones, and the
heavy ones a heard line is written to: the journal, the conversation). Traced in the Server
(issue 34, fifth pass), that came to ~35-50 ms of the reactor's time before the model was even
asked, against ~3-5 ms for the same line a second time: more than the whole warm reply.

`warm_room(npc)` does those reads ahead, when the assistant's script starts (the players of a
reload are connected again by then), on the reactor - Attributes and the database are read
there - in small steps handed to Twisted's cooperator (`task.cooperate`), which gives the
reactor back between steps (after at most ~10 ms of them), so that a line said meanwhile is not
held. Every step is a read that fills a cache Evennia keeps for the process (its Attribute and
Tag caches, an object's lock and command-set handlers, a room's contents, a foreign key's
object) or the assistant's documents in `AttributeState` (the heavy ones only where a player is
there to talk, for at most `memory.resident_assistants` assistants a process). Nothing is
written, nothing is sent to anyone, and no hook a game overrides is called but an exit's
`at_cmdset_get`, which Evennia calls at every command said in its room.
"""

from evennia.objects.objects import DefaultExit
from twisted.internet import task

from ai_assistant.plumbing import documents

# the nick categories a command reads: the input line's (`inputfuncs.text`), and the object and
# account ones a search reads (`DefaultObject.get_search_query_replacement`)
NICK_CATEGORIES = ("inputline", "object", "account")
_heavy_read = []  # process-wide: the assistants whose heavy documents were read ahead


def warm_up(npc, ports):
    """
    Both warm-ups of an assistant, at a start or a reload: what a first command in its room
    reads, on the reactor in steps (`warm_room`), and what its replies need, off the reactor
    (`agent.warmup.warm_up_in_turn`).

    Args:
        npc (AssistantMixin): The assistant.
        ports (AssistantPorts): Its ports.

    Returns:
        Deferred[dict]: What `warm_up_in_turn` warmed; never errbacks.
    """
    from ai_assistant.agent.warmup import warm_up_in_turn

    warm_room(npc, log=ports.log)
    return warm_up_in_turn(ports)


def warm_room(npc, log=None):
    """
    Read ahead, in small steps on the reactor, what the first command said in `npc`'s room
    reads (see the module doc).

    Args:
        npc (AssistantMixin): The assistant.
        log (callable, optional): `log(message)` for a step that failed (the command then
            reads it itself).

    Returns:
        Deferred: Fires with the number of steps taken when done; never errbacks.
    """
    steps, log = [0], log or (lambda message: None)

    def counted():
        for _ in room_steps(npc, log):
            steps[0] += 1
            yield None

    def failed(failure):  # outside a step's own reads (the room's contents): logged, no more
        log(f"warm-up of the room stopped: {failure.getErrorMessage()}")

    return task.cooperate(counted()).whenDone().addErrback(failed).addCallback(
        lambda _: steps[0])


def room_steps(npc, log):
    """
    The reads, one per step (a generator: the cooperator runs it a step at a time).

    Yields:
        None: After each step.
    """
    location = npc.location
    if location is None or npc.pk is None:
        return
    present = list(location.contents)  # the room's contents cache, its objects loaded
    yield
    for obj in [location, *present]:
        _step(_object_reads, obj, log=log)
        yield
    players = [obj for obj in present if obj is not npc and obj.sessions.count()]
    for player in players:
        for read in (_nick_reads, _command_set_reads, _search_read):
            _step(read, player, npc, log=log)
            yield
    _step(_assistant_reads, npc, bool(players), log=log)
    yield


def _step(read, *args, log):
    try:
        read(*args)
    except Exception as err:  # noqa: BLE001 - a read ahead failing only costs the command
        log(f"warm-up read {read.__name__} failed: {err!r}")


def _object_reads(obj):
    """An object in the room, as a command's command-set lookup reads it."""
    obj.locks  # noqa: B018  (parsed at first use: the `call` lock is checked on every command)
    obj.location  # noqa: B018  (a foreign key, loaded at first use)
    obj.cmdset.current  # noqa: B018  (its command sets, built at first use)
    obj.aliases.all()  # a search reads them
    if isinstance(obj, DefaultExit):
        obj.at_cmdset_get()  # an exit's command set, built at the first command in its room


def _nick_reads(player, npc):
    """A player's nicks and their account's, in the categories a command and a search read."""
    for owner in (player, player.account):
        if owner is not None:
            for category in NICK_CATEGORIES:
                owner.nicks.get(category=category, return_obj=True)


def _command_set_reads(player, npc):
    """The command sets of a player's account and sessions, and what the player carries."""
    for owner in (player.account, *player.sessions.all()):
        if owner is not None:
            owner.cmdset.current  # noqa: B018
    player.contents  # noqa: B018  (a command gathers the command sets of what it carries)


def _search_read(player, npc):
    """The query shape of a search among the room's assistants (`talk`): read only, quiet."""
    player.search(npc.key, candidates=[npc], quiet=True, use_nicks=True)


def _assistant_reads(npc, spoken_to):
    """
    The assistant: its light documents (one read loads them all) and its surroundings as its
    turn describes them; with a player in its room (`spoken_to`), also its heavy documents (the
    journal and the conversation a heard line is written to) - at most for
    `memory.resident_assistants` assistants a process, as only that many keep them in memory
    (`plumbing/residency.py`). What its first turn reads on the reactor before the model is asked.
    """
    ports = npc.assistant.ports()
    heavy = spoken_to and len(_heavy_read) < int(ports.settings.get("memory.resident_assistants"))
    if heavy:
        _heavy_read.append(npc.pk)
    for place in (documents.CHARACTER, documents.SCRIPT):
        for kept in (False, True) if heavy else (False,):
            names = documents.kept_in_state(place, heavy=kept)
            if names:
                ports.state.get(names[0])  # the first read of a kind reads all of its kind
    ports.world.describe_location()
