"""
Recall from the long-term store alone: the memories relevant to a query.

`search_long_term` (the `search_facts` tool) runs the recall pipeline (`recall.pipeline`) over
the long-term memories only. `retrieve_relevant_memories` is the specification's two-stage
filter over the store's own (dense) search: relevance above the calibrated threshold
(`memory.relevance_threshold`), then `metadata.source_trust >= memory.min_source_trust`. It
serves `@assistant/memory` (`format_memory_results`) and answers for `search_long_term` until
the store's recall mirror could be read.
"""

from twisted.internet import defer

from ai_assistant.memory.audience import visible_to
from ai_assistant.memory.corrections import not_recalled
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.sources import is_disputed, is_outranked
from ai_assistant.memory.longterm.supersede import is_superseded, prefer_current
from ai_assistant.memory.recall.lines import recall_date
from ai_assistant.memory.recall.pipeline import RecallQuery, loaded_mirror, recall
from ai_assistant.memory.search.filters import SearchFilters

# Memories with no recorded trust are treated as this (the specification's neutral middle).
UNKNOWN_TRUST = 0.5


def _event_text(event):
    if isinstance(event, str):
        return event
    if isinstance(event, dict):
        for key in ("content", "text", "message", "description", "title"):
            if event.get(key):
                return str(event[key])
    return ""


def build_query(query=None, events=None, goals=None):
    """
    The search text: the query, else the recent events and active goals joined.

    Returns:
        str: Possibly empty.
    """
    if query and str(query).strip():
        return str(query).strip()
    parts = [_event_text(item) for item in list(events or [])[-5:]]
    parts += [_event_text(item) for item in list(goals or [])[:3]]
    return " ".join(part for part in parts if part).strip()[:2000]


def _trust(hit):
    value = (hit.get("metadata") or {}).get("source_trust")
    return float(value) if isinstance(value, int | float) else UNKNOWN_TRUST


@defer.inlineCallbacks
def retrieve_relevant_memories(ports, query=None, *, events=None, goals=None, limit=None,
                               min_source_trust=None, threshold=None):
    """
    Two-stage retrieval from semantic memory.

    Stage 1: cosine relevance above the calibrated threshold (`memory.relevance_threshold`).
    Stage 2: `metadata.source_trust >= min_source_trust` (`memory.min_source_trust`).

    Args:
        ports (AssistantPorts): The assistant.
        query (str, optional): What to look for; else built from `events` and `goals`.
        events (list, optional): Recent events (strings or dicts with "content").
        goals (list, optional): Active goals (strings or dicts with "description").
        limit (int, optional): Most results (`memory.recall_limit`).
        min_source_trust (float, optional): Trust floor.
        threshold (float, optional): Relevance floor on the embedder's cosine scale.

    Returns:
        Deferred[list[dict]]: `{"id", "memory", "score", "trust", "metadata"}`, best first.
        Errbacks if the store fails (callers decide how to show it).
    """
    store = Memories(ports)
    text = build_query(query, events, goals)
    if not store.available or not text:
        return []
    limit = int(limit or ports.settings.get("memory.recall_limit"))
    if min_source_trust is None:
        min_source_trust = ports.settings.get("memory.min_source_trust")
    if threshold is None:
        threshold = store.threshold("relevance_threshold")
    # Over-fetch: the trust stage may drop some of the relevant ones.
    hits = yield store.search(text, limit=limit * 3)
    kept = []
    for hit in hits or ():
        if hit.get("score", 0.0) <= threshold or not_recalled(hit):
            continue  # below relevance, or marked wrong by staff (memory.corrections)
        trust = _trust(hit)
        if trust < min_source_trust:
            continue
        kept.append({**hit, "trust": trust})
    kept.sort(key=lambda hit: hit.get("score", 0.0), reverse=True)
    # a corrected fact comes after the current ones, marked as what was true before
    return prefer_current(kept)[:limit]


