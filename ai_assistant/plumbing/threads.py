"""
The bounded thread pools that blocking work runs in, off the reactor.

- `run_blocking`: waiting work (LLM requests) - several threads, sized by `threads.max`;
- `run_cpu_bound`: computing work (embeddings, the local vector store) - `threads.cpu` threads
  (default 1). Python threads share one interpreter lock with the reactor: every busy
  computing thread is one more contender the reactor must win the lock from before it can
  answer a player, so computing work queues on few threads instead of running on many.

Twisted's default pool is shared with Evennia's logger, so a burst of slow LLM calls there would
stall logging; these pools are ours alone. Work submitted here must not touch `db` attributes:
it returns values, and callbacks on the reactor thread write.

A game may lower the interpreter's switch interval with `threads.switch_interval` (the demo
uses 1 ms; Python's is 5 ms) so that a computing thread hands the lock back to the reactor
sooner; it is off by default because it changes the whole process.

A full pass of the garbage collector stops every thread, the reactor's too, for as long as it
takes to visit every object the process holds: 0.2 s in a Server with twenty grown
assistants (`bench.reactor --blocks`). With `threads.gc_freeze` the objects held once a start
has settled (Django, Evennia, the world and the assistants warmed at the start) move to the
collector's permanent generation (`freeze_held_objects`), so its full passes visit only what
came after. Off by default, as it changes the whole process; an object frozen that way is
still freed when nothing refers to it, but never as part of a reference cycle.

Before the first pool starts, the process sets OpenSSL up on the calling thread
(`openssl_setup.prepare_openssl`): workers racing into its first use have hung a Server.

The pools' threads are daemon threads and shutdown does not wait for them: an LLM call can
take a minute, and a Server that lingers after `evennia reload` collides with its own restart.
Work cut off that way loses nothing - state only changes in reactor callbacks, which never ran,
and the work is retried idempotently after the restart.
"""

import gc
import sys
import threading

from twisted.internet import reactor
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from ai_assistant.plumbing.openssl_setup import prepare_openssl
from ai_assistant.plumbing.settings import DEFAULTS

# Process-wide by nature: one pool of each kind serves every assistant of the server.
_pools = {}
_sizes = {"io": DEFAULTS["threads"]["max"], "cpu": DEFAULTS["threads"]["cpu"]}
_lock = threading.Lock()


def _daemon_thread(*args, **kwargs):
    thread = threading.Thread(*args, **kwargs)
    thread.daemon = True
    return thread


def configure(settings):
    """
    Size the pools from the game's settings (the shell calls this before any work starts).

    Pools already started keep their size. `threads.switch_interval`, when set, lowers the
    interpreter's switch interval for the whole process: opt-in, since it is process-wide.

    Args:
        settings (Settings): The game-wide settings.
    """
    with _lock:
        _sizes["io"] = max(1, int(settings.get("threads.max")))
        _sizes["cpu"] = max(1, int(settings.get("threads.cpu")))
    interval = settings.get("threads.switch_interval")
    if interval and interval < sys.getswitchinterval():
        sys.setswitchinterval(interval)


def get_pool(kind="io"):
    """
    A shared pool, started on first use and stopped when the reactor shuts down.

    Args:
        kind (str): "io" (waiting work) or "cpu" (computing work).

    Returns:
        ThreadPool: The running pool.
    """
    with _lock:
        pool = _pools.get(kind)
        if pool is None:
            if not _pools:
                prepare_openssl()
            size = _sizes[kind]
            pool = ThreadPool(minthreads=min(1, size), maxthreads=max(1, size),
                              name=f"ai_assistant-{kind}")
            pool.threadFactory = _daemon_thread
            pool.start()
            _pools[kind] = pool
            reactor.addSystemEventTrigger("during", "shutdown", stop_pool, wait=False)
        return pool


def freeze_held_objects(settings):
    """
    When the game asks for it (`threads.gc_freeze`), collect once and move every object the
    process holds now to the collector's permanent generation (`gc.freeze`): for a start that
    has settled, whose objects live as long as the process.

    Args:
        settings (Settings): The game-wide settings.

    Returns:
        int: How many objects are frozen now (0 when the game did not ask).
    """
    if not settings.get("threads.gc_freeze"):
        return 0
    gc.collect()  # the start's own garbage is freed first, not kept for ever
    gc.freeze()
    return gc.get_freeze_count()


def stop_pool(wait=True):
    """
    Stop the pools. Safe to call more than once.

    Args:
        wait (bool): Wait for running work to finish (tests); at shutdown it does not.
    """
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        if wait:
            pool.stop()
        else:
            # no join: idle workers exit now, busy ones die with the process (daemon threads)
            threading.Thread(target=pool.stop, name="ai_assistant-pool-stop", daemon=True).start()


def run_blocking(func, *args, **kwargs):
    """
    Run waiting work (an LLM request) `func(*args, **kwargs)` in the I/O pool.

    Returns:
        Deferred: Fires on the reactor thread with the return value (or the exception).
    """
    return deferToThreadPool(reactor, get_pool("io"), func, *args, **kwargs)


def run_cpu_bound(func, *args, **kwargs):
    """
    Run computing work (embedding, vector search) `func(*args, **kwargs)` in the CPU pool.

    Returns:
        Deferred: Fires on the reactor thread with the return value (or the exception).
    """
    return deferToThreadPool(reactor, get_pool("cpu"), func, *args, **kwargs)
