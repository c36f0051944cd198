"""
Journal -> semantic memory: sleep consolidation, and retrieval for the prompt and recall.

`run_sleep_consolidation` is the compacting phase of sleep (seed 001 §4, seed 002 §3.2): it moves
important journal entries into mem0 with the seed's metadata, a few per tick, and reports
`completed` when none are left, which moves the sleep phase on to dreaming.

What is stored (seed 002 §3.2, "Extract facts via LLM (ASSISTANT_FACT_EXTRACTION_PROMPT)"):

- With an LLM, the entry's objective world facts, one memory each, stored with `infer=False`
  (mem0 makes no LLM call of its own). The facts normally come from the compacting phase's
  batched scoring call (`importance.score_pending_entries` keeps them on the entry as
  `entry["facts"]`, persona-filtered). Entries without them (importance set by hand, a reply
  without facts, entries too long for the scoring prompt) get theirs here, all entries of the
  tick in ONE extraction call, before anything is stored. An entry whose facts are an empty
  list (nothing but self-reference, say) is marked consolidated with no memories.
- In mechanical mode (no LLM), the entry text itself, without inference.

Ordering with importance scoring: the scoring step runs first in each compacting tick, but it
may still be behind (a per-tick cap, a failed call). While an LLM is configured, an entry whose
importance is still the heuristic one waits here (`importance.awaiting_llm_score`) until the
scoring call has upgraded it - so its memories carry the LLM importance and the facts come from
that call - unless scoring has failed for it `journal.scoring_max_attempts` times; then it is
consolidated with its heuristic score and facts extracted here. The phase is not `completed`
while any entry waits, so the orchestrator does not move on to dreaming before scoring had its
chance. An entry scored below `memory.min_importance` is then simply not consolidated.

Idempotence (nothing is stored twice, whatever fails or reloads):

1. Before storing, the entry's id is recorded as in flight (state doc `memory_consolidation`).
2. Before extracting or storing, the store is asked for memories whose metadata `entry_id` is
   this entry's. An entry with facts stores only the facts not found there (a failure part way
   through an entry's facts leaves the rest for the retry); an entry without facts whose
   memories are found (a store succeeded but its marking was lost to a reload) is linked and
   marked without storing again or calling the LLM.
3. Extracted facts are written onto the entry before storing, so a retry does not extract again.
4. Only after every store of an entry succeeded is it marked consolidated
   (`journal["consolidated_entry_ids"]`) and linked (`memory_links`), in one step with no
   yield in between. A store failure stops the batch; a failed or unusable extraction reply
   stops the tick before anything is stored. What is not marked is retried next tick.

`retrieve_relevant_memories` is seed 001's two-stage filter: semantic relevance above the
calibrated threshold, then `metadata.source_trust >= memory.min_source_trust`.
"""

from twisted.internet import defer

from ai_assistant.memory import importance
from ai_assistant.memory import journal as journal_module
from ai_assistant.plumbing.ports import LLMUnavailable, iso
from ai_assistant.plumbing.settings import DEFAULTS

LINKS_DOC = "memory_links"
PROGRESS_DOC = "memory_consolidation"
# Memories with no recorded trust are treated as this (the seed's neutral middle).
UNKNOWN_TRUST = 0.5


# ----------------------------------------------------------------------------------------------
# Thresholds


def calibrated_threshold(ports, name):
    """
    A similarity threshold on the scale of the store's embedder.

    The seed's numbers (relevance 0.7, link similarity 0.7) are on a transformer-cosine scale.
    A store whose embedder reports its own calibrated value for `name` uses it while the
    setting is still the seed default; a game that sets another value gets exactly that.

    Args:
        ports (AssistantPorts): The assistant.
        name (str): "relevance_threshold" or "link_similarity".

    Returns:
        float: The threshold to compare `score` (cosine) against.
    """
    configured = ports.settings.get(f"memory.{name}")
    calibrated = getattr(ports.semantic, name, None)
    if calibrated is not None and configured == DEFAULTS["memory"][name]:
        return float(calibrated)
    return float(configured)


# ----------------------------------------------------------------------------------------------
# Links between journal entries and memories


def get_links(ports):
    """
    The `memory_links` document: `{mem_id: {"linked_to": [{"id", "score"}], "journal_ids":
    [entry ids], "processed_at": iso or None}}`.
    """
    links = ports.state.get(LINKS_DOC, {})
    return links if isinstance(links, dict) else {}


