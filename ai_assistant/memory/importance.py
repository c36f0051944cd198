"""
Importance: how much a journal entry matters, and how much has piled up since the last reflection.

Two tiers (seed 000, "Importance Scoring"):

- `score_importance_heuristic` runs at once when an entry is written, with no LLM. Its arithmetic
  is the seed's, exactly - including that keywords are *substring* matches ("quest" also scores
  "question", "war" also scores "reward").
- `score_pending_entries` runs during the compacting phase of sleep and upgrades heuristic scores
  with an LLM judgement (`importance_method` "heuristic" -> "llm").

Batching (seed 000 says "3 per tick", seed 002 asks for "multi-entry batch processing"): a tick
makes ONE LLM call that scores a batch of the oldest heuristic entries. The batch holds at most
`journal.scoring_max_per_tick` entries (the seed's 3) and never more than
`journal.scoring_batch_size` (a bound on the prompt). Raise `scoring_max_per_tick` to drain a
backlog faster; a tick stays one short call either way.

Fact extraction rides on the same call. Consolidation (seed 002 §3.2) needs the objective world
facts of each entry, extracted under ASSISTANT_FACT_EXTRACTION_PROMPT's persona rules; asking
for them next to the score costs one call per batch instead of one mem0 extraction call (with
a ~9,000-token prompt) per entry. The facts are kept on the entry until consolidation stores
them without further inference:

    entry["facts"] = ["Alice prefers formal address."]   # persona-filtered, may be empty
    entry["facts_method"] = "llm"

Facts are asked for only where they are still useful and the LLM sees the whole text: entries
not yet consolidated whose content fits the prompt's cut (`SCORING_CONTENT_CHARS`); the others
are marked "(score only)" and consolidation extracts theirs from the full text. A reply with
scores but no facts is fine: consolidation then extracts them in one batched call.

Failed attempts are counted per entry (document "importance_scoring",
`{"attempts": {entry_id: n}}`): consolidation waits for an entry's LLM score only while fewer
than `journal.scoring_max_attempts` attempts have failed, so an unreachable LLM or an entry the
model keeps skipping cannot hold the compacting phase forever.

This module also keeps the reflection state (document "reflection_state"), because what it
tracks is accumulated importance (seed 000, "Reflection State"):

    {"cumulative_importance": 0.0, "threshold": 150, "last_reflection_time": None,
     "reflection_count": 0, "entries_since_reflection": [41, 42]}

`threshold` mirrors the `reflection.threshold` setting (per-NPC overrides go through settings),
so changing the setting takes effect at once.
"""

import re

from twisted.internet import defer

from ai_assistant.memory.persona import ASSISTANT_FACT_EXTRACTION_PROMPT, is_self_referential
from ai_assistant.plumbing.ports import iso
from ai_assistant.plumbing.replies import find_json

REFLECTION_DOC = "reflection_state"
SCORING_DOC = "importance_scoring"

# Seed 000, `score_importance_heuristic`.
SOURCE_MODIFIERS = {
    "direct": 2,
    "observation": 1,
    "inference": 0,
    "environmental": -1,
}
HIGH_KEYWORDS = (
    "player", "conflict", "discovery", "secret", "revealed",
    "attack", "danger", "important", "urgent", "critical",
    "death", "birth", "marriage", "betrayal", "alliance",
    "war", "peace", "treasure", "quest",
)  # fmt: skip
LOW_KEYWORDS = ("routine", "walked", "moved", "entered", "ordinary")
MIN_IMPORTANCE = 1
MAX_IMPORTANCE = 10


def clamp_importance(value):
    """
    Args:
        value (int or float): Any number.

    Returns:
        int: Rounded and clamped to 1-10.
    """
    return max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, int(round(value))))


