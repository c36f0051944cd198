"""
The recall pipeline: what the assistant remembers that bears on a query, from every tier.

One ranking serves the prompt ("What you remember") and the lookup tools:

1. **Corpus.** Every consolidated memory (the long-term store's recall mirror,
   `longterm.mirror`, kept by its owner `longterm.memories.Memories`; on a store that ranks
   in its database, the candidates it finds for the query, `store_candidates`), the journal
   entries not consolidated yet (the current stretch of conversation), the living memory
   nodes and what the entity profiles learnt about people (`tiers`). A journal entry whose
   memories are mirrored is left out: an entry and the memories made from it are one item.
2. **Ranking.** The journal's search (`memory.search.search_entries`) over that corpus: BM25
   over lemmas with pseudo-relevance feedback, the speaker and time boosts, context from
   neighbouring lines, fused with the local embedder's cosine (`recall.embedding_weight`),
   relevance first (`recall.alpha_recency`, `recall.alpha_importance`). The query is widened
   with the corpus's words nearest in meaning to its own (`search.expansion`,
   `recall.expansion_weight`): "what hobbies does she have?" also matches "pottery" and
   "kiln" where a line says them, which neither BM25 nor a whole line's vector sees.
3. **Filters.** Only items visible to the viewer (`memory.audience.visible_to`); never the
   entries being answered (`exclude`); one item per source entry (the best-ranked text).
4. **Information.** The score is scaled by how much a line says (`information`), so small talk
   neither outranks facts nor takes room; lines below `recall.min_information` are dropped.
5. **Second stage.** The best hits are re-read against each other (`diversity`): a line that
   repeats one above it moves down, so a question about several things gets lines about each
   (`recall.diversity`).
6. **Budget.** Best first, whole lines are taken while they fit `recall.budget_tokens`, then
   shown oldest first, each with its date (`lines.recall_line`), the block grouped by day and
   speaker, each year and "said to me" said once (`grouping`: the budget counts what a line
   adds to that layout). A line is never
   cut: the budget is kept by choosing fewer lines. One longer than `recall.max_line_tokens`
   (a pasted page) is left out of the prompt (`too_long`): it would crowd out a dozen facts in
   every prompt one of its words matches, and cut to fit, half of it would read as the whole.
   It stays findable by the lookup tools, which show it whole.

Everything but reading the journal and the mirror's snapshot runs in the worker pool
(`rank_items` and `select_lines` are blocking; `recall` hands them to `run_cpu_bound`).
"""

import dataclasses
from dataclasses import dataclass

import numpy
from twisted.internet import defer

from ai_assistant.memory.audience import PUBLIC, audience_of, visible_to
from ai_assistant.memory.entities import get_profiles
from ai_assistant.memory.journal import get_journal
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.sources import is_outranked
from ai_assistant.memory.longterm.supersede import is_superseded
from ai_assistant.memory.nodes import load_nodes
from ai_assistant.memory.recall.diversity import DIVERSITY_POOL, diversify
from ai_assistant.memory.recall.fitting import MemoCount, RankedLine, choose
from ai_assistant.memory.recall.information import information
from ai_assistant.memory.recall.lines import MEMORY_TIER, recall_line, source_key
from ai_assistant.memory.recall.store_candidates import fetch_candidates
from ai_assistant.memory.recall.tiers import tier_items
from ai_assistant.memory.search.dense import EmbeddingMatrices, default_embed, embeddings, unit_rows
from ai_assistant.memory.search.expansion import expansion_terms
from ai_assistant.memory.search.filters import SearchFilters
from ai_assistant.memory.search.journal_search import journal_vocabulary, search_entries
from ai_assistant.memory.search.params import SearchParams
from ai_assistant.memory.search.terms import words
from ai_assistant.plumbing.reply_priority import replying, when_settled
from ai_assistant.plumbing.tokens import count_tokens

# Candidates ranked per item wanted, before the filters and the budget thin them.
OVERFETCH = 3
# Share of an item's score that does not depend on how much it says.
INFORMATION_FLOOR = 0.35
# Share of its score a superseded memory keeps (`longterm.supersede`): shown after the current.
SUPERSEDED_SHARE = 0.5

