"""
Sleep consolidation: the compacting phase moves journal entries into semantic memory.

`run_sleep_consolidation` moves important journal entries into mem0 with the specification's
metadata, a few per tick, and reports `completed` when none are left, which moves the sleep
phase on to dreaming.

What is stored (the specification extracts facts via an LLM under
ASSISTANT_FACT_EXTRACTION_PROMPT):

- With an LLM, the entry's objective world facts, one memory each, stored with `infer=False`
  (mem0 makes no LLM call of its own). The facts normally come from the compacting phase's
  batched scoring call (`sleep.scoring.score_pending_entries` keeps them on the entry as
  `entry["facts"]`, persona-filtered). Entries without them (importance set by hand, a reply
  without facts, entries too long for the scoring prompt) get theirs here, all entries of the
  tick in ONE extraction call (`sleep.facts.extract_missing_facts`), before anything is
  stored. An entry whose facts are an empty list (nothing but self-reference, say) is marked
  consolidated with no memories.
- In mechanical mode (no LLM), the entry text itself, without inference.

Ordering with importance scoring: the scoring step runs first in each compacting tick, but it
may still be behind (a per-tick cap, a failed call). While an LLM is configured, an entry whose
importance is still the heuristic one waits here (`sleep.scoring.awaiting_llm_score`) until the
scoring call has upgraded it - so its memories carry the LLM importance and the facts come from
that call - unless scoring has failed for it `journal.scoring_max_attempts` times; then it is
consolidated with its heuristic score and facts extracted here. The phase is not `completed`
while any entry waits, so the orchestrator does not move on to dreaming before scoring had its
chance. An entry scored below `memory.min_importance` is then simply not consolidated.

Idempotence (nothing is stored twice, whatever fails or reloads):

1. Before storing, the entry's id is recorded as in flight (`documents.MEMORY_CONSOLIDATION`).
2. Before extracting or storing, the store is asked for memories whose metadata `entry_id` is
   this entry's. An entry with facts stores only the facts not found there (a failure part way
   through an entry's facts leaves the rest for the retry); an entry without facts whose
   memories are found (a store succeeded but its marking was lost to a reload) is linked and
   marked without storing again or calling the LLM.
3. Extracted facts are written onto the entry before storing, so a retry does not extract again.
4. Only after every store of an entry succeeded is it marked consolidated
   (`journal["consolidated_entry_ids"]`) and linked (`documents.MEMORY_LINKS`), in one step
   with no yield in between. A store failure stops the batch; a failed or unusable extraction
   reply stops the tick before anything is stored. What is not marked is retried next tick.
"""

from twisted.internet import defer

from ai_assistant.memory import journal as journal_module
from ai_assistant.memory.links import get_links, link_entry_to_memories, save_links
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import LLMUnavailable, iso
from ai_assistant.sleep.facts import extract_missing_facts, extracted_facts
from ai_assistant.sleep.scoring import awaiting_llm_score, get_scoring_attempts


