"""
Recall's long-term candidates when the store finds them itself (the postgres store).

The embedded store's memories reach recall through the mirror (`longterm.mirror`): every
memory, held in the game process. A store that ranks in its database
(`Memories.ranks_in_database`) answers each query with its few hundred best candidates instead
(`longterm.pgvector_recall`); `CandidateSet` gives the pipeline those candidates with the same
reading interface as the mirror (`entries`, `source_entries`, `private_count`). From there
both stores share the ranking (the candidates' vectors are the assistant's `matrices`, rows
reused by text between queries, which the second stage's diversity needs too), the filters
and the budget.

`fetch_candidates` runs on the reactor and never fails: while the database is unreachable
recall answers from what is in hand (the journal, nodes and profiles); the store's breaker
logs the outage once (`longterm.store_breaker`), so a tick that recalls logs nothing more.
"""

import threading

from twisted.internet import defer

from ai_assistant.memory.audience import PUBLIC, audience_of
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.mirror import item_epoch
from ai_assistant.memory.longterm.store_breaker import MemoryStoreUnavailable
from ai_assistant.memory.recall.lines import memory_item
from ai_assistant.memory.search.dense import EmbeddingMatrices

# The vectors of the items last ranked (candidates, journal entries, nodes, profiles), kept
# per assistant so a row is embedded again only for a text the last query did not rank.
TAIL_MATRICES = "recall_tail_matrices"


class CandidateSet:
    """
    One query's candidates from the store, read like the mirror by the pipeline: in time
    order, as the mirror holds its memories.

    Args:
        memories (list[dict]): As the store lists them, each with its `cosine` to the query.
        sources (set): Journal entry ids (as text) that have memories made from them.
        matrices (EmbeddingMatrices): The assistant's vectors of the ranked items.

    Attributes:
        loaded (bool): Always True (the store answered).
        matrices (EmbeddingMatrices): The vectors of what was ranked last (kept by text).
        index_cache: None (a candidate set is searched once).
    """

    loaded = True
    index_cache = None

    def __init__(self, memories, sources, matrices):
        self._memories = memories
        self._sources = frozenset(sources)
        self.matrices = matrices
        self._lock = threading.Lock()
        self._items = None

    def entries(self):
        """The candidates as recall items (converted once, in the worker that ranks them)."""
        with self._lock:
            if self._items is None:
                # in time order, as the mirror holds them, never in the database's order: the
                # ranking lets an item share its neighbours' relevance (`search.scoring`), so
                # candidates in score order would lift each other where the mirror's do not;
                # memories of one moment keep the order they were made in, as in the mirror
                made = sorted(self._memories, key=lambda memory: str(memory.get("created_at")
                                                                     or ""))
                self._items = tuple(sorted((memory_item(memory) for memory in made),
                                           key=item_epoch))
            return self._items

    def source_entries(self):
        """The journal entry ids (as text) whose memories are in the store."""
        return self._sources

    def private_count(self):
        """How many candidates are private to someone."""
        return sum(1 for item in self.entries() if audience_of(item) is not PUBLIC)


@defer.inlineCallbacks
def fetch_candidates(ports, text, journal_entries):
    """
    The store's candidates for a query (the database runs the search, off the reactor).

    Args:
        ports (AssistantPorts): The assistant (its store ranks in its database).
        text (str): The query.
        journal_entries (iterable): The journal entries recall holds (checked for memories
            made from them).

    Returns:
        Deferred[CandidateSet | None]: None when the store could not answer (recall goes on
        with the other tiers).
    """
    entry_ids = [str(entry.get("id")) for entry in journal_entries if entry.get("id")]
    try:
        memories, sources = yield Memories(ports).recall_candidates(text, entry_ids)
    except MemoryStoreUnavailable:
        return None  # the breaker has said so once; every recall meanwhile stays quiet
    except Exception as err:  # noqa: BLE001 - recall answers from the other tiers
        ports.log(f"{ports.name}: the memory store's recall search failed: {err}")
        return None
    return CandidateSet(memories, sources, ports.runtime.derived_cache(TAIL_MATRICES,
                                                                     EmbeddingMatrices))
