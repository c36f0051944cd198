"""
Which assistants keep their heavy data in memory: a bounded, process-wide LRU over assistants.

An assistant at work holds more than it stores: its documents that grow with its history (the
journal, the people it met, its memory links and nodes, as plain data) and what is derived
from them to search them quickly (the journal's BM25 index, the vectors of what recall ranks,
the nodes' matrix). A game loads every assistant at a start (its ticks read its state) and
most of them then only tick, idle; holding all that for each of them made the game process
grow by megabytes per assistant.

So only the `memory.resident_assistants` assistants whose memory was used last keep it. Using
it (a heavy document read or written, a derived cache asked for) makes an assistant the most
recently used; when one more than the bound is resident, the least recently used one is
released: its derived caches are dropped and its clean heavy documents too (the shell drops
those, through the hook it gives `AssistantRuntime.on_release`). The next use rebuilds what it
needs: a document is read again from the database, an index or a matrix is built again, with
the same results (each is a pure function of the documents).

Nothing unsaved is ever dropped: a document changed since the last flush stays until it is
written. Releasing happens on the reactor thread, between two uses of other assistants, where
no reader holds a document to write it back (the ports' rule: read, change and `set` with no
yield in between); a worker that still holds a dropped index or matrix keeps it until it is done.
"""

import threading
from collections import OrderedDict

DEFAULT_CAPACITY = 32


class Residency:
    """
    The resident assistants, least recently used first.

    Args:
        capacity (int): How many may be resident at once (at least 1).
    """

    def __init__(self, capacity=DEFAULT_CAPACITY):
        self.capacity = max(1, int(capacity))
        self._resident = OrderedDict()  # id(holder) -> holder
        self._lock = threading.Lock()
        self.released = 0  # how many releases so far (for benches and tests)

    def __len__(self):
        return len(self._resident)

    def __contains__(self, holder):
        return id(holder) in self._resident

    def touch(self, holder):
        """
        Make `holder` (an `AssistantRuntime`) the most recently used, releasing the least
        recently used beyond the capacity.
        """
        key = id(holder)
        with self._lock:
            if key in self._resident:
                self._resident.move_to_end(key)
                return
            self._resident[key] = holder
            evicted = self._over_capacity()
        self._release(evicted)

    def forget(self, holder):
        """Stop tracking `holder` (an assistant deleted or retired), releasing nothing."""
        with self._lock:
            self._resident.pop(id(holder), None)

    def resize(self, capacity):
        """Change the capacity; the least recently used beyond it are released now."""
        with self._lock:
            self.capacity = max(1, int(capacity))
            evicted = self._over_capacity()
        self._release(evicted)

    def release_all(self):
        """Release every resident assistant (tests and benches measure a cold start with it)."""
        with self._lock:
            evicted = list(self._resident.values())
            self._resident.clear()
        self._release(evicted)

    def _over_capacity(self):
        evicted = []
        while len(self._resident) > self.capacity:
            evicted.append(self._resident.popitem(last=False)[1])
        return evicted

    def _release(self, evicted):
        for holder in evicted:
            self.released += 1
            holder.release()


# process-wide: the bound is on the whole process's memory, whatever assistant asks
RESIDENCY = Residency()


def configure(settings):
    """
    Size the process's residency from the game's settings (`memory.resident_assistants`).

    Args:
        settings (Settings): The game-wide settings.
    """
    capacity = int(settings.get("memory.resident_assistants"))
    if capacity != RESIDENCY.capacity:
        RESIDENCY.resize(capacity)
