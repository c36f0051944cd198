"""
`@assistant/memory/move = postgres` (or `= embedded`): move every assistant's long-term memories
between the embedded store and PostgreSQL while the game runs (`memory/longterm/store_move.py`).

The move runs in a worker thread and joins the game's own embedded store, so assistants keep
talking, journaling and recalling meanwhile; the admin hears when it starts and what the check
found when it ends. The README ("Moving a live game's memories to PostgreSQL") gives the steps
around it: move, switch `memory.store`, `@reload`, move again.
"""

from evennia.utils import logger

DIRECTIONS = {"postgres": "PostgreSQL", "embedded": "the embedded store"}
USAGE = "Usage: @assistant/memory/move = postgres   (or = embedded, to move them back)"
_moving = []  # one move at a time per process


def _default_runner(func, *args, **kwargs):
    from ai_assistant.plumbing.threads import run_blocking

    return run_blocking(func, *args, **kwargs)


MOVE_RUNNER = _default_runner  # tests run it synchronously


def _move(direction, tree, data_dir, database):
    from ai_assistant.memory.longterm.store_move import move_memories, open_stores

    embedded, postgres, close = open_stores(tree, data_dir, database)
    try:
        if direction == "postgres":
            return move_memories(embedded, postgres)
        return move_memories(postgres, embedded)
    finally:
        close()


def summary(direction, report):
    """The admin's message for a finished move."""
    where = DIRECTIONS[direction]
    lines = [f"|wMemories moved to {where}|n: {report['copied']} copied, {report['skipped']} "
             f"already there, {report['memories']} memories of {report['scopes']} assistants; "
             f"{report['checked']} vectors compared."]
    if report["problems"]:
        lines.append("|rThe check found differences (run the move again):|n")
        lines += [f"  {problem}" for problem in report["problems"][:10]]
    else:
        lines.append(f"Counts and vectors agree. Set memory.store = \"{direction}\" in "
                     "AI_ASSISTANT, @reload, then run this move once more for what was "
                     "written meanwhile.")
    return "\n".join(lines)


def start_move(caller, direction):
    """Check the request, tell the admin, and start the move in a worker."""
    from ai_assistant.adapters import game_database, game_settings, semantic_data_dir
    from ai_assistant.plumbing.settings import Settings

    direction = (direction or "").strip().lower()
    if direction not in DIRECTIONS:
        caller.msg(USAGE)
        return
    if _moving:
        caller.msg("A move is already running; wait for its report.")
        return
    tree = game_settings()
    database = game_database(Settings(tree))
    caller.msg(f"Moving every assistant's memories to {DIRECTIONS[direction]} in the "
               "background; the game keeps running.")
    _moving.append(direction)

    def _done(report):
        caller.msg(summary(direction, report))

    def _failed(failure):
        logger.log_err(f"memory move failed: {failure.getTraceback()}")
        caller.msg(f"|rThe move stopped: {failure.getErrorMessage()}|n "
                   "(what was copied stays; run it again to finish)")

    deferred = MOVE_RUNNER(_move, direction, tree, semantic_data_dir(), database)
    deferred.addCallbacks(_done, _failed)
    deferred.addBoth(lambda _: _moving.clear())
