"""
Warming up: what an assistant's first reply needs, made ready in the background when the server
starts or reloads, so that the first reply is as fast as a warm one.

A fresh server process has loaded nothing a reply uses: the first line said to an assistant
used to pay, before the model was even asked, for importing the model client (`openai`, about
1.5 s here), opening the long-term store (mem0 and its local vector store, about 3 s), loading
the local embedder (WordLlama) and the tokenizer's vocabulary (tiktoken), and building the
recall index over its journal and memories: 6-12 s on a loaded machine (issue 34).

`warm_up(ports)` does that work ahead, off the reactor: the process-wide models in the
computing pool (`threads.run_cpu_bound`), the turn's code and the client in the waiting pool
(`run_blocking`), and one real recall for the assistant (the prompt's own query), which opens
its store, loads its mirror and builds its index. A reply that comes before the store is open
does not wait for it (`RecallQuery.wait_for_store`): it recalls from the journal, the nodes and
the profiles. Nothing is written: the recall only reads, and its caches are the ones the next
real recall uses. A mechanical assistant (no model) makes no reply, so it warms nothing.

The process-wide part (`warm_up_process`) also does what only a first request used to: the
model client's SDK builds its chat resources and their response models at a client's first
request, so one request is rehearsed through it, answered inside the process
(`llm_rehearsal.rehearse_completion`: nothing is sent, nothing logged as a request); the modules the
shell's tick imports on first use are imported, and every tool's argument schema is checked.
The shell may start it earlier still, in a plain thread before the reactor exists
(`start_early`, from the inspector app's `ready()`): the typeclasses' call then only follows it,
and a fork of the process (twistd daemonizing the Server) waits for it to be over.

What a reply does not wait for is not let compete with what it does: the long-term store's
opening (mostly importing mem0, ~0.7 s of CPU) waits for the process-wide warm-up
(`after_process_warm_up`), and the libraries the model client peeks at are imported whole in
one thread before any other can build a client.

The shell calls it for every assistant when its script starts (`AssistantScript.at_server_start`
at every start and reload); `warm_up_in_turn` keeps at most one assistant warming at a time, so
a game of 100 assistants never queues 100 jobs ahead of a player's recall. Of the assistants
waiting together it warms at most `memory.resident_assistants`, the most recently active first
(the model's last call, a light read): only that many keep their heavy documents in memory, so
warming more would only push out the ones warmed before; the rest warm on first use. A player's
reply goes first (`plumbing.reply_priority`): while one is in flight, no assistant's warm-up
starts. The recall (opening the store - about a second of imports - and reading its memories),
which would compete with a reply for the interpreter, waits until the start has settled: no
reply and no line for `reply_priority.QUIET_SECONDS` (in a game that never falls quiet, at
most `reply_priority.MOST_WAIT_SECONDS`, then between replies). A player who talks at once
after a reload is answered before it starts (the store is not needed for that: see above).

When the start's warm-ups are over the start has settled, and what the process holds then lives
as long as it does: a game that asks for it (`threads.gc_freeze`) has those objects left out of
the garbage collector's full passes from then on (`_start_settled`).
"""

import dataclasses
import functools
import os
import sys
import threading
import time
import traceback

from twisted.internet import defer

from ai_assistant.agent.blocks.remembered import recall_query
from ai_assistant.memory.recall.pipeline import recall
from ai_assistant.plumbing import reply_priority
from ai_assistant.plumbing.openssl_setup import prepare_openssl

# What the warm-up recalls for: common words, so that the index and every tier are touched.
WARM_QUERY = "hello, how are you today?"
_queue = []  # process-wide: (ports, Deferred) of assistants waiting for their turn
_busy = []
_warmed_in_batch = []  # one mark per assistant warmed since the queue was last empty
_started = []  # the process-wide warm-up was started
_finished = []  # ... and is over
_held = []  # Deferreds of the work `after_process_warm_up` holds until then
_early = []  # the Event of the process-wide warm-up started before the reactor (`start_early`)
_past_fork = []  # the Event that lets that thread end (`_release_early_thread`)
_watched = []  # the Deferred that fires when that thread is done (`_watch_early`)
_settled = []  # the start's warm-ups were over once (`_start_settled`)


def _load_models(settings):
    """Load the process-wide models a reply uses (once per process; later calls are free)."""
    from ai_assistant.memory.search.dense import default_embed
    from ai_assistant.plumbing.tokens import count_tokens

    count_tokens(WARM_QUERY)
    embed = default_embed(settings)
    if embed is not None:
        embed([WARM_QUERY])
    return True