def score_importance_heuristic(content, source_type="observation", tags=None):
    """
    Score an entry at once, without an LLM (seed 000, tier 1; the arithmetic is the seed's).

    Base 5; source type direct +2, observation +1, inference 0, environmental -1; +2 for each
    high keyword found as a substring (at most +4); -1 for each low keyword; +1 when longer than
    200 characters; +1 when it holds "!" or "?"; clamped to 1-10.

    Args:
        content (str): The entry text.
        source_type (str): direct, observation, inference or environmental.
        tags (list, optional): Unused by the seed's rule; accepted so callers can pass them.

    Returns:
        int: 1-10.
    """
    text = content.lower()
    score = 5
    score += SOURCE_MODIFIERS.get(source_type, 0)
    keyword_bonus = sum(2 for keyword in HIGH_KEYWORDS if keyword in text)
    score += min(keyword_bonus, 4)
    score -= sum(1 for keyword in LOW_KEYWORDS if keyword in text)
    if len(content) > 200:
        score += 1
    if "!" in content or "?" in content:
        score += 1
    return max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, score))


# ----------------------------------------------------------------------------------------------
# Tier 2: LLM scoring during the compacting phase

SCORING_SYSTEM_PROMPT = (
    "You rate how significant events are for a character's long-term memory. "
    "1 = mundane routine, 5 = moderately notable, "
    "10 = extremely significant (major revelation, emotional event). "
    "You also list the objective facts each event states."
)
SCORING_CONTENT_CHARS = 1000  # each entry is cut to this much in the prompt
SCORE_ONLY_MARK = "(score only)"
FACT_MAX_CHARS = 500  # a longer "fact" is cut: it is a paragraph, not a fact
FACT_RULES = (
    ASSISTANT_FACT_EXTRACTION_PROMPT.strip()
    + "\nWrite each fact as one short, self-contained sentence that names who or what it is "
    "about (\"Alice\", not \"she\" or \"you\"). An event that states no such fact gets an "
    "empty list."
)