@dataclass(frozen=True)
class RecallQuery:
    """
    What to recall, and for whom.

    Attributes:
        text (str): The query (what was said, or what a tool asks).
        viewer (str | None): Stable id of the person the result is for (None: public only).
        exclude (frozenset): Journal entry ids (as text) never to recall (the events answered,
            the lines the conversation history shows).
        limit (int): At most this many items.
        budget (int): Token budget of the lines (0: no budget, `limit` alone).
        filters (SearchFilters, optional): What may be recalled at all (tags, age, trust).
        journal (bool): Include the journal's unconsolidated entries, the memory nodes and the
            entity profiles (False: the long-term store only).
        wait_for_store (bool): Wait for the long-term store's first read (False: while it is
            still being opened, just after a start, recall from the other tiers instead of
            keeping a speaker waiting; the read goes on, and the next recall has it).
    """

    text: str
    viewer: str | None = None
    exclude: frozenset = frozenset()
    limit: int = 10
    budget: int = 0
    filters: SearchFilters | None = None
    journal: bool = True
    wait_for_store: bool = True


@dataclass(frozen=True)
class Recalled:
    """One recalled item: its final score and the journal-shaped item."""

    score: float
    item: dict


def recall_params(settings):
    """
    The search knobs of recall: the journal's, with recall's own weights and fusion. Recall's
    corpus puts memories before the journal, so an item's neighbours there are not its turn's
    context: each item is read alone (`context_terms` 0), as before the journal search read
    entries with their neighbours' words.
    """
    return dataclasses.replace(
        SearchParams.from_settings(settings),
        alpha_recency=settings.get("recall.alpha_recency"),
        alpha_importance=settings.get("recall.alpha_importance"),
        embedding_weight=settings.get("recall.embedding_weight"),
        expansion_weight=settings.get("recall.expansion_weight"),
        context_terms=0.0,
    )


def build_corpus(journal_entries, mirror, others=()):
    """
    The items to rank: the mirrored memories, the journal entries none was made from, then the
    other tiers' items (memory nodes, entity profiles: `tiers.tier_items`).

    Returns:
        tuple: Journal-shaped items, the mirror's in time order, the journal's, the others.
    """
    memories = mirror.entries() if mirror is not None else ()
    sources = mirror.source_entries() if mirror is not None else frozenset()
    journal = tuple(e for e in journal_entries if str(e.get("id")) not in sources)
    return memories + journal + tuple(others)


def _excluded(item, exclude):
    if str(item.get("id")) in exclude:
        return True
    return item.get("tier") == MEMORY_TIER and str(item.get("entry_id")) in exclude


def _dense(corpus, text, embed, matrices, known=None):
    """
    `(cosines, rows)`: the cosine of the query to every item, in the corpus's order (None
    when the query has no vector), and `rows(positions)`, those items' unit vectors (blocking).

    `known` holds the cosines of the corpus's first items when a store computed them (its
    candidates, `store_candidates.CandidateSet.cosines`): only the items after them go through
    the assistant's `matrices`, and a candidate is embedded only when the second stage wants
    its vector.
    """
    texts = tuple(str(item.get("content") or "") for item in corpus)
    vector = numpy.asarray(embed([text])[0], dtype=numpy.float32)
    norm = numpy.linalg.norm(vector)
    head = 0 if known is None else len(known)
    matrix = matrices.matrix(embed, texts[head:]) if len(texts) > head else None
    cosines = None
    if norm:
        tail = matrix @ (vector / norm) if matrix is not None else numpy.zeros(0)
        cosines = tail if not head else numpy.concatenate([numpy.asarray(known, float), tail])

    def rows(positions):
        candidates = [position for position in positions if position < head]
        embedded = {}
        if candidates:  # the store kept their vectors: embedded here, for these few only
            vectors = unit_rows(embeddings(embed, [texts[p] for p in candidates]))
            embedded = dict(zip(candidates, vectors, strict=True))
        return numpy.asarray([embedded[p] if p < head else matrix[p - head] for p in positions])

    return cosines, rows


def _second_stage(corpus, recalled, rows, weight):
    """The hits reordered so that each next one adds the most (`diversity.diversify`)."""
    head = recalled[:DIVERSITY_POOL]
    position = {id(item): number for number, item in enumerate(corpus)}
    return diversify(recalled, rows([position[id(found.item)] for found in head]), weight)


def _hidden(corpus):
    """How many items are private to someone (an upper bound of what a viewer cannot see)."""
    return sum(1 for item in corpus if audience_of(item) is not PUBLIC)


def _expansion(corpus, text, embed, params, vocabulary):
    """The corpus's words nearest in meaning to the query's (`search.expansion`), or None."""
    if embed is None or not params.expansion_weight:
        return None
    texts = (str(item.get("content") or "") for item in corpus)
    return expansion_terms(embed, text, texts, vocabulary)