def _prepare_turn_code(prepare=None):
    """
    Import the turn's code and what its first tick imports (`prepare()`: the shell's own
    imports), and check every tool's argument schema once (`Tool.validator`: a first call
    of each tool would check it on the reactor).
    """
    import ai_assistant.agent.awake  # noqa: F401  (imported off the reactor, once)
    import ai_assistant.agent.react  # noqa: F401
    from ai_assistant.tools.catalogue import load_all_tools

    if prepare is not None:
        prepare()
    for tool in load_all_tools().all():
        tool.validator()


def _open_client(llm):
    """
    Build the model client (its `sdk`), where the port has one, and read its chat resources:
    the SDK imports and builds them at a client's first request (`client.chat`).
    """
    sdk = getattr(llm, "sdk", None)
    if sdk is None:
        return False
    sdk.chat.completions  # noqa: B018  (a lazy attribute: read for what it loads)
    return True


def _recall(ports):
    """One real recall, waiting for the store (a reply does not; see `RecallQuery`)."""
    situation = {"events": [{"text": WARM_QUERY}], "interlocutor": {}, "history": []}
    query = dataclasses.replace(recall_query(ports, situation), wait_for_store=True)
    return recall(ports, query).addCallback(lambda result: True)


def warm_up_process(settings, prepare=None):
    """
    Start the process-wide part of the warm-up at once (the code a turn runs, the model client's
    library and a rehearsal of its first request, the tools' schemas, the tokenizer and the
    embedder), before any assistant is loaded: the shell calls it when its typeclasses are
    imported, early in a server start. Only the first call does work; when `start_early`
    started it already, this only sizes the pools and follows that thread.

    Until it is over, `after_process_warm_up` holds back the work a reply does not need (the
    long-term store's opening), so that it does not compete with it for the interpreter.

    Args:
        settings (Settings): The game-wide settings.
        prepare (callable, optional): Imports what the shell's tick imports on first use
            (called here instead, off the reactor).

    Returns:
        Deferred or None: Fires when the models are loaded (None after the first call).
    """
    from ai_assistant.plumbing import threads

    if _early:
        threads.configure(settings)
        _release_early_thread()  # the reactor runs: twistd's fork is over
        return None if _watched else _watch_early()
    if _started:
        return None
    _started.append(True)
    threads.configure(settings)  # the pools start now: at the game's sizes
    client = threads.run_blocking(_import_client_library, prepare)
    client.addErrback(lambda failure: None)
    models = threads.run_cpu_bound(_load_models, settings).addErrback(lambda failure: None)
    return defer.gatherResults([client, models]).addCallback(_process_warmed)


def start_early(settings, prepare=None, log=None):
    """
    Start the process-wide part of the warm-up in a plain daemon thread, before the reactor
    exists: for the shell's earliest hook in the Server process (the inspector app's
    `ready()`, while Django and Evennia are still starting, seconds before the typeclasses are
    imported). The thread imports no reactor and touches no state; `warm_up_process`, called
    later, follows it instead of starting the work again.

    Args:
        settings (Settings): The game-wide settings.
        prepare (callable, optional): As for `warm_up_process`.
        log (callable, optional): `log(message)`, for a failure (the replies then do the
            work themselves) and the time it took.

    Returns:
        threading.Thread or None: The thread (None when the warm-up was started already).
    """
    if _started:
        return None
    _started.append(True)
    done, past_fork = threading.Event(), threading.Event()
    _early.append(done)
    _past_fork.append(past_fork)
    log = log or (lambda message: None)

    def work():
        started = time.monotonic()
        try:
            _import_client_library(prepare)
            _load_models(settings)
            log(f"process warm-up done in {time.monotonic() - started:.1f} s (started early)")
        except Exception as err:  # noqa: BLE001 - a warm-up failure only costs the first reply
            log(f"process warm-up failed, the first reply will load what it needs: {err!r}")
        finally:
            done.set()
        # The thread stays until the fork is over (see `_finish_before_fork`): a thread that
        # ends runs its C libraries' exit handlers after Python has let it go, and OpenSSL's
        # takes a process-wide lock there; a fork in that instant hands the child the lock
        # held for good, and the child's first new thread to use OpenSSL (the store's client)
        # waits on it for ever.
        past_fork.wait()

    # OpenSSL set up on this thread first (`openssl_setup`): the warm-up makes a model client
    # (a TLS context) while this thread goes on starting Django and Evennia, then it forks
    prepare_openssl()
    thread = threading.Thread(target=work, name="ai_assistant-warm-up", daemon=True)
    thread.start()
    os.register_at_fork(before=functools.partial(_finish_before_fork, thread, done, log))
    return thread


