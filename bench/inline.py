"""
Deferreds run without a reactor: a bench that drives the assistants in its own process runs
the thread pools' work inline (`inline_threads`), so every Deferred has fired by the time the
call returns, and reads its result at once (`fired`).
"""


def inline_threads():
    """Run the thread pools' work inline (no reactor runs in this process)."""
    from twisted.internet import defer

    from ai_assistant.plumbing import threads

    threads.run_cpu_bound = threads.run_blocking = defer.maybeDeferred


def fired(deferred):
    """The result of a Deferred that fired inline (raises its failure)."""
    from twisted.python.failure import Failure

    if deferred is None:
        return None
    results = []
    deferred.addBoth(results.append)
    if not results:
        raise RuntimeError("a Deferred did not fire inline")
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]