def rank_items(corpus, query, *, now, params, embed=None, matrices=None, index_cache=None,
               min_information=0.0, hidden=None, diversity=0.0, whole=None,
               vocabulary=None, known_cosines=None):  # fmt: skip
    """
    Rank the corpus for a query (blocking: run it in the worker pool): the first stage (the
    search), the filters and the information weight, then the second stage (`diversity`).

    Args:
        corpus (tuple): Journal-shaped items (`build_corpus`).
        query (RecallQuery): What to recall, for whom.
        now (datetime): The current time.
        params (SearchParams): The search knobs (`recall_params`).
        embed (callable, optional): The local embedder's `embed`; fused when given.
        matrices (EmbeddingMatrices, optional): The corpus's vectors, kept between calls.
        index_cache (JournalIndexCache, optional): The corpus's BM25 index, kept between calls.
        min_information (float): Lines saying less than this are never recalled.
        hidden (int, optional): How many items are private to someone, if the caller knows
            (the mirror keeps its count); else they are counted here.
        diversity (float): How much a hit that resembles a better one moves down
            (`recall.diversity`; needs `embed`; 0: by score alone).
        whole (WholeCorpus, optional): The corpus the items are part of (a store's
            candidates, `store_candidates`): BM25 and neighbours as over every memory.
        vocabulary (JournalVocabulary, optional): The corpus's words and their vectors, kept
            between calls, for the query's expansion (`params.expansion_weight`; needs
            `embed`).
        known_cosines (sequence, optional): The query's cosines to the corpus's first items,
            computed by the store that found them (`_dense`).

    Returns:
        list[Recalled]: Best first, one per source entry, visible to the viewer.
    """
    if not corpus or not query.text.strip():
        return []
    hidden = _hidden(corpus) if hidden is None else hidden
    fetch = query.limit * OVERFETCH + hidden + len(query.exclude)
    dense = rows = None
    if embed is not None and (params.embedding_weight or diversity):
        dense, rows = _dense(corpus, query.text, embed, matrices or EmbeddingMatrices(),
                             known_cosines)
        if not params.embedding_weight:
            dense = None
    ranked = search_entries(list(corpus), query.text, now=now, params=params, limit=fetch,
                            filters=query.filters, semantic_scores=dense,
                            index_cache=index_cache, whole=whole,
                            expansion=_expansion(corpus, query.text, embed, params,
                                                 vocabulary))  # fmt: skip
    recalled, seen = [], set()
    for score, item in ranked:
        if not visible_to(item, query.viewer) or _excluded(item, query.exclude):
            continue
        key = source_key(item)
        if key in seen:
            continue
        seen.add(key)
        said = information(item.get("content"), words(item.get("source_entity") or ""))
        if said < min_information:
            continue
        score *= INFORMATION_FLOOR + (1 - INFORMATION_FLOOR) * said
        if is_superseded(item) or is_outranked(item):
            score *= SUPERSEDED_SHARE  # a corrected fact, or a claim a trusted source denies
        recalled.append(Recalled(score, item))
    recalled.sort(key=lambda found: -found.score)
    if diversity and rows is not None:
        recalled = _second_stage(corpus, recalled, rows, diversity)
    return recalled[: query.limit]


def too_long(cost, max_line_tokens):
    """True for a line of `cost` tokens that is longer than a prompt shows (0: no limit)."""
    return bool(max_line_tokens) and cost > max_line_tokens


def select_lines(recalled, budget, limit, count=count_tokens, max_line_tokens=0):
    """
    The lines that fit the token budget, best first, then shown oldest first. Lines are whole:
    the budget is kept by choosing fewer of them, and one longer than `max_line_tokens`
    (`too_long`) is never shown.

    Args:
        recalled (list[Recalled]): Ranked items.
        budget (int): Tokens for all lines (0: no budget).
        limit (int): At most this many lines.
        count (callable): Token counter.
        max_line_tokens (int): The longest line shown (`recall.max_line_tokens`; 0: any).

    Returns:
        RecallLines: Dated lines, oldest first (a list of str), which can be chosen again for
        another budget (`fitting.RecallLines.fit`).
    """
    ranked, count = [], MemoCount(count)  # the lines counted here are not counted again
    for found in recalled:
        line = recall_line(found.item)
        if not too_long(count(line) + 1, max_line_tokens):
            ranked.append(RankedLine(str(found.item.get("timestamp") or ""), line))
    return choose(ranked, budget, limit, count)


