"""
Recall's long-term candidates when the store finds them itself (the postgres store).

The embedded store's memories reach recall through the mirror (`longterm.mirror`): every
memory, held in the game process. A store that ranks in its database
(`Memories.ranks_in_database`) answers each query with its few hundred best candidates instead
(`longterm.pgvector_recall`); `CandidateSet` gives the pipeline those candidates with the same
reading interface as the mirror (`entries`, `source_entries`, `private_count`), and what makes
the ranking over them the ranking over every memory (`whole_corpus`): BM25 weighs a word by
how many of all the memories hold it, not how many candidates do, and an item shares
relevance with its neighbours in time, not with the next candidate. From there both stores
share the ranking, the filters and the budget; the candidates' cosines to the query are the
database's (`cosines`, from the stored vectors), so the process embeds a candidate only when
the second stage's diversity wants its vector.

`fetch_candidates` runs on the reactor and never fails: while the database is unreachable
recall answers from what is in hand (the journal, nodes and profiles); the store's breaker
logs the outage once (`longterm.store_breaker`), so a tick that recalls logs nothing more.
"""

import threading

from twisted.internet import defer

from ai_assistant.memory.audience import PUBLIC, audience_of
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.store_breaker import MemoryStoreUnavailable
from ai_assistant.memory.recall.lines import memory_item
from ai_assistant.memory.search.dense import EmbeddingMatrices
from ai_assistant.memory.search.index import WholeCorpus, content_terms

# The vectors of the items last ranked after the candidates (journal entries, nodes, profiles),
# kept per assistant so a row is embedded again only for a text the last query did not rank.
TAIL_MATRICES = "recall_tail_matrices"


class CandidateSet:
    """
    One query's candidates from the store, read like the mirror by the pipeline: in the
    scope's time order, as the mirror holds its memories, with what the ranking needs to rank
    them as it ranks every memory (`whole_corpus`).

    Args:
        memories (list[dict]): As the store lists them, each with its `cosine` to the query
            and its `place` in the scope's time order.
        sources (set): Journal entry ids (as text) that have memories made from them.
        matrices (EmbeddingMatrices): The assistant's vectors of the items ranked after them.
        scope_words (dict, optional): The scope's word statistics (`{"documents", "length",
            "private", "outside_frequencies"}`, `pgvector_recall.recall_candidates`: the last
            counts the memories that are not among `memories`); None: the candidates are
            taken as the whole scope.

    Attributes:
        loaded (bool): Always True (the store answered).
        matrices (EmbeddingMatrices): The vectors of the journal's, nodes' and profiles' items.
        index_cache: None (a candidate set is searched once).
    """

    loaded = True
    index_cache = None

    def __init__(self, memories, sources, matrices, scope_words=None):
        self._memories = memories
        self._sources = frozenset(sources)
        self._scope_words = scope_words
        self.matrices = matrices
        self._lock = threading.Lock()
        self._items = None
        self._places = None
        self._cosines = None
        self._context_only = ()

    def entries(self):
        """The candidates as recall items (converted once, in the worker that ranks them)."""
        with self._lock:
            if self._items is None:
                # in time order, as the mirror holds them, never in the database's order: the
                # ranking lets an item share its neighbours' relevance (`search.scoring`), so
                # candidates in score order would lift each other where the mirror's do not
                made = sorted(self._memories, key=_place)
                self._items = tuple(memory_item(memory) for memory in made)
                self._places = tuple(_place(memory) for memory in made)
                self._cosines = tuple(float(memory.get("cosine") or 0.0) for memory in made)
                self._context_only = tuple(position for position, memory in enumerate(made)
                                           if memory.get("context_only"))
            return self._items

    def cosines(self):
        """The query's cosine to each candidate, in `entries` order, as the database computed
        it from the stored vectors (the ranking embeds no candidate to score it)."""
        self.entries()
        return self._cosines

    def source_entries(self):
        """The journal entry ids (as text) whose memories are in the store."""
        return self._sources

    def private_count(self):
        """How many memories of the scope are private to someone (as the mirror counts)."""
        if self._scope_words is not None:
            return self._scope_words["private"]
        return sum(1 for item in self.entries() if audience_of(item) is not PUBLIC)

    def whole_corpus(self, tail):
        """
        What the candidates are part of: every memory of the scope, then `tail` (the journal's
        entries and the other tiers' items, after the memories as in the mirror's corpus).

        Args:
            tail (tuple): The items ranked after the candidates.

        Returns:
            WholeCorpus | None: The scope's word statistics less the candidates', and every
            item's place; None without the scope's statistics.
        """
        items = self.entries()
        if self._scope_words is None:
            return None
        length = sum(content_terms(item.get("content", ""))[1] for item in items)
        last = self._scope_words["documents"]
        return WholeCorpus(
            outside_documents=max(0, last - len(items)),
            outside_length=max(0.0, float(self._scope_words["length"] - length)),
            outside_frequencies=self._scope_words["outside_frequencies"],
            places=self._places + tuple(range(last + 1, last + 1 + len(tail))),
            context_only=self._context_only)


def _place(memory):
    return memory.get("place") or 0


@defer.inlineCallbacks
def fetch_candidates(ports, text, journal_entries):
    """
    The store's candidates for a query (the database runs the search, off the reactor).

    Args:
        ports (AssistantPorts): The assistant (its store ranks in its database).
        text (str): The query.
        journal_entries (iterable): The journal entries recall holds (checked for memories
            made from them; ranked beside the candidates).

    Returns:
        Deferred[CandidateSet | None]: None when the store could not answer (recall goes on
        with the other tiers).
    """
    journal_entries = tuple(journal_entries)
    entry_ids = [str(entry.get("id")) for entry in journal_entries if entry.get("id")]
    try:
        memories, sources, scope_words = yield Memories(ports).recall_candidates(
            text, entry_ids, journal_entries=journal_entries, now=ports.clock.now())
    except MemoryStoreUnavailable:
        return None  # the breaker has said so once; every recall meanwhile stays quiet
    except Exception as err:  # noqa: BLE001 - recall answers from the other tiers
        ports.log(f"{ports.name}: the memory store's recall search failed: {err}")
        return None
    return CandidateSet(memories, sources, ports.runtime.derived_cache(TAIL_MATRICES,
                                                                     EmbeddingMatrices),
                        scope_words)