def link_record(links, memory_id):
    """The record of `memory_id` in `links`, created empty if missing."""
    record = links.setdefault(memory_id, {})
    record.setdefault("linked_to", [])
    record.setdefault("journal_ids", [])
    record.setdefault("processed_at", None)
    return record


def memory_ids_for_entry(ports, entry_id):
    """
    Returns:
        list: Ids of the memories consolidated from journal entry `entry_id`.
    """
    return [mem_id for mem_id, record in get_links(ports).items()
            if entry_id in (record.get("journal_ids") or ())]


# ----------------------------------------------------------------------------------------------
# Sleep consolidation


def consolidation_metadata(entry):
    """The seed's metadata for a memory consolidated from a journal entry."""
    return {
        "source": "journal",
        "entry_id": entry.get("id"),
        "tags": list(entry.get("tags") or []),
        "source_type": entry.get("source_type"),
        "source_trust": entry.get("source_trust"),
        "source_entity": entry.get("source_entity"),
        "importance": entry.get("importance"),
        "importance_method": entry.get("importance_method"),
    }


def _is_synthesis(entry):
    tags = {str(tag).lower() for tag in entry.get("tags") or ()}
    return journal_module.is_synthesis(entry) or "synthesis" in tags


def pending_entries(ports):
    """
    Journal entries still to consolidate, oldest first.

    Returns:
        list: Unconsolidated, non-synthesis entries with importance >= memory.min_importance.
    """
    min_importance = ports.settings.get("memory.min_importance")
    return [
        entry for entry in journal_module.unconsolidated_entries(ports)
        if not _is_synthesis(entry) and (entry.get("importance") or 0) >= min_importance
    ]


def entries_awaiting_scoring(ports):
    """
    Unconsolidated entries consolidation waits for: their LLM score is still to come.

    Counted whatever their heuristic importance, since the LLM score may lift them over
    `memory.min_importance`.

    Returns:
        list: Entries for which `importance.awaiting_llm_score` holds, oldest first.
    """
    attempts = importance.get_scoring_attempts(ports)
    return [entry for entry in journal_module.unconsolidated_entries(ports)
            if not _is_synthesis(entry)
            and importance.awaiting_llm_score(ports, entry, attempts)]  # fmt: skip


def _record_in_flight(ports, entry_ids):
    progress = ports.state.get(PROGRESS_DOC, {}) or {}
    in_flight = progress.setdefault("in_flight", {})
    now = iso(ports.clock.now())
    for entry_id in entry_ids:
        in_flight.setdefault(entry_id, now)
    ports.state.set(PROGRESS_DOC, progress)


def _finish_entry(ports, entry_id, memory_ids):
    """Mark one entry consolidated and link it to its memories (no yield inside)."""
    links = get_links(ports)
    for memory_id in memory_ids:
        record = link_record(links, memory_id)
        if entry_id not in record["journal_ids"]:
            record["journal_ids"].append(entry_id)
    ports.state.set(LINKS_DOC, links)
    journal_module.mark_consolidated(ports, [entry_id])
    progress = ports.state.get(PROGRESS_DOC, {}) or {}
    progress.setdefault("in_flight", {}).pop(entry_id, None)
    progress["stored_total"] = progress.get("stored_total", 0) + len(memory_ids)
    progress["last_run"] = iso(ports.clock.now())
    ports.state.set(PROGRESS_DOC, progress)


# ----------------------------------------------------------------------------------------------
# Batched fact extraction (entries the scoring call gave no facts for)

EXTRACTION_SYSTEM_PROMPT = (
    "You extract the objective facts that journal entries of a game character state, for "
    "its long-term memory."
)


