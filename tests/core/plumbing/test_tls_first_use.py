"""
OpenSSL's first-use set-up happens on one thread (`openssl_setup.prepare_openssl`), before the
worker pools start and before the early warm-up's thread does: threads racing into it have hung
a Server for good.
"""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# A fresh interpreter: no pool and no TLS context exist yet, as at a Server's start.
PROBE = textwrap.dedent("""
    import ssl
    import threading

    made = []
    original = ssl.create_default_context

    def recorded(*args, **kwargs):
        made.append((threading.current_thread().name,
                     sorted(thread.name for thread in threading.enumerate())))
        return original(*args, **kwargs)

    ssl.create_default_context = recorded
    from ai_assistant.plumbing import threads

    threads.get_pool("io")
    threads.get_pool("cpu")
    threads.run_blocking(ssl.create_default_context)  # a worker's own, as a model client's
    threads.get_pool("io").stop()
    threads.get_pool("cpu").stop()
    print(repr(made))
""")


def probed(source):
    """What a probe printed last (a Python literal), run in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", source], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True, timeout=120)
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def test_one_tls_context_is_made_on_the_calling_thread_before_any_worker_exists():
    made = probed(PROBE)
    first_thread, threads_then = made[0]
    assert first_thread == "MainThread"
    assert not [name for name in threads_then if "ai_assistant-" in name]
    # the second pool made none of its own; the worker's came after, on a pool thread
    assert len(made) == 2 and "ai_assistant-io" in made[1][0]


# A fresh interpreter, as a Server's main thread before twistd forks it: the early warm-up.
EARLY = textwrap.dedent("""
    import hashlib
    import ssl
    import threading

    made = []

    def recorder(module, name):
        original = getattr(module, name)

        def recorded(*args, **kwargs):
            made.append((name, threading.current_thread().name,
                         sorted(thread.name for thread in threading.enumerate())))
            return original(*args, **kwargs)

        setattr(module, name, recorded)

    recorder(ssl, "create_default_context")
    recorder(hashlib, "pbkdf2_hmac")
    from ai_assistant.agent import warmup
    from ai_assistant.plumbing.settings import Settings

    # the warm-up's own work, a model client's context, on its thread
    warmup._import_client_library = lambda prepare=None: ssl.create_default_context()
    warmup._load_models = lambda settings: None
    warmup.start_early(Settings())
    warmup._early[0].wait(60)
    print(repr(made))
""")


def test_the_early_warm_up_sets_openssl_up_on_the_main_thread_before_its_thread_starts():
    made = probed(EARLY)
    on_main = [(name, threads) for name, thread, threads in made if thread == "MainThread"]
    assert {name for name, _ in on_main} == {"create_default_context", "pbkdf2_hmac"}
    assert all("ai_assistant-warm-up" not in threads for _, threads in on_main)
    # the warm-up's own context came after, on its thread
    assert made[-1][:2] == ("create_default_context", "ai_assistant-warm-up")