def build_scoring_prompt(entries, facts_for=None):
    """
    Args:
        entries (list): Journal entries to score together.
        facts_for (iterable, optional): Ids of the entries whose facts are wanted too; the
            others are marked "(score only)". Default: all of them.

    Returns:
        list: Chat messages asking, as JSON, for one 1-10 score per entry id and the objective
        facts of each entry (under ASSISTANT_FACT_EXTRACTION_PROMPT's persona rules).
    """
    wanted = None if facts_for is None else set(facts_for)
    lines = []
    for entry in entries:
        mark = "" if wanted is None or entry["id"] in wanted else f" {SCORE_ONLY_MARK}"
        lines.append(f"[{entry['id']}]{mark} {entry['content'][:SCORING_CONTENT_CHARS]}")
    user = (
        "Rate the significance of each event below from 1 to 10, and list the objective facts "
        f"it states (not for events marked {SCORE_ONLY_MARK}).\n\n"
        + "\n".join(lines)
        + "\n\nFacts:\n"
        + FACT_RULES
        + '\n\nAnswer with JSON only: {"scores": [{"id": <id>, "score": <1-10>, '
        '"facts": ["<fact>", ...]}, ...]} with one item per event.'
    )
    return [
        {"role": "system", "content": SCORING_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


_LINE_SCORE = re.compile(r"^\W*(?:id\W*)?#?(\d+)\W*?[\]:=)\-]\s*(?:score\W*)?(\d+(?:\.\d+)?)")
_BARE_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*\.?\s*$")
_LIST_KEYS = ("scores", "entries", "events", "results", "items")


def _as_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = re.search(r"\d+(?:\.\d+)?", value)
        return float(match.group()) if match else None
    return None


def _as_entry_id(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = re.search(r"\d+", value)
        return int(match.group()) if match else None
    return None


def _match_id(value, wanted):
    """The asked-about id `value` stands for (ids may be ints or strings), or None."""
    if value in wanted:
        return value
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value) in wanted:
        return str(value)
    number = _as_entry_id(value)
    return number if number in wanted else None


def _reply_items(data):
    """
    The per-entry items of a parsed JSON reply, as dicts with an "id".

    Accepts `{"scores": [...]}` (or "entries", "events", "results", "items"), a bare list, and
    `{"<id>": <score or item>, ...}`.
    """
    if isinstance(data, dict) and ("id" in data or "entry_id" in data):
        return [data]  # a single item
    if isinstance(data, dict):
        for key in _LIST_KEYS:
            if isinstance(data.get(key), list):
                return [item for item in data[key] if isinstance(item, dict)]
        items = []
        for key, value in data.items():
            if isinstance(value, dict):
                items.append({"id": key, **value})
            else:
                items.append({"id": key, "score": value})
        return items
    if isinstance(data, list):
        return [item for item in data if isinstance(item, dict)]
    return []


def _item_id(item, wanted):
    return _match_id(item.get("id", item.get("entry_id")), wanted)


def parse_scores(text, expected_ids):
    """
    Read per-entry scores from an LLM reply, as robustly as is safe.

    Accepts `{"scores": [{"id": 3, "score": 7, "facts": [...]}, ...]}`, a bare list of such
    items, `{"3": 7, ...}`, `{"3": {"score": 7}, ...}`, lines like `3: 7` / `#3 - 7` / `[3] 7`,
    and - when exactly one entry was asked about - a bare number (the seed's "Return only the
    integer score").

    Args:
        text (str): The reply.
        expected_ids (iterable): The ids that were asked about; anything else is ignored.

    Returns:
        dict: `{entry_id: importance}` with importance clamped to 1-10 (may be empty).
    """
    expected = list(expected_ids)
    wanted = set(expected)
    scores = {}
    if not text:
        return scores

    for item in _reply_items(find_json(text)):
        entry_id = _item_id(item, wanted)
        score = _as_number(item.get("score", item.get("importance")))
        if entry_id is not None and score is not None:
            scores[entry_id] = clamp_importance(score)
    if scores:
        return scores

    for line in text.splitlines():
        match = _LINE_SCORE.match(line.strip())
        entry_id = _match_id(int(match.group(1)), wanted) if match else None
        if entry_id is not None:
            scores[entry_id] = clamp_importance(float(match.group(2)))
    if not scores and len(expected) == 1:
        match = _BARE_NUMBER.match(text)
        if match:
            scores[expected[0]] = clamp_importance(float(match.group(1)))
    return scores


def _as_fact_list(value):
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return value
    return None


def parse_facts(text, expected_ids):
    """
    Read per-entry fact lists from an LLM reply (the scoring reply, or consolidation's
    extraction reply).

    An entry counts as answered only when its item holds a "facts" list (an empty list means
    "no facts in this event"); items without one are left out, so the caller can tell "no facts"
    from "not answered". When exactly one entry was asked about, mem0's own shape
    `{"facts": ["...", ...]}` is accepted too.

    Args:
        text (str): The reply.
        expected_ids (iterable): The ids that were asked about; anything else is ignored.

    Returns:
        dict: `{entry_id: [raw facts]}` (clean them with `clean_facts`).
    """
    expected = list(expected_ids)
    wanted = set(expected)
    facts = {}
    data = find_json(text or "")
    if (isinstance(data, dict) and isinstance(data.get("facts"), list)
            and "id" not in data and not any(key in data for key in _LIST_KEYS)):
        found = data["facts"]
        if all(isinstance(fact, str) for fact in found):
            # mem0's shape names no entry: it can only answer a one-entry question
            return {expected[0]: list(found)} if len(expected) == 1 else {}
        data = found  # {"facts": [{"id": 3, "facts": [...]}, ...]}
    for item in _reply_items(data):
        entry_id = _item_id(item, wanted)
        found = _as_fact_list(item.get("facts"))
        if entry_id is not None and found is not None:
            facts[entry_id] = found
    return facts


def clean_facts(raw_facts, max_facts=10):
    """
    Tidy the facts an LLM extracted and apply persona protection.

    Args:
        raw_facts (list): Strings (or dicts with "fact"/"text") from the reply.
        max_facts (int): Most facts kept (`memory.max_facts_per_entry`).

    Returns:
        tuple: `(kept, rejected)`: kept facts (stripped, one line, at most FACT_MAX_CHARS,
        duplicates dropped, in order) and the self-referential ones dropped by
        `persona.is_self_referential`.
    """
    kept, rejected, seen = [], [], set()
    for fact in raw_facts or ():
        if isinstance(fact, dict):
            fact = fact.get("fact") or fact.get("text")
        if not isinstance(fact, str):
            continue
        fact = " ".join(fact.split())[:FACT_MAX_CHARS]
        if not fact or fact.lower() in seen:
            continue
        if is_self_referential(fact):
            rejected.append(fact)
            continue
        seen.add(fact.lower())
        kept.append(fact)
    return kept[: max(0, int(max_facts))], rejected


def extracted_facts(entry):
    """
    Args:
        entry (dict): A journal entry.

    Returns:
        list or None: The facts an LLM extracted for it (possibly empty), or None when none
        were extracted yet.
    """
    facts = entry.get("facts")
    if entry.get("facts_method") == "llm" and isinstance(facts, list):
        return facts
    return None


def store_facts(ports, entry, raw_facts):
    """
    Clean `raw_facts` and keep them on `entry` (`facts`, `facts_method` "llm"). The caller
    saves the journal.

    Returns:
        list: The self-referential facts that were rejected.
    """
    max_facts = ports.settings.get("memory.max_facts_per_entry")
    kept, rejected = clean_facts(raw_facts, max_facts)
    entry["facts"] = kept
    entry["facts_method"] = "llm"
    return rejected


# ----------------------------------------------------------------------------------------------
# Failed scoring attempts (so consolidation knows how long to wait for a score)


def get_scoring_attempts(ports):
    """
    Returns:
        dict: `{entry_id: failed attempts}` from the "importance_scoring" document.
    """
    doc = ports.state.get(SCORING_DOC, {}) or {}
    attempts = doc.get("attempts")
    return attempts if isinstance(attempts, dict) else {}


def _save_scoring_attempts(ports, failed_ids, succeeded_ids=(), present_ids=None):
    """Count failed attempts; forget scored entries and (given `present_ids`) deleted ones."""
    doc = ports.state.get(SCORING_DOC, {}) or {}
    attempts = {key: value for key, value in get_scoring_attempts(ports).items()
                if key not in succeeded_ids and (present_ids is None or key in present_ids)}
    for entry_id in failed_ids:
        attempts[entry_id] = attempts.get(entry_id, 0) + 1
    doc["attempts"] = attempts
    ports.state.set(SCORING_DOC, doc)


def llm_scoring_enabled(ports):
    """True when the compacting phase upgrades heuristic scores (an LLM and a batch > 0)."""
    settings = ports.settings
    return (not ports.mechanical
            and int(settings.get("journal.scoring_max_per_tick")) > 0
            and int(settings.get("journal.scoring_batch_size")) > 0)  # fmt: skip


def awaiting_llm_score(ports, entry, attempts=None):
    """
    Should consolidation wait for this entry's LLM score?

    Yes while its score is still the heuristic one, LLM scoring is on, and fewer than
    `journal.scoring_max_attempts` scoring attempts for it have failed: storing it earlier
    would put the heuristic importance into its memories' metadata for good and miss the facts
    the scoring call extracts.

    Args:
        ports (AssistantPorts): The assistant.
        entry (dict): A journal entry.
        attempts (dict, optional): `get_scoring_attempts(ports)`, when the caller has it.

    Returns:
        bool
    """
    if entry.get("importance_method") != "heuristic" or not llm_scoring_enabled(ports):
        return False
    if attempts is None:
        attempts = get_scoring_attempts(ports)
    max_attempts = int(ports.settings.get("journal.scoring_max_attempts"))
    return attempts.get(entry.get("id"), 0) < max_attempts


@defer.inlineCallbacks
def score_pending_entries(ports, max_per_tick=None):
    """
    Upgrade heuristic importance scores, and extract facts, with one batched LLM call.

    The oldest entries whose `importance_method` is "heuristic" go to the LLM together. Each
    score it returns (clamped to 1-10) replaces the heuristic one and the method becomes "llm".
    The facts it lists for an unconsolidated entry are persona-filtered and kept on the entry
    (`facts`, `facts_method` "llm") for consolidation to store. Entries it did not score, or a
    failed or garbled reply, keep their heuristic scores, count one failed attempt, and are
    retried next tick. Entries deleted (or re-scored by hand) while the call ran are skipped.
    When an entry still counts toward the next reflection, the cumulative importance follows
    the new score.

    Args:
        ports (AssistantPorts): The assistant.
        max_per_tick (int, optional): Entries scored this tick; default
            `journal.scoring_max_per_tick`, bounded by `journal.scoring_batch_size`.

    Returns:
        Deferred[dict]: `{"scored": [ids], "skipped": [ids], "unscored": [ids],
        "with_facts": [ids], "facts_rejected": n, "remaining": int, "error": str or None,
        "mechanical": bool}`; never errbacks.
    """
    from ai_assistant.memory import journal as journal_module  # journal imports this module

    settings = ports.settings
    if max_per_tick is None:
        max_per_tick = settings.get("journal.scoring_max_per_tick")
    batch_size = max(0, min(int(max_per_tick), int(settings.get("journal.scoring_batch_size"))))
    journal = journal_module.get_journal(ports)
    pending = [entry for entry in journal["entries"]
               if entry.get("importance_method") == "heuristic"]  # fmt: skip
    report = {
        "scored": [],
        "skipped": [],
        "unscored": [],
        "with_facts": [],
        "facts_rejected": 0,
        "remaining": len(pending),
        "error": None,
        "mechanical": ports.mechanical,
    }
    if ports.mechanical:
        ports.log(f"{ports.name}: importance scoring skipped (mechanical mode, no LLM)")
        return report
    batch = pending[:batch_size]
    if not batch:
        return report

    asked = [entry["id"] for entry in batch]
    consolidated = set(journal["consolidated_entry_ids"])
    # Facts only where consolidation still needs them, and only from text the LLM sees whole.
    facts_for = [entry["id"] for entry in batch
                 if entry["id"] not in consolidated
                 and len(entry.get("content") or "") <= SCORING_CONTENT_CHARS]  # fmt: skip
    try:
        reply = yield ports.llm.complete(
            build_scoring_prompt(batch, facts_for), purpose="importance", temperature=0.0
        )
    except Exception as err:  # noqa: BLE001 - any failure: keep heuristic scores, retry later
        report["error"] = f"{type(err).__name__}: {err}"
        report["unscored"] = asked
        _save_scoring_attempts(ports, asked)
        ports.log(f"{ports.name}: importance scoring failed, will retry ({report['error']})")
        return report

    text = getattr(reply, "content", None) or ""
    scores = parse_scores(text, asked)
    if not scores:
        report["error"] = "reply had no usable scores"
        report["unscored"] = asked
        _save_scoring_attempts(ports, asked)
        ports.log(f"{ports.name}: importance scoring reply unusable, will retry")
        return report
    facts = parse_facts(text, facts_for)

    # From here on no yield: read fresh state, change it, write it back.
    journal = journal_module.get_journal(ports)
    by_id = {entry["id"]: entry for entry in journal["entries"]}
    consolidated = set(journal["consolidated_entry_ids"])
    reflection = get_reflection_state(ports)
    window = set(reflection["entries_since_reflection"])
    for entry_id in asked:
        entry = by_id.get(entry_id)
        if entry is None or entry.get("importance_method") != "heuristic":
            report["skipped"].append(entry_id)
            continue
        if entry_id in facts and entry_id not in consolidated:
            report["facts_rejected"] += len(store_facts(ports, entry, facts[entry_id]))
            report["with_facts"].append(entry_id)
        if entry_id not in scores:
            report["unscored"].append(entry_id)
            continue
        old, new = entry.get("importance", 0), scores[entry_id]
        entry["importance"] = new
        entry["importance_method"] = "llm"
        if entry_id in window:
            reflection["cumulative_importance"] = max(
                0.0, reflection["cumulative_importance"] + new - old
            )
        report["scored"].append(entry_id)
    journal_module.save_journal(ports, journal)
    save_reflection_state(ports, reflection)
    _save_scoring_attempts(ports, report["unscored"], report["scored"], set(by_id))
    if report["facts_rejected"]:
        ports.log(f"{ports.name}: dropped {report['facts_rejected']} self-referential "
                  "fact(s) from the scoring reply")  # fmt: skip
    report["remaining"] = sum(
        1 for entry in journal["entries"] if entry.get("importance_method") == "heuristic"
    )
    return report


# ----------------------------------------------------------------------------------------------
# Reflection state


def new_reflection_state(threshold=150):
    """A fresh reflection state document."""
    return {
        "cumulative_importance": 0.0,
        "threshold": threshold,
        "last_reflection_time": None,
        "reflection_count": 0,
        "entries_since_reflection": [],
    }


def get_reflection_state(ports):
    """
    Args:
        ports (AssistantPorts): The assistant.

    Returns:
        dict: The "reflection_state" document, missing keys filled in and `threshold` taken
        from the `reflection.threshold` setting. Call `save_reflection_state` after changing it.
    """
    threshold = ports.settings.get("reflection.threshold")
    state = ports.state.get(REFLECTION_DOC, None)
    if not isinstance(state, dict):
        state = new_reflection_state(threshold)
    for key, value in new_reflection_state(threshold).items():
        state.setdefault(key, value)
    state["threshold"] = threshold
    return state


def save_reflection_state(ports, state):
    """Write the reflection state back."""
    ports.state.set(REFLECTION_DOC, state)


def update_reflection_state(ports, importance, entry_id):
    """
    Count one new journal entry toward the next reflection (seed: `update_reflection_state`).

    Args:
        ports (AssistantPorts): The assistant.
        importance (int): The entry's importance.
        entry_id (int): The entry's id.

    Returns:
        dict: The updated state.
    """
    state = get_reflection_state(ports)
    state["cumulative_importance"] = float(state["cumulative_importance"]) + importance
    if entry_id not in state["entries_since_reflection"]:
        state["entries_since_reflection"].append(entry_id)
    save_reflection_state(ports, state)
    return state


def check_reflection_trigger(ports):
    """
    Args:
        ports (AssistantPorts): The assistant.

    Returns:
        bool: True when the importance gathered since the last reflection reached the
        threshold (seed: cumulative_importance >= 150).
    """
    state = get_reflection_state(ports)
    return state["cumulative_importance"] >= state["threshold"]


def reset_reflection_state(ports, reflected_ids=None, reflected_importance=None):
    """
    Start a new reflection window after a reflection (seed: `reset_reflection_state`).

    The threshold is kept, the count goes up by one and the time is recorded. When the caller
    says which entries and how much importance the reflection covered, entries written while it
    was running stay counted toward the next one; otherwise the window is cleared as in the seed.

    Args:
        ports (AssistantPorts): The assistant.
        reflected_ids (iterable, optional): Entry ids the reflection used.
        reflected_importance (float, optional): The cumulative importance it started from.

    Returns:
        dict: The new state.
    """
    state = get_reflection_state(ports)
    if reflected_ids is None:
        remaining_ids, remaining_importance = [], 0.0
    else:
        done = set(reflected_ids)
        remaining_ids = [i for i in state["entries_since_reflection"] if i not in done]
        remaining_importance = max(
            0.0, float(state["cumulative_importance"]) - float(reflected_importance or 0.0)
        )
    new_state = {
        "cumulative_importance": remaining_importance,
        "threshold": state["threshold"],
        "last_reflection_time": iso(ports.clock.now()),
        "reflection_count": int(state["reflection_count"]) + 1,
        "entries_since_reflection": remaining_ids,
    }
    save_reflection_state(ports, new_state)
    return new_state
