"""
Where the reactor thread spends its CPU under load: `bench.reactor --spy PATH`.

`py-spy` (a sampling profiler that reads the Server's memory from another process) records
the Server's threads while the looks under load are timed, without pausing it
(`--nonblocking`), and only a thread that holds the interpreter lock (`--gil`): the Python
work that keeps the reactor from its next event. Neither the interpreter's own profilers nor an
in-process sampler can do this: Python 3.12's `cProfile` counts every thread together, and a
sampler inside the process has to win the interpreter lock to look, so it mostly sees the
reactor where it lets the lock go (a file write, a database call).

Without `--gil`, py-spy also counts a thread the kernel has runnable: on a busy machine, one
that gave up its core in a system call and waits for it back. Those waits then weigh on the
line of the call (a write-ahead log's `os.write`: 10.5% of the samples without `--gil`, 2.3%
with it, while taking the write away changed the reactor's CPU not at all; bench/README,
reactor round 11). With `--gil` the kernel's own time in a call is left out too.

`summarise(path)` keeps the reactor's thread (the Server's main thread) and drops the samples
where it sits in its poll waiting for work. What is left is what the reactor did: each
function's share of those samples, counted once per sample it was on the stack of
(inclusive), and the share whose innermost frame is in each package (self).
"""

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

RATE = 100  # samples a second: py-spy's own CPU stays small beside the game's on two cores
REACTOR_THREAD = "MainThread"
IDLE = "doPoll"  # the reactor's wait in epoll for its next event (`EPollReactor.doPoll`)
# where an innermost frame's file lies, by the first matching prefix (py-spy shortens the
# paths of installed packages to their package folder)
OWNERS = (("ai_assistant/", "ai_assistant"), ("evennia/", "evennia"), ("django/", "django"),
          ("twisted/", "twisted"))
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^():]*)(?::\d+)?\)$")


def py_spy():
    """The `py-spy` executable beside this interpreter (the project's venv), or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Recording:
    """
    One `py-spy record` of a process, from `start` until `stop`.

    Args:
        pid (int): The process (the Server's).
        path (str): The raw file py-spy writes (a stack and its count per line).
        rate (int): Samples a second.
    """

    def __init__(self, pid, path, rate=RATE):
        self.pid, self.path, self.rate = pid, str(path), rate
        self.process = None
        self.error = None
        self.stopped = False

    def start(self):
        """Start recording; `error` says why not (no py-spy, or it could not attach)."""
        executable = py_spy()
        if executable is None:
            self.error = "py-spy is not installed (make venv installs it)"
            return self
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        Path(self.path).unlink(missing_ok=True)  # an earlier run's file is not this one's
        self.process = subprocess.Popen(  # noqa: S603 - a fixed command line
            [executable, "record", "--pid", str(self.pid), "--threads", "--nonblocking",
             "--gil", "--rate", str(self.rate), "--format", "raw", "--output", self.path],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return self

    def stop(self, timeout=30):
        """
        Stop recording (py-spy writes its file when interrupted); again, says the same.

        Returns:
            str or None: Why nothing was recorded, or None when the file was written.
        """
        if self.process is None or self.stopped:
            return self.error
        self.stopped = True
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            output, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            output, _ = self.process.communicate()
        if not os.path.exists(self.path) or not os.path.getsize(self.path):
            said = (output or "").strip().splitlines()
            self.error = said[-1] if said else "py-spy wrote nothing"
        return self.error


def _frame(text):
    """`(function, file)` of one py-spy frame, `function (file:line)`."""
    found = _FRAME.match(text)
    return (found["function"], found["file"]) if found else (text, "")


def owner(file):
    """The package a frame's file belongs to (`OWNERS`), else "other"."""
    return next((name for prefix, name in OWNERS if file.startswith(prefix)), "other")


def summarise(path, thread=REACTOR_THREAD, top=25):
    """
    What the reactor thread did, from a py-spy raw file (see the module doc).

    Args:
        path (str): The raw file (`Recording`).
        thread (str): The thread's name.
        top (int): How many functions to list.

    Returns:
        dict: `samples` (the thread's, idle ones included), `busy_samples`, `self_by_owner`
        (each package's share of the busy samples, by innermost frame), `under_ai_assistant`
        (the share with a frame of this contrib anywhere on the stack), `ai_assistant_inclusive`
        (the `top` functions of this contrib by inclusive share), `evennia_inclusive` (the same
        for Evennia's, the game's own work: commands, locks, messages) and `self_top` (the
        `top` innermost frames).
    """
    samples = busy = under_contrib = 0
    innermost, owners = collections.Counter(), collections.Counter()
    # the functions listed by inclusive share, by the package they belong to
    inclusive = {"ai_assistant": collections.Counter(), "evennia": collections.Counter()}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if not count.isdigit() or not frames or not frames[0].endswith(f": {thread}"):
                continue
            count = int(count)
            samples += count
            frames = frames[1:]
            parsed = [_frame(frame) for frame in frames]
            if not parsed or parsed[-1][0].rpartition(".")[2] == IDLE:
                continue
            busy += count
            function, file = parsed[-1]
            innermost[f"{function} ({file})"] += count
            owners[owner(file)] += count
            on_stack = {(f"{function} ({file})", owner(file)) for function, file in parsed}
            under_contrib += count if any(o == "ai_assistant" for _, o in on_stack) else 0
            for key, package in on_stack:  # once per sample, however deep it recursed
                if package in inclusive:
                    inclusive[package][key] += count

    def shares(counter, limit=None):
        return {key: round(value / busy, 4) for key, value in counter.most_common(limit)}

    return {"samples": samples, "busy_samples": busy,
            "self_by_owner": shares(owners) if busy else {},
            "under_ai_assistant": round(under_contrib / busy, 4) if busy else 0.0,
            "ai_assistant_inclusive": shares(inclusive["ai_assistant"], top) if busy else {},
            "evennia_inclusive": shares(inclusive["evennia"], top) if busy else {},
            "self_top": shares(innermost, top) if busy else {}}
