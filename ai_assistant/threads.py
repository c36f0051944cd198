"""
The one bounded thread pool that blocking work (LLM, embeddings, vector store) runs in.

Twisted's default pool is shared with Evennia's logger, so a burst of slow LLM calls there would
stall logging; this pool is ours alone and sized by the `threads` setting. Work submitted here
must not touch `db` attributes: it returns values, and callbacks on the reactor thread write.

Its threads are daemon threads and shutdown does not wait for them: an LLM call can take a
minute, and a Server that lingers after `evennia reload` collides with its own restart. Work cut
off that way loses nothing - state only changes in reactor callbacks, which never ran, and the
work is retried idempotently after the restart.
"""

import threading

from twisted.internet import reactor
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

_pool = None
_lock = threading.Lock()


def _daemon_thread(*args, **kwargs):
    thread = threading.Thread(*args, **kwargs)
    thread.daemon = True
    return thread


def get_pool(min_threads=1, max_threads=8):
    """
    The shared pool, started on first use and stopped when the reactor shuts down.

    Args:
        min_threads (int): Threads kept alive.
        max_threads (int): Upper bound on concurrent blocking calls.

    Returns:
        ThreadPool: The running pool.
    """
    global _pool
    with _lock:
        if _pool is None:
            try:
                from ai_assistant.conf import Settings

                settings = Settings()
                min_threads = settings.get("threads.min", min_threads)
                max_threads = settings.get("threads.max", max_threads)
            except Exception:  # settings unavailable: keep the arguments
                pass
            _pool = ThreadPool(minthreads=min_threads, maxthreads=max_threads, name="ai_assistant")
            _pool.threadFactory = _daemon_thread
            _pool.start()
            reactor.addSystemEventTrigger("during", "shutdown", stop_pool, wait=False)
        return _pool


def stop_pool(wait=True):
    """
    Stop the pool. Safe to call more than once.

    Args:
        wait (bool): Wait for running work to finish (tests); at shutdown it does not.
    """
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is None:
        return
    if wait:
        pool.stop()
    else:
        # no join: idle workers exit now, busy ones die with the process (daemon threads)
        threading.Thread(target=pool.stop, name="ai_assistant-pool-stop", daemon=True).start()


def run_blocking(func, *args, **kwargs):
    """
    Run `func(*args, **kwargs)` in the pool.

    Returns:
        Deferred: Fires on the reactor thread with the return value (or the exception).
    """
    return deferToThreadPool(reactor, get_pool(), func, *args, **kwargs)