def consolidation_metadata(entry):
    """The specification's metadata for a memory consolidated from a journal entry."""
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
        list: Entries for which `scoring.awaiting_llm_score` holds, oldest first.
    """
    attempts = get_scoring_attempts(ports)
    return [entry for entry in journal_module.unconsolidated_entries(ports)
            if not _is_synthesis(entry)
            and awaiting_llm_score(ports, entry, attempts)]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Progress (documents.MEMORY_CONSOLIDATION)


def _record_in_flight(ports, entry_ids):
    progress = ports.state.get(documents.MEMORY_CONSOLIDATION, {}) or {}
    in_flight = progress.setdefault("in_flight", {})
    now = iso(ports.clock.now())
    for entry_id in entry_ids:
        in_flight.setdefault(entry_id, now)
    ports.state.set(documents.MEMORY_CONSOLIDATION, progress)


def _finish_entry(ports, entry_id, memory_ids):
    """Mark one entry consolidated and link it to its memories (no yield inside)."""
    links = get_links(ports)
    link_entry_to_memories(links, entry_id, memory_ids)
    save_links(ports, links)
    journal_module.mark_consolidated(ports, [entry_id])
    progress = ports.state.get(documents.MEMORY_CONSOLIDATION, {}) or {}
    progress.setdefault("in_flight", {}).pop(entry_id, None)
    progress["stored_total"] = progress.get("stored_total", 0) + len(memory_ids)
    progress["last_run"] = iso(ports.clock.now())
    ports.state.set(documents.MEMORY_CONSOLIDATION, progress)


def _count_extraction_failure(ports, reset=False):
    """Count consecutive failed extraction calls (in `documents.MEMORY_CONSOLIDATION`)."""
    progress = dict(ports.state.get(documents.MEMORY_CONSOLIDATION) or {})
    failures = 0 if reset else int(progress.get("extraction_failures", 0)) + 1
    if progress.get("extraction_failures", 0) != failures:
        progress["extraction_failures"] = failures
        ports.state.set(documents.MEMORY_CONSOLIDATION, progress)
    return failures


def _fail(ports, result, message):
    ports.log(f"{ports.name}: {message}")
    result.update(success=False, error=message)


# ----------------------------------------------------------------------------------------------
# The step


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


@defer.inlineCallbacks
def _stored_already(ports, store, batch, result):
    """
    What a previous tick already stored for each entry (its marking may have been lost to a
    reload): `{entry id: [memories]}`, or None when the store failed (everything stays pending).
    """
    existing = {}
    for entry in batch:
        try:
            existing[entry["id"]] = list(
                (yield store.list(limit=50, filters={"entry_id": entry["id"]})) or ()
            )
        except Exception as err:  # the store failed: everything stays pending
            _fail(ports, result, f"consolidation lookup of journal entry {entry['id']} "
                                 f"failed: {err}")  # fmt: skip
            return None
    return existing


@defer.inlineCallbacks
def _extract_facts_for(ports, batch, existing, result):
    """
    Facts for the entries that have none yet and nothing stored: one call for all.

    When the LLM stays unavailable (breaker open, emergency stop) or keeps failing, the entries
    are stored verbatim, as in mechanical mode, so that sleep can still end.

    Returns:
        Deferred[bool or None]: Whether entries without facts are stored verbatim; None when
        the extraction failed and the tick stops (nothing stored or marked: retried).
    """
    if ports.mechanical:
        return True
    missing = [entry for entry in batch
               if extracted_facts(entry) is None and not existing[entry["id"]]]
    if not missing:
        return False
    try:
        result["extracted"] = sorted((yield extract_missing_facts(ports, missing)), key=str)
        _count_extraction_failure(ports, reset=True)
    except Exception as err:  # noqa: BLE001 - nothing is stored or marked: retry
        failures = _count_extraction_failure(ports)
        limit = ports.settings.get("memory.extraction_max_attempts")
        if not isinstance(err, LLMUnavailable) and failures < limit:
            _fail(ports, result, f"fact extraction for consolidation failed, will "
                                 f"retry ({type(err).__name__}: {err})")  # fmt: skip
            return None
        ports.log(f"{ports.name}: fact extraction unavailable ({err}); storing "
                  f"{len(missing)} entries verbatim")
        result["verbatim"] = sorted(entry["id"] for entry in missing)
        return True
    return False


@defer.inlineCallbacks
def _store_entry(ports, store, entry, found, verbatim, result):
    """
    Store one entry's facts (or text) that are not stored yet, then mark and link it.

    Returns:
        Deferred[bool]: False when the store failed (the batch stops; the entry stays pending).
    """
    entry_id = entry["id"]
    facts = extracted_facts(entry)
    if facts is None and not verbatim and not found:
        return True  # the extraction reply left it out: next tick
    memory_ids = [item["id"] for item in found]
    if facts is None:
        texts = [] if found else [entry["content"]]
    else:
        stored_texts = {item.get("memory") for item in found}
        texts = [fact for fact in facts if fact not in stored_texts]
    result["reused"] += 1 if found and not texts else 0
    try:
        for text in texts:
            stored = yield store.add(text, metadata=consolidation_metadata(entry), infer=False)
            new_ids = [item["id"] for item in stored or ()]
            memory_ids += [i for i in new_ids if i not in memory_ids]
            result["stored"] += len(new_ids)
    except Exception as err:  # the store failed: keep the entry pending, retry next tick
        _fail(ports, result, f"consolidation of journal entry {entry_id} failed: {err}")
        return False
    # No yield from here on: the marking uses fresh state.
    _finish_entry(ports, entry_id, memory_ids)
    result["consolidated"].append(entry_id)
    return True


@defer.inlineCallbacks
def _consolidate_batch(ports, store, batch, result):
    """Store `batch` (see `run_sleep_consolidation`), filling in `result`."""
    existing = yield _stored_already(ports, store, batch, result)
    if existing is None:
        return
    verbatim = yield _extract_facts_for(ports, batch, existing, result)
    if verbatim is None:
        return
    # Store, entry by entry, each read fresh (the stores before it yielded).
    for entry_id in [entry["id"] for entry in batch]:
        journal = journal_module.get_journal(ports)
        entry = next((item for item in journal["entries"] if item["id"] == entry_id), None)
        if entry is None or entry_id in journal["consolidated_entry_ids"]:
            continue  # deleted, or consolidated meanwhile
        stored = yield _store_entry(ports, store, entry, existing[entry_id], verbatim, result)
        if not stored:
            return
