"""
OpenSSL set up once, on one thread, before other threads use it.

OpenSSL 3 (3.0 here) sets each part of itself up (its configuration, the algorithms a TLS
context or a digest fetches, the certificate store) the first time a process uses it, and
threads that race into a first time have hung a Server for good:

- at a start, one worker opened the model client while another opened the memory store
  (whose mem0 makes OpenAI clients of its own): both stayed in `ssl.SSLContext.__new__`, and
  every other thread waited on them;
- after a start whose process forked (twistd daemonizing the Server), a worker alone stayed
  there opening the memory store. Before the fork, the early warm-up's thread had made the
  process's first TLS context while the main thread went on starting Django and Evennia
  (whose password hasher, PBKDF2, `hashlib` takes from OpenSSL).

So the Server sets OpenSSL up on its main thread before any thread of ours exists: before the
early warm-up's thread starts (`agent.warmup.start_early`, ahead of twistd's fork) and before
the first worker pool starts (`threads.get_pool`). The set-up is then over, and later
contexts and digests, in any thread and in the forked process, only use it.

The second hang also has a cause that no set-up ahead prevents: a thread that used OpenSSL
runs its thread-exit handler after Python has let it go (a join has returned), and that
handler takes OpenSSL's process-wide lock of thread handlers (`crypto/initthread.c`,
`init_thread_stop`), the lock a new thread's first use of OpenSSL takes too. A fork in that
instant hands the child the lock held for good, so the early warm-up's thread does not end
before the fork (`agent.warmup.start_early`).

Imports nothing but the standard library: it runs before the reactor exists.
"""

import hashlib
import hmac
import ssl


def prepare_openssl():
    """
    Set OpenSSL up on the calling thread: one TLS context, as the model clients make theirs,
    and a digest, an HMAC and a PBKDF2 key, as `hashlib`, `hmac` and Django's password hasher
    use them (~25 ms).
    """
    ssl.create_default_context()
    hashlib.sha256(b"ai_assistant").digest()
    hashlib.md5(b"ai_assistant", usedforsecurity=False).digest()
    hmac.new(b"ai_assistant", b"set up", "sha256").digest()
    hashlib.pbkdf2_hmac("sha256", b"ai_assistant", b"set up", 1)