def build_extraction_prompt(entries):
    """
    One prompt for the facts of several journal entries (their full text).

    Args:
        entries (list): Journal entries.

    Returns:
        list: Chat messages asking for `{"entries": [{"id", "facts": [...]}]}` as JSON.
    """
    lines = [f"[{entry['id']}] {entry['content']}" for entry in entries]
    user = (
        "List the objective facts each journal entry below states.\n\n"
        + "\n".join(lines)
        + "\n\nFacts:\n"
        + importance.FACT_RULES
        + '\n\nAnswer with JSON only: {"entries": [{"id": <id>, "facts": ["<fact>", ...]}, '
        "...]} with one item per entry."
    )
    return [
        {"role": "system", "content": EXTRACTION_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


@defer.inlineCallbacks
def _extract_missing_facts(ports, entries):
    """
    Extract the facts of `entries` in one LLM call and keep them on the journal entries.

    Returns:
        Deferred[set]: Ids that now have facts; entries the reply left out are not among them.
        Errbacks (ValueError for an unusable reply) with nothing written.
    """
    asked = [entry["id"] for entry in entries]
    reply = yield ports.llm.complete(
        build_extraction_prompt(entries), purpose="fact_extraction", temperature=0.0
    )
    facts = importance.parse_facts(getattr(reply, "content", None) or "", asked)
    if not facts:
        raise ValueError("fact extraction reply had no usable facts")
    # No yield from here on: fresh state.
    journal = journal_module.get_journal(ports)
    rejected = 0
    for entry in journal["entries"]:
        if entry["id"] in facts:
            rejected += len(importance.store_facts(ports, entry, facts[entry["id"]]))
    journal_module.save_journal(ports, journal)
    if rejected:
        ports.log(f"{ports.name}: dropped {rejected} self-referential extracted fact(s)")
    return set(facts)


# ----------------------------------------------------------------------------------------------
# Sleep consolidation


@defer.inlineCallbacks
def run_sleep_consolidation(ports, max_entries=None):
    """
    Move up to `memory.consolidation_per_tick` journal entries into semantic memory.

    With an LLM, each entry's extracted facts are stored (facts from the scoring call, else
    from one batched extraction call for the tick), without mem0 inference; entries still
    waiting for their LLM score are left for a later tick. In mechanical mode the entry text
    is stored as it is. See the module docstring for ordering and idempotence.

    Args:
        ports (AssistantPorts): The assistant.
        max_entries (int, optional): Override of `memory.consolidation_per_tick`.

    Returns:
        Deferred[dict]: `{"success", "completed", "consolidated": [entry ids],
        "stored": n memories, "reused": n, "extracted": [entry ids], "remaining": n,
        "waiting_for_scoring": n, "error"?}`. Never errbacks.
    """
    result = {"success": True, "completed": False, "consolidated": [], "stored": 0,
              "reused": 0, "extracted": [], "remaining": 0, "waiting_for_scoring": 0}
    store = ports.semantic
    if store is None or not ports.settings.get("memory.enabled"):
        result.update(completed=True, skipped="semantic memory is off")
        return result
    limit = max_entries or ports.settings.get("memory.consolidation_per_tick")
    waiting = {entry["id"] for entry in entries_awaiting_scoring(ports)}
    batch = [entry for entry in pending_entries(ports)
             if entry["id"] not in waiting][: max(1, int(limit))]  # fmt: skip
    if batch:
        _record_in_flight(ports, [entry["id"] for entry in batch])
        yield _consolidate_batch(ports, store, batch, result)

    result["remaining"] = len(pending_entries(ports))
    result["waiting_for_scoring"] = len(entries_awaiting_scoring(ports))
    result["completed"] = (result["success"] and result["remaining"] == 0
                           and result["waiting_for_scoring"] == 0)  # fmt: skip
    return result


def _count_extraction_failure(ports, reset=False):
    """Count consecutive failed extraction calls (state doc `memory_consolidation`)."""
    progress = dict(ports.state.get(PROGRESS_DOC) or {})
    failures = 0 if reset else int(progress.get("extraction_failures", 0)) + 1
    if progress.get("extraction_failures", 0) != failures:
        progress["extraction_failures"] = failures
        ports.state.set(PROGRESS_DOC, progress)
    return failures


def _fail(ports, result, message):
    ports.log(f"{ports.name}: {message}")
    result.update(success=False, error=message)


@defer.inlineCallbacks
def _consolidate_batch(ports, store, batch, result):
    """Store `batch` (see `run_sleep_consolidation`), filling in `result`."""
    # 1. What a previous tick already stored (its marking may have been lost to a reload).
    existing = {}
    for entry in batch:
        try:
            existing[entry["id"]] = list(
                (yield store.list(limit=50, filters={"entry_id": entry["id"]})) or ()
            )
        except Exception as err:  # the store failed: everything stays pending
            _fail(ports, result, f"consolidation lookup of journal entry {entry['id']} "
                                 f"failed: {err}")  # fmt: skip
            return

    # 2. Facts for the entries that have none yet and nothing stored: one call for all.
    # When the LLM stays unavailable (breaker open, emergency stop) or keeps failing, the
    # entries are stored verbatim, as in mechanical mode, so that sleep can still end.
    verbatim = ports.mechanical
    if not ports.mechanical:
        missing = [entry for entry in batch
                   if importance.extracted_facts(entry) is None and not existing[entry["id"]]]
        if missing:
            try:
                result["extracted"] = sorted(
                    (yield _extract_missing_facts(ports, missing)), key=str
                )
                _count_extraction_failure(ports, reset=True)
            except Exception as err:  # noqa: BLE001 - nothing is stored or marked: retry
                failures = _count_extraction_failure(ports)
                limit = ports.settings.get("memory.extraction_max_attempts")
                if not isinstance(err, LLMUnavailable) and failures < limit:
                    _fail(ports, result, f"fact extraction for consolidation failed, will "
                                         f"retry ({type(err).__name__}: {err})")  # fmt: skip
                    return
                ports.log(f"{ports.name}: fact extraction unavailable ({err}); storing "
                          f"{len(missing)} entries verbatim")
                result["verbatim"] = sorted(entry["id"] for entry in missing)
                verbatim = True

    # 3. Store, entry by entry, each read fresh (the stores before it yielded).
    for entry_id in [entry["id"] for entry in batch]:
        journal = journal_module.get_journal(ports)
        entry = next((item for item in journal["entries"] if item["id"] == entry_id), None)
        if entry is None or entry_id in journal["consolidated_entry_ids"]:
            continue  # deleted, or consolidated meanwhile
        found = existing[entry_id]
        facts = importance.extracted_facts(entry)
        if facts is None and not verbatim and not found:
            continue  # the extraction reply left it out: next tick
        memory_ids = [item["id"] for item in found]
        if facts is None:
            texts = [] if found else [entry["content"]]
        else:
            stored_texts = {item.get("memory") for item in found}
            texts = [fact for fact in facts if fact not in stored_texts]
        result["reused"] += 1 if found and not texts else 0
        try:
            for text in texts:
                stored = yield store.add(
                    text, metadata=consolidation_metadata(entry), infer=False
                )
                new_ids = [item["id"] for item in stored or ()]
                memory_ids += [i for i in new_ids if i not in memory_ids]
                result["stored"] += len(new_ids)
        except Exception as err:  # the store failed: keep the entry pending, retry next tick
            _fail(ports, result, f"consolidation of journal entry {entry_id} failed: {err}")
            return
        # No yield from here on: the marking uses fresh state.
        _finish_entry(ports, entry_id, memory_ids)
        result["consolidated"].append(entry_id)


# ----------------------------------------------------------------------------------------------
# Retrieval


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
    Two-stage retrieval from semantic memory (seed 001).

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
    store = ports.semantic
    text = build_query(query, events, goals)
    if store is None or not text:
        return []
    limit = int(limit or ports.settings.get("memory.recall_limit"))
    if min_source_trust is None:
        min_source_trust = ports.settings.get("memory.min_source_trust")
    if threshold is None:
        threshold = calibrated_threshold(ports, "relevance_threshold")
    # Over-fetch: the trust stage may drop some of the relevant ones.
    hits = yield store.search(text, limit=limit * 3)
    kept = []
    for hit in hits or ():
        if hit.get("score", 0.0) <= threshold:
            continue
        trust = _trust(hit)
        if trust < min_source_trust:
            continue
        kept.append({**hit, "trust": trust})
    kept.sort(key=lambda hit: hit.get("score", 0.0), reverse=True)
    return kept[:limit]


def format_memory_line(hit):
    """One memory as a prompt/command line: `- text (relevance 0.52, trust 0.9, from Alice)`."""
    metadata = hit.get("metadata") or {}
    source = metadata.get("source_entity")
    origin = f", from {source}" if source else ""
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
        source = metadata.get("source_entity")
        origin = f" from {source}" if source else ""
        lines.append(
            f"{number:>2}. score {hit.get('score', 0.0):.2f} | trust "
            f"{hit.get('trust', _trust(hit)):.2f}{origin} | {hit.get('memory', '')}{extra}"
        )
    return "\n".join(lines)