def recall_from_corpus(corpus, query, now, settings, *, matrices=None, index_cache=None,
                       hidden=None, whole=None, vocabulary=None, known_cosines=None):
    """
    Rank a corpus for a query and choose the lines that fit (blocking: the worker's part of
    `recall`, and what `bench/recall_replay.py` replays).

    Args:
        corpus (tuple): Journal-shaped items (`build_corpus`).
        query (RecallQuery): What to recall, for whom, how much.
        now (datetime): The current time.
        settings (Settings): The assistant's settings.
        matrices (EmbeddingMatrices, optional): The corpus's vectors, kept between calls.
        index_cache (JournalIndexCache, optional): The corpus's BM25 index, kept between calls.
        hidden (int, optional): How many items are private to someone, if known.
        whole (WholeCorpus, optional): The corpus the items are part of (`rank_items`).
        vocabulary (JournalVocabulary, optional): The corpus's words, kept between calls.
        known_cosines (sequence, optional): The store's cosines of the first items
            (`rank_items`).

    Returns:
        tuple: `(recalled, lines)`.
    """
    wanted = (settings.get("recall.embedding_weight") or settings.get("recall.diversity")
              or settings.get("recall.expansion_weight"))
    embed = default_embed(settings) if wanted else None
    recalled = rank_items(corpus, query, now=now, params=recall_params(settings), embed=embed,
                          matrices=matrices, index_cache=index_cache,
                          min_information=settings.get("recall.min_information"),
                          hidden=hidden, diversity=settings.get("recall.diversity"),
                          whole=whole, vocabulary=vocabulary,
                          known_cosines=known_cosines)  # fmt: skip
    return recalled, select_lines(recalled, query.budget, query.limit,
                                  max_line_tokens=settings.get("recall.max_line_tokens"))


def _recall_in_worker(journal_entries, query, now, settings, mirror, others=(),
                      vocabulary=None):
    corpus = build_corpus(journal_entries, mirror, others)
    tail = corpus[len(mirror.entries()):] if mirror is not None else corpus
    hidden = (mirror.private_count() if mirror is not None else 0) + _hidden(tail)
    # a store's candidates are part of every memory: ranked as over all of them, with the
    # cosines the store computed (their vectors stay in its database)
    whole = known = None
    if hasattr(mirror, "whole_corpus"):
        whole, known = mirror.whole_corpus(tail), mirror.cosines()
    return recall_from_corpus(corpus, query, now, settings,
                              matrices=mirror.matrices if mirror else None,
                              index_cache=mirror.index_cache if mirror else None,
                              hidden=hidden, whole=whole, vocabulary=vocabulary,
                              known_cosines=known)  # fmt: skip


def _first_read_beside_a_reply(memories, query):
    """True when the store's first read would open the store beside a reply in flight that
    does not wait for it (`plumbing.reply_priority`: it then waits until the replies settle)."""
    return (replying() and not query.wait_for_store and memories.available
            and memories.opening)


@defer.inlineCallbacks
def recall(ports, query, *, runner=None):
    """
    Recall for a query from every tier (the pipeline of the module doc).

    On the reactor: the mirror's first read is started (the store lists off the reactor) and
    the journal's current version is read; the corpus, the ranking, the embedding and the
    budget run in `runner` (the worker pool).

    Args:
        ports (AssistantPorts): The assistant.
        query (RecallQuery): What to recall, for whom, how much.
        runner (callable, optional): `runner(func, *args) -> Deferred` for the blocking part
            (default the assistant's `ports.run_cpu_bound`, the worker pool).

    Returns:
        Deferred[tuple]: `(recalled, lines)`: the ranked `Recalled` items and the dated
        lines that fit the budget.
    """
    if not query.text.strip():
        return [], []
    runner = runner or ports.run_cpu_bound
    memories = Memories(ports)
    if memories.ranks_in_database:  # the store's database finds the candidates
        journal = get_journal(ports)["entries"] if query.journal else ()
        mirror = yield fetch_candidates(ports, query.text, journal)
    else:
        if _first_read_beside_a_reply(memories, query):
            # a reply in flight that does not wait for the store: its first read (opening the
            # store, mostly) is background work, started once the replies have settled
            when_settled(memories.recall_mirror, runner)
            mirror = None
        else:
            loading = memories.recall_mirror(runner)
            mirror = (yield loading) if loading.called or query.wait_for_store else None
        # the journal's current version (entries are never changed in place); the corpus,
        # its index and its vectors are made from it and the mirror's snapshot in the worker
        journal = get_journal(ports)["entries"] if query.journal else ()
    # the nodes and profiles are made into items here: the patrol and entity consolidation
    # change those documents on the reactor, so the worker gets a snapshot
    others = tier_items(load_nodes(ports), get_profiles(ports)) if query.journal else ()
    # the words the query's expansion draws on, one vocabulary per assistant (the tools' too)
    vocabulary = journal_vocabulary(ports)
    result = yield runner(_recall_in_worker, journal, query, ports.clock.now(), ports.settings,
                          mirror, others, vocabulary)  # fmt: skip
    return result


def loaded_mirror(ports):
    """Deferred[MemoryMirror]: the mirror, read from the store in the worker pool once."""
    return Memories(ports).recall_mirror(ports.run_cpu_bound)