def _release_early_thread():
    """Let the early warm-up's thread end: the process is past twistd's fork (the reactor
    runs), so its exit handlers can no longer be caught half-way by one."""
    for past_fork in _past_fork:
        past_fork.set()


# How often a fork still waiting for the early thread says where that thread is.
FORK_REPORT_SECONDS = 30.0


def _finish_before_fork(thread, done, log):
    """
    Before this process forks, let the early warm-up (`thread`) finish its work (`done`): a
    forked child has none of the parent's threads, so work cut off mid-way would leave the
    child half an import and the locks that thread held (a module's import lock, the
    tokenizer's) held for ever. twistd forks this way when it daemonizes the Server, right
    after loading it: the child then starts with everything warmed, and the wait overlaps
    nothing but what was left of it.

    It waits for the work (`done`), not for the thread to end: the thread stays, idle, until
    the fork is over (`start_early`), since one that ends runs exit handlers that take
    process-wide locks where no join can see them.

    The wait has no bound: a child forked mid-way hangs for good at its first import of a
    module the thread was importing (the Server never comes up, and nothing says why), and
    its warm-up would never be over for what `after_process_warm_up` holds. The work is
    bounded (imports, local files, an in-process request); a machine slow enough to stretch
    it is told, every `FORK_REPORT_SECONDS`, where the thread is.
    """
    if done.is_set():
        return
    started = time.monotonic()
    while not done.wait(FORK_REPORT_SECONDS):
        log(f"the process fork has waited {time.monotonic() - started:.0f} s for the "
            f"warm-up, which is at:\n{_stack_of(thread)}")
    log(f"the process fork waited {time.monotonic() - started:.1f} s for the warm-up")


def _stack_of(thread):
    """Where `thread` is now, innermost call last (empty once it is over)."""
    frame = sys._current_frames().get(thread.ident)
    return "".join(traceback.format_stack(frame)) if frame is not None else ""


def _watch_early():
    """A Deferred that fires, on the reactor, when the early thread is done (waited for in
    the waiting pool), and then releases what `after_process_warm_up` holds."""
    from ai_assistant.plumbing import threads

    if not _watched:
        watched = threads.run_blocking(_early[0].wait).addCallback(
            lambda _: _process_warmed([None, True]))
        _watched.append(watched)
        return watched
    return None


def _import_client_library(prepare=None):
    import importlib.util

    # openai looks at `sys.modules["httpx"]` (the legacy HTTP library, when another library
    # such as mem0 imports it) when it builds a client or reads a reply: while another thread
    # is importing it, that module is half made and the request fails ("partially initialized
    # module 'httpx'"). Imported here first, it is whole before any thread can use openai.
    if importlib.util.find_spec("httpx") is not None:
        import httpx  # noqa: F401
    import openai  # noqa: F401  (what the first request imports, imported ahead)

    from ai_assistant.plumbing.llm_rehearsal import rehearse_completion
    from ai_assistant.plumbing.llm_resilience import http_logger_names
    from ai_assistant.tools.catalogue import load_all_tools

    http_logger_names()  # what the first client quiets (cached)
    _prepare_turn_code(prepare)
    # the SDK's first request, answered in this process (the request's shape: the tools too)
    rehearse_completion([tool.spec() for tool in load_all_tools().all()])


def _process_warmed(results):
    _finished.append(True)
    held, _held[:] = list(_held), []
    for waiter in held:
        waiter.callback(None)
    return results[1]


def after_process_warm_up(func, *args, **kwargs):
    """
    Run `func(*args, **kwargs)` once the process-wide warm-up is over: at once when it is
    over, was never started, or cannot finish (no reactor runs to hand its results back).

    For work a reply does not need, started right after a start (opening the long-term store,
    mostly importing mem0): run alongside, it would slow what a reply waits for.

    Returns:
        Deferred: Fires with what `func` returns (or its Deferred's result).
    """
    from twisted.internet import reactor

    over = _finished or (_early and _early[0].is_set())
    if not _started or over or not reactor.running:
        return defer.maybeDeferred(func, *args, **kwargs)
    waiter = defer.Deferred()
    _held.append(waiter)
    if _early:
        _watch_early()  # the thread started early: something must release the waiter
    return waiter.addCallback(lambda _: func(*args, **kwargs))