@defer.inlineCallbacks
def search_long_term(ports, query, *, viewer=None, limit=None, min_source_trust=None):
    """
    The long-term memories that answer a query, through the recall pipeline
    (`memory.recall`): BM25 with lemmas, speaker and time awareness, fused with the local
    embedder's similarity, over every memory mirrored from the store; only those `viewer` may
    see, at least `min_source_trust` trusted, never one marked wrong. Until the mirror could
    be read from the store, the store's own (dense) search answers
    (`retrieve_relevant_memories`).

    Args:
        ports (AssistantPorts): The assistant.
        query (str): What to look for.
        viewer (str, optional): Stable id of whom the result is for (None: public only).
        limit (int, optional): Most results (`memory.recall_limit`).
        min_source_trust (float, optional): Trust floor (`memory.min_source_trust`).

    Returns:
        Deferred[list[dict]]: `{"id", "memory", "score", "trust", "metadata", "when"}`, best
        first. Errbacks if the store fails (callers decide how to show it).
    """
    limit = int(limit or ports.settings.get("memory.recall_limit"))
    if min_source_trust is None:
        min_source_trust = ports.settings.get("memory.min_source_trust")
    mirror = yield loaded_mirror(ports)
    if not mirror.loaded:
        hits = yield retrieve_relevant_memories(ports, query, limit=limit,
                                                min_source_trust=min_source_trust)  # fmt: skip
        return [{**hit, "when": recall_date((hit.get("metadata") or {}).get("timestamp"))}
                for hit in hits if visible_to(hit, viewer)]  # fmt: skip
    recalled, _ = yield recall(ports, RecallQuery(
        text=str(query), viewer=viewer, limit=limit, journal=False,
        filters=SearchFilters(min_trust=min_source_trust)))
    return [{"id": found.item["id"], "memory": found.item["content"],
             "score": found.score, "trust": found.item["source_trust"],
             "metadata": dict(found.item.get("metadata") or {}),
             "when": recall_date(found.item.get("timestamp"))} for found in recalled]


def format_memory_line(hit):
    """One memory as a prompt/command line: `- text (relevance 0.52, trust 0.9, from Alice)`."""
    metadata = hit.get("metadata") or {}
    source = metadata.get("source_entity")
    origin = f", from {source}" if source else ""
    if is_superseded(hit):
        return f"- (formerly: {hit.get('memory', '')}; since corrected)"
    return (f"- {hit.get('memory', '')} (relevance {hit.get('score', 0.0):.2f}, "
            f"trust {hit.get('trust', _trust(hit)):.2f}{origin})")


@defer.inlineCallbacks
def memory_context_block(ports, query=None, *, events=None, goals=None, limit=None):
    """
    Context provider: the prompt block of memories relevant to the current situation.

    Never fails: a store error is logged and gives an empty block (the prompt goes on).

    Returns:
        Deferred[str]: "## Relevant memories" and one line per memory, or "".
    """
    try:
        hits = yield retrieve_relevant_memories(
            ports, query, events=events, goals=goals, limit=limit
        )
    except Exception as err:
        ports.log(f"{ports.name}: memory retrieval for the prompt failed: {err}")
        return ""
    if not hits:
        return ""
    return "\n".join(["## Relevant memories"] + [format_memory_line(hit) for hit in hits])


def format_memory_results(query, hits):
    """
    The text `@assistant/memory <npc> = <query>` shows.

    Args:
        query (str): What was searched for.
        hits (list[dict]): Results of `retrieve_relevant_memories` (or the tool's `memories`).

    Returns:
        str: A header and one scored line per memory, or a clear "nothing found".
    """
    if not hits:
        return f"No memories match '{query}'."
    lines = [f"Memories for '{query}' ({len(hits)}):"]
    for number, hit in enumerate(hits, 1):
        metadata = hit.get("metadata") or {}
        tags = ", ".join(metadata.get("tags") or [])
        extra = f" [{tags}]" if tags else ""
        if is_superseded(hit):
            extra += f" (formerly; superseded {metadata.get('superseded_at') or 'since'})"
        elif is_outranked(hit):
            extra += " (outranked: a more trusted source says otherwise)"
        elif is_disputed(hit):
            extra += " (disputed by a source of equal trust)"
        source = metadata.get("source_entity")
        origin = f" from {source}" if source else ""
        lines.append(
            f"{number:>2}. score {hit.get('score', 0.0):.2f} | trust "
            f"{hit.get('trust', _trust(hit)):.2f}{origin} | {hit.get('memory', '')}{extra}"
        )
    return "\n".join(lines)
