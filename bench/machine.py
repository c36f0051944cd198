"""
The machine a timing benchmark ran on, written beside its figures.

Timings are only comparable between runs on machines of the same speed, and this project's
benchmarks run on whatever machine a session is given: a figure 3x slower may be a slower
machine, not a slower tree. `describe` names the processor, its cores and the load, and times
a fixed piece of pure Python (`python_loop_us`, the best of several tries, so a busy moment
does not count) that scales as the interpreter's own work does on that machine. Compare a
result's timings with another's only when their `python_loop_us` agree, or scale them by it.
"""

import os
import platform
import timeit

# The fixed piece of work timed: summing 10,000 integers in the interpreter.
_LOOP = "sum(range(10_000))"
_TRIES = 7
_PER_TRY = 50


def processor():
    """The processor's model name (Linux's `/proc/cpuinfo`), else what `platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def python_loop_us(tries=_TRIES, per_try=_PER_TRY):
    """Microseconds the fixed piece of pure Python takes on this machine (the best try)."""
    best = min(timeit.repeat(_LOOP, number=per_try, repeat=tries))
    return round(best / per_try * 1e6, 1)


def describe():
    """
    Returns:
        dict: `processor`, `cores`, `load_average` (1, 5 and 15 minutes) and `python_loop_us`.
    """
    return {"processor": processor(), "cores": os.cpu_count(),
            "load_average": [round(value, 2) for value in os.getloadavg()],
            "python_loop_us": python_loop_us()}
