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
  stored. An entry whose facts are an empty list is stored in its own words when it carries
  information (`carries_information`: the model saw no fact in a line that says something,
  and a fact missed is a line lost for good once the journal lets it go); it is marked
  consolidated with no memories when it is small talk, or when every fact it gave was about
  the assistant itself (persona protection dropped them: `entry["facts_rejected"]`).
- In mechanical mode (no LLM), the entry text itself, without inference.

Which entries: those scored at least `memory.min_importance`, and those scored lower (by the
heuristic or by the model) that carry information someone gave the assistant (an entry with a
`source_entity` other than itself: what a person said, or did where it saw). A score is one
judgement of how much a line matters; whether it says anything at all is measured by its words
(`memory.recall.information`: distinct content words beyond stop words, greetings, fillers and
the speaker's name, at least `memory.min_information`). So small talk ("Thanks!", "Keep it
up!", "Wow! What did you get?") may still be dropped, but not a line that says something a
model happened to score low. An importance set by hand, and the staff's correction notes,
are decisions, not estimates: below the minimum they are not consolidated.

Ordering with importance scoring: the scoring step runs first in each compacting tick, but it
may still be behind (a per-tick cap, a failed call). While an LLM is configured, an entry whose
importance is still the heuristic one waits here (`sleep.scoring.awaiting_llm_score`) until the
scoring call has upgraded it - so its memories carry the LLM importance and the facts come from
that call - unless scoring has failed for it `journal.scoring_max_attempts` times; then it is
consolidated with its heuristic score and facts extracted here. The phase is not `completed`
while any entry waits, so the orchestrator does not move on to dreaming before scoring had its
chance. An entry scored below `memory.min_importance` that carries no information is then
simply not consolidated.

Idempotence (nothing is stored twice, whatever fails or reloads):

1. Before storing, the entry's id is recorded as in flight (`ConsolidationProgress`).
2. Before extracting or storing, the store is asked for memories whose metadata `entry_id` is
   this entry's. An entry with facts stores only the facts not found there (a failure part way
   through an entry's facts leaves the rest for the retry); an entry without facts whose
   memories are found (a store succeeded but its marking was lost to a reload) is linked and
   marked without storing again or calling the LLM.
3. Extracted facts are written onto the entry before storing, so a retry does not extract again.
4. Only after every store of an entry succeeded is it marked consolidated
   (`journal["consolidated_entry_ids"]`) and linked (`MemoryLinks`), in one step
   with no yield in between. A store failure stops the batch. What is not marked is retried
   next tick.

A sleep always ends: fact extraction is tried at most `memory.extraction_max_attempts` times
per entry (a failed call or a reply that leaves the entry out each count one); after that, or
while the LLM is unavailable, the entry's text is stored word for word, and the entry
(`consolidated_verbatim`) and its memory (metadata `verbatim`) say so. A wake that comes while
a batch is being stored (`@assistant/wake/force`) stops it between two entries; the next sleep
goes on from there, and the store lookup of step 2 keeps that from storing anything twice.
"""

from twisted.internet import defer

from ai_assistant.memory import provenance
from ai_assistant.memory.audience import PUBLIC, audience_of
from ai_assistant.memory.corrections import not_recalled
from ai_assistant.memory.journal import Journal, is_synthesis
from ai_assistant.memory.journal_fairness import fair_order
from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.progress import ConsolidationProgress
from ai_assistant.memory.longterm.store_breaker import MemoryStoreUnavailable
from ai_assistant.memory.recall.information import information
from ai_assistant.plumbing.ports import LLMUnavailable
from ai_assistant.sleep.facts import extract_missing_facts, extracted_facts
from ai_assistant.sleep.scoring import awaiting_llm_score, get_scoring_attempts
from ai_assistant.workspace.mode import Mode

# Memories looked up per journal entry when a tick checks what an earlier one stored: far more
# than the facts one entry yields, so none is missed.
STORED_PER_ENTRY = 50


def consolidation_metadata(entry):
    """The specification's metadata for a memory consolidated from a journal entry."""
    metadata = {
        "source": "journal",
        "entry_id": entry.get("id"),
        "tags": list(entry.get("tags") or []),
        "source_type": entry.get("source_type"),
        "source_trust": entry.get("source_trust"),
        "source_entity": entry.get("source_entity"),
        "importance": entry.get("importance"),
        "importance_method": entry.get("importance_method"),
        # when it was heard: recall dates the memory and favours the time a question names
        "timestamp": entry.get("timestamp"),
    }
    if audience_of(entry) is not PUBLIC:
        # a whispered entry's memories (its facts too) stay private to whoever whispered it
        metadata["audience"] = audience_of(entry)
    # made from the entry (and what it was made from): its speaker, channel and trust,
    # whatever the extraction said
    source = provenance.of(entry)
    derived = provenance.derive(
        [source], [provenance.ref("journal", entry["id"]), *source["derived_from"]])
    return provenance.with_provenance(metadata, derived)


def _is_synthesis(entry):
    tags = {str(tag).lower() for tag in entry.get("tags") or ()}
    return is_synthesis(entry) or "synthesis" in tags


# How an importance was set that the information measure may overrule (an estimate); a
# "manual" one was a person's decision.
ESTIMATED_IMPORTANCE = ("heuristic", "llm")


def carries_information(ports, entry):
    """
    Does a journal entry say something someone told or showed the assistant (see the module
    doc)? Only entries with a source other than the assistant count: its own notes and
    actions are its own to score. Its speaker's and the assistant's names do not count as
    information: a greeting that names someone is still a greeting.

    Returns:
        bool: It has such a source and its `information` is at least `memory.min_information`.
    """
    source = str(entry.get("source_entity") or "").strip().lower()
    if not source or source == str(ports.name or "").strip().lower():
        return False
    names = {str(name).strip().lower() for name in (entry.get("source_entity"), ports.name)
             if name}  # fmt: skip
    ignored = {word for name in names for word in name.split()}
    found = information(entry.get("content") or "", ignore=ignored)
    return found >= float(ports.settings.get("memory.min_information"))


def worth_consolidating(ports, entry):
    """
    True for an entry consolidation takes: important enough, or scored low by an estimate but
    carrying information; never a synthesis or a staff note.
    """
    if _is_synthesis(entry) or not_recalled(entry):
        return False
    if (entry.get("importance") or 0) >= ports.settings.get("memory.min_importance"):
        return True
    return (entry.get("importance_method") in ESTIMATED_IMPORTANCE
            and carries_information(ports, entry))  # fmt: skip


def pending_entries(ports):
    """
    Journal entries still to consolidate, oldest first in turn per speaker (`fair_order`: a
    flood from one speaker does not hold the others back).

    Returns:
        list: Unconsolidated entries `worth_consolidating`.
    """
    return fair_order([entry for entry in Journal(ports).unconsolidated()
                       if worth_consolidating(ports, entry)])  # fmt: skip


def entries_awaiting_scoring(ports):
    """
    Unconsolidated entries consolidation waits for: their LLM score is still to come.

    Counted whatever their heuristic importance, since the LLM score may lift them over
    `memory.min_importance`.

    Returns:
        list: Entries for which `scoring.awaiting_llm_score` holds, oldest first.
    """
    attempts = get_scoring_attempts(ports)
    return [entry for entry in Journal(ports).unconsolidated()
            if not _is_synthesis(entry)
            and awaiting_llm_score(ports, entry, attempts)]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Progress (`ConsolidationProgress`)


def _finish_entry(ports, entry_id, memory_ids, verbatim=False, merged=()):
    """
    Mark one entry consolidated and link it to its memories (no yield inside).

    An entry stored word for word (no LLM, or fact extraction gave up on it) says so:
    `entry["consolidated_verbatim"]` is True. `merged` are the memories the store kept
    instead of the entry's own claim (a duplicate): their links keep the entry for good.
    """
    MemoryLinks(ports).link_entry(entry_id, memory_ids, merged)
    if verbatim:
        Journal(ports).update({entry_id: {"consolidated_verbatim": True}})
    Journal(ports).mark_consolidated([entry_id])
    ConsolidationProgress(ports).finish(entry_id, len(memory_ids))


def extraction_attempts(ports):
    """`{entry id: failed or unanswered fact extractions}`."""
    return ConsolidationProgress(ports).extraction_attempts()


def _fail(ports, result, message, error=None):
    # an unreachable memory database was logged once by the store's breaker: every sleep tick
    # of the outage finds it so, and keeps its entries pending without a line of its own
    if not isinstance(error, MemoryStoreUnavailable):
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
    store = Memories(ports)
    if not store.available or not ports.settings.get("memory.enabled"):
        result.update(completed=True, skipped="semantic memory is off")
        return result
    limit = max_entries or ports.settings.get("memory.consolidation_per_tick")
    waiting = {entry["id"] for entry in entries_awaiting_scoring(ports)}
    batch = [entry for entry in pending_entries(ports)
             if entry["id"] not in waiting][: max(1, int(limit))]  # fmt: skip
    if batch:
        ConsolidationProgress(ports).start([entry["id"] for entry in batch])
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

    One listing for the whole batch (mem0's `in` filter): a store without a payload index (the
    embedded qdrant) checks every point of the assistant's collection per listing.
    """
    ids = [entry["id"] for entry in batch]
    existing = {entry_id: [] for entry_id in ids}
    if not ids:
        return existing
    try:
        found = yield store.list(limit=STORED_PER_ENTRY * len(ids),
                                 filters={"entry_id": {"in": ids}})
    except Exception as err:  # the store failed: everything stays pending
        _fail(ports, result, f"consolidation lookup of journal entries {', '.join(map(str, ids))} "
                             f"failed: {err}", err)  # fmt: skip
        return None
    for memory in found or ():
        entry_id = (memory.get("metadata") or {}).get("entry_id")
        if entry_id in existing:
            existing[entry_id].append(memory)
    return existing


@defer.inlineCallbacks
def _extract_facts_for(ports, batch, existing, result):
    """
    Facts for the entries that have none yet and nothing stored: one call for all.

    Attempts are counted per entry (`memory.extraction_max_attempts`): a failed call, or a
    reply that leaves an entry out, counts one for it. An entry out of attempts, every entry
    while the LLM is unavailable (breaker open, emergency stop), and every entry in
    mechanical mode is stored verbatim, so that nothing is lost and sleep always ends.

    Returns:
        Deferred[set]: Ids of the entries to store verbatim. Entries neither extracted nor
        verbatim are left for the next tick (nothing stored or marked).
    """
    if ports.mechanical:
        return {entry["id"] for entry in batch if extracted_facts(entry) is None}
    missing = [entry["id"] for entry in batch
               if extracted_facts(entry) is None and not existing[entry["id"]]]
    limit = int(ports.settings.get("memory.extraction_max_attempts"))
    attempts = extraction_attempts(ports)
    verbatim = {entry_id for entry_id in missing if attempts.get(entry_id, 0) >= limit}
    asked = [entry for entry in batch if entry["id"] in missing and entry["id"] not in verbatim]
    if not asked:
        return _verbatim(ports, result, verbatim, "out of extraction attempts")
    asked_ids = [entry["id"] for entry in asked]
    try:
        answered = yield extract_missing_facts(ports, asked)
    except LLMUnavailable as err:
        return _verbatim(ports, result, set(missing), f"LLM unavailable: {err}")
    except Exception as err:  # noqa: BLE001 - nothing is stored or marked for these: retry
        answered, error = set(), f"{type(err).__name__}: {err}"
    else:
        error = None
    result["extracted"] = sorted(answered, key=str)
    unanswered = [entry_id for entry_id in asked_ids if entry_id not in answered]
    if unanswered:
        attempts = ConsolidationProgress(ports).count_extraction_failure(unanswered)
        verbatim |= {entry_id for entry_id in unanswered if attempts[entry_id] >= limit}
    if error and set(unanswered) - verbatim:
        # entries that already have facts are still stored this tick
        _fail(ports, result, f"fact extraction for consolidation failed, will retry ({error})")
    return _verbatim(ports, result, verbatim, "out of extraction attempts")


def _verbatim(ports, result, entry_ids, why):
    """Report (and log) the entries that will be stored word for word."""
    if entry_ids:
        ports.log(f"{ports.name}: storing {len(entry_ids)} entries verbatim ({why})")
        result["verbatim"] = sorted(entry_ids, key=str)
    return entry_ids


VERBATIM_PART = -1  # the part of an entry stored word for word (no facts)


@defer.inlineCallbacks
def _parts_stored(ports, store, entry_id, found):
    """
    The parts of an entry already in the store: `{part index: text}`.

    From the store's metadata (`fact_index` of each memory `found` for the entry; a memory
    stored before facts had an index counts by its text) and from the record of earlier ticks
    (`ConsolidationProgress.record_part`), each recorded memory checked to be in the store
    still.
    """
    done = {}
    for number, item in enumerate(found):
        index = (item.get("metadata") or {}).get("fact_index")
        done[index if isinstance(index, int) else f"text {number}"] = item.get("memory")
    found_ids = {item["id"] for item in found}
    for index, memory_id in ConsolidationProgress(ports).parts(entry_id).items():
        if index in done:
            continue
        memory = None if memory_id in found_ids else (yield store.get(memory_id))
        if memory:
            found.append(memory)  # the entry is linked to it like to the ones looked up
        if memory_id in found_ids or memory:
            done[index] = (memory or {}).get("memory")
    return done


@defer.inlineCallbacks
def _store_entry(ports, store, entry, found, verbatim, result):
    """
    Store one entry's facts (or text) that are not stored yet, then mark and link it.

    Returns:
        Deferred[bool]: False when the store failed (the batch stops; the entry stays pending).
    """
    entry_id = entry["id"]
    facts = None if verbatim else extracted_facts(entry)
    if facts is None and not verbatim and not found:
        return True  # the extraction reply left it out: next tick
    if facts == [] and not entry.get("facts_rejected") and carries_information(ports, entry):
        facts = None  # no fact seen in a line that says something: kept in its own words
    try:
        done = yield _parts_stored(ports, store, entry_id, found)
        memory_ids, merged = [item["id"] for item in found], []
        if facts is None:
            texts = [] if found or VERBATIM_PART in done else [(VERBATIM_PART, entry["content"])]
        else:
            # by position in the entry's facts, not by wording: a re-run after a crash must
            # not store a fact again because a second extraction worded it differently
            texts = [(index, fact) for index, fact in enumerate(facts)
                     if index not in done and fact not in done.values()]
        result["reused"] += 1 if found and not texts else 0
        metadata = consolidation_metadata(entry)
        if facts is None and texts:
            metadata["verbatim"] = True
        for index, text in texts:
            part = dict(metadata) if index == VERBATIM_PART else {**metadata, "fact_index": index}
            stored = yield store.add(text, part)  # recallable at once (the owner's mirror)
            new_ids = [item["id"] for item in stored or ()]
            merged += [item["id"] for item in stored or () if item.get("event") == "DUPLICATE"]
            ConsolidationProgress(ports).record_part(entry_id, index, new_ids)  # before marking
            memory_ids += [i for i in new_ids if i not in memory_ids]
            result["stored"] += len(new_ids)
    except Exception as err:  # the store failed: keep the entry pending, retry next tick
        _fail(ports, result, f"consolidation of journal entry {entry_id} failed: {err}", err)
        return False
    # No yield from here on: the marking uses fresh state.
    _finish_entry(ports, entry_id, memory_ids, verbatim=facts is None and bool(texts),
                  merged=merged)
    result["consolidated"].append(entry_id)
    return True


@defer.inlineCallbacks
def _consolidate_batch(ports, store, batch, result):
    """Store `batch` (see `run_sleep_consolidation`), filling in `result`."""
    existing = yield _stored_already(ports, store, batch, result)
    if existing is None:
        return
    verbatim = yield _extract_facts_for(ports, batch, existing, result)
    # Store, entry by entry, each read fresh (the stores before it yielded).
    for entry_id in [entry["id"] for entry in batch]:
        if Mode(ports).recorded() == "awake":
            result["interrupted"] = "woken"  # a forced wake: the next sleep goes on from here
            return
        journal = Journal(ports)
        entry = journal.entry(entry_id)
        if entry is None or entry_id in journal.consolidated_ids():
            continue  # deleted, or consolidated meanwhile
        stored = yield _store_entry(ports, store, entry, existing[entry_id],
                                    entry_id in verbatim, result)
        if not stored:
            return