def warm_up(ports, *, cpu_runner=None, io_runner=None):
    """
    Make what a reply of this assistant needs ready, off the reactor.

    Args:
        ports (AssistantPorts): The assistant.
        cpu_runner (callable, optional): `runner(func, *args) -> Deferred` for the models
            (default `threads.run_cpu_bound`).
        io_runner (callable, optional): The same for the model client (default
            `threads.run_blocking`).

    Returns:
        Deferred[dict]: Fires when done with what was warmed (`{"models", "client",
        "recall"}`, each True or False); never errbacks (a failure is logged: the reply
        will do the work itself).
    """
    if ports.mechanical:
        return defer.succeed({"models": False, "client": False, "recall": False})
    started, results = time.monotonic(), {}

    def _failed(failure, name):
        ports.log(f"{ports.name}: warm-up of {name} failed: {failure.getErrorMessage()}")
        return False

    def _noted(value, name):
        results[name] = value

    from ai_assistant.plumbing import threads  # (imports the reactor: not at module level)

    # what a reply cannot do without comes first; the long-term store (a reply does not wait
    # for it) only then, so that its opening never competes with them for the interpreter
    first = [(cpu_runner or threads.run_cpu_bound)(_load_models, ports.settings),
             (io_runner or threads.run_blocking)(_open_client, ports.llm)]
    for name, deferred in zip(("models", "client"), first, strict=True):
        deferred.addErrback(_failed, name).addCallback(_noted, name)
    done = defer.gatherResults(first, consumeErrors=True)
    # the recall opens the store and reads its memories: long background work, started once
    # the start has settled, so that it does not run beside a player's first lines
    done.addCallback(lambda _: reply_priority.when_settled(_recall, ports))
    done.addErrback(_failed, "recall").addCallback(_noted, "recall")

    def _warmed(_):
        ports.log(f"{ports.name}: ready to reply (warmed up in "
                  f"{time.monotonic() - started:.1f} s)")
        return {name: results.get(name, False) for name in ("models", "client", "recall")}

    return done.addCallback(_warmed)


def warm_up_in_turn(ports):
    """
    `warm_up`, one assistant at a time across the process (see the module doc).

    Returns:
        Deferred[dict]: Fires with `warm_up`'s result once this assistant's turn is done.
    """
    waiter = defer.Deferred()
    _queue.append((ports, waiter))
    if not _busy:
        _next()
    return waiter


def _last_active(ports):
    """When the assistant last asked its model (epoch seconds; 0 if never): a light read."""
    from ai_assistant.plumbing.llm import LLMStats

    return LLMStats(ports.state).read().get("last_call_at") or 0


def _start_settled(ports):
    """
    What waits for a start to settle, once per process: the objects held then live as long as
    the process, so the collector's full passes may skip them (`threads.freeze_held_objects`,
    when the game asks for it with `threads.gc_freeze`).
    """
    from ai_assistant.plumbing import threads

    frozen = threads.freeze_held_objects(ports.settings)
    if frozen:
        ports.log(f"the start has settled: {frozen} objects left out of the garbage "
                  "collector's full passes (threads.gc_freeze)")


def _take_most_recently_active():
    """
    The waiting assistant to warm next: the most recently active one, while fewer than
    `memory.resident_assistants` have warmed since the queue was last empty (a start's
    assistants all wait at once). Beyond the bound, a warm-up would only push the ones warmed
    before it out of residency (`plumbing/residency.py`): the rest are answered at once, and
    warm on first use.

    Returns:
        tuple or None: `(ports, waiter)`, or None when none is left to warm.
    """
    if not _queue:
        _warmed_in_batch.clear()
        return None
    bound = int(_queue[0][0].settings.get("memory.resident_assistants"))
    if len(_warmed_in_batch) >= bound:
        skipped = list(_queue)
        _queue.clear()
        _warmed_in_batch.clear()
        skipped[0][0].log(f"{len(skipped)} assistants warm on first use: the "
                          f"{bound} most recently active are warmed (memory.resident_assistants)")
        for _, waiter in skipped:
            waiter.callback({"models": False, "client": False, "recall": False})
        return None
    chosen = _queue.pop(max(range(len(_queue)), key=lambda index: _last_active(_queue[index][0])))
    if not chosen[0].mechanical:  # a mechanical assistant warms nothing (`warm_up`)
        _warmed_in_batch.append(True)
    return chosen


def _next(last=None):
    taken = _take_most_recently_active()
    if taken is None:
        if last is not None and not _settled:  # the start's warm-ups are over
            _settled.append(True)
            _start_settled(last)
        return
    ports, waiter = taken
    _busy.append(ports)

    def _done(result):
        _busy.remove(ports)
        waiter.callback(result)
        _next(ports)

    # the next assistant's warm-up starts only while no player's reply is in flight
    reply_priority.when_no_reply(warm_up, ports).addCallback(_done)
