"""
Where the shell starts the process-wide warm-up (`agent.warmup`) in Evennia's Server process.

Evennia's Server spends seconds starting (`django.setup()`, then `evennia._init()`) before it
imports the contrib's typeclasses, where the warm-up started so far - about half a second
before the server reports itself up, so that a player who talked at once waited for the
imports and models of a reply. A contrib's earliest hook in that process is the `ready()` of
one of its Django apps: the inspector app (`ai_assistant.web`, which a game adds for the memory
inspector) calls `start_in_server_process` there, and the warm-up overlaps Evennia's own start.

It runs in a plain daemon thread: the reactor is not running (nor, perhaps, installed) and
Twisted's thread pools are not started. Two threads importing at once is safe for modules that
go through the import system (each module has its lock); what is not is code that reads
`sys.modules` directly while another thread is still importing that module (openai reads
`sys.modules["httpx"]`), so the thread imports `httpx` whole before `openai`, and nothing else
in the process uses either until the warm-up is over (the long-term store, which imports mem0
and `httpx`, opens only then: `warmup.after_process_warm_up`).

Unless started with `--nodaemon`, twistd daemonizes the Server - it forks - right after loading
it, and a forked child has none of its parent's threads: the fork waits for the warm-up to be
over (`warmup.start_early` registers that with `os.register_at_fork`), so that the child starts
with it all done instead of half an import with its locks held. The wait costs what is left of
the warm-up when Evennia's own start is over; it overlaps everything before.

Only the Server process starts it: not the Portal, not `evennia migrate`, `evennia shell`, a
test run, nor anything else that sets Django up. Games without the app keep the later start
(`typeclasses` calls `warmup.warm_up_process`, which follows an early thread when there is one).
"""

import importlib.util
import os
import sys


def import_tick_modules():
    """
    Import what an awake tick imports on first use (`AssistantHandler._awake_tick`), for the
    process warm-up to call off the reactor (named here by reference, as every module is).
    """
    import ai_assistant.agent.awake  # noqa: F401
    import ai_assistant.agent.react  # noqa: F401
    import ai_assistant.sleep.compaction  # noqa: F401
    import ai_assistant.sleep.modes  # noqa: F401


def is_server_process(argv=None):
    """
    True in Evennia's Server process: `twistd --python=<evennia>/server/server.py` (how the
    launcher and the Portal start it, with or without a profiler).

    Args:
        argv (list[str], optional): The command line (default `sys.argv`).

    Returns:
        bool: False in the Portal (`portal.py`), the launcher, a test run or a shell.
    """
    argv = sys.argv if argv is None else argv
    spec = importlib.util.find_spec("evennia.server.server")
    if spec is None or not spec.origin:
        return False
    server_file = os.path.realpath(spec.origin)
    for index, arg in enumerate(argv):
        if arg.startswith("--python="):
            path = arg.split("=", 1)[1]
        elif arg in ("--python", "-y") and index + 1 < len(argv):
            path = argv[index + 1]
        else:
            continue
        if os.path.realpath(path) == server_file:
            return True
    return False


def start_in_server_process(argv=None):
    """
    Start the process-wide warm-up in a daemon thread, in the Server process only (see the
    module doc); a no-op anywhere else.

    Args:
        argv (list[str], optional): The command line (default `sys.argv`).

    Returns:
        threading.Thread or None: The warm-up's thread, when one was started.
    """
    if not is_server_process(argv):
        return None
    from django.conf import settings as django_settings
    from evennia.utils import logger

    from ai_assistant.agent import warmup
    from ai_assistant.plumbing.settings import Settings, settings_tree

    settings = Settings(settings_tree(getattr(django_settings, "AI_ASSISTANT", {}) or {}))
    return warmup.start_early(settings, import_tick_modules,
                              log=lambda message: logger.log_info(f"[ai_assistant] {message}"))
