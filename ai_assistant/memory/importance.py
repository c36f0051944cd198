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

This module also keeps the reflection state (document "reflection_state"), because what it
tracks is accumulated importance (seed 000, "Reflection State"):

    {"cumulative_importance": 0.0, "threshold": 150, "last_reflection_time": None,
     "reflection_count": 0, "entries_since_reflection": [41, 42]}

`threshold` mirrors the `reflection.threshold` setting (per-NPC overrides go through settings),
so changing the setting takes effect at once.
"""

import json
import re

from twisted.internet import defer

from ai_assistant.ports import iso

REFLECTION_DOC = "reflection_state"

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
    "10 = extremely significant (major revelation, emotional event)."
)
SCORING_CONTENT_CHARS = 1000  # each entry is cut to this much in the prompt


def build_scoring_prompt(entries):
    """
    Args:
        entries (list): Journal entries to score together.

    Returns:
        list: Chat messages asking for one 1-10 score per entry id, as JSON.
    """
    lines = [f"[{entry['id']}] {entry['content'][:SCORING_CONTENT_CHARS]}" for entry in entries]
    user = (
        "Rate the significance of each event below from 1 to 10.\n\n"
        + "\n".join(lines)
        + '\n\nAnswer with JSON only: {"scores": [{"id": <id>, "score": <1-10>}, ...]} '
        "with one item per event."
    )
    return [
        {"role": "system", "content": SCORING_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


_LINE_SCORE = re.compile(r"^\W*(?:id\W*)?#?(\d+)\W*?[\]:=)\-]\s*(?:score\W*)?(\d+(?:\.\d+)?)")
_BARE_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*\.?\s*$")


def _extract_json(text):
    """The first JSON object or array in `text` (code fences and chatter around it ignored)."""
    text = text.strip()
    if text.startswith("```"):
        text = re.sub(r"^```\w*\s*|\s*```$", "", text)
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if start != -1 and end > start:
            try:
                return json.loads(text[start : end + 1])
            except ValueError:
                continue
    return None


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


def parse_scores(text, expected_ids):
    """
    Read per-entry scores from an LLM reply, as robustly as is safe.

    Accepts `{"scores": [{"id": 3, "score": 7}, ...]}`, a bare list of such items,
    `{"3": 7, ...}`, lines like `3: 7` / `#3 - 7` / `[3] 7`, and - when exactly one entry was
    asked about - a bare number (the seed's "Return only the integer score").

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

    data = _extract_json(text)
    if isinstance(data, dict) and "scores" in data:
        data = data["scores"]
    if isinstance(data, dict):
        data = [{"id": key, "score": value} for key, value in data.items()]
    if isinstance(data, list):
        for item in data:
            if not isinstance(item, dict):
                continue
            entry_id = _as_entry_id(item.get("id", item.get("entry_id")))
            score = _as_number(item.get("score", item.get("importance")))
            if entry_id in wanted and score is not None:
                scores[entry_id] = clamp_importance(score)
        if scores:
            return scores

    for line in text.splitlines():
        match = _LINE_SCORE.match(line.strip())
        if match and int(match.group(1)) in wanted:
            scores[int(match.group(1))] = clamp_importance(float(match.group(2)))
    if not scores and len(expected) == 1:
        match = _BARE_NUMBER.match(text)
        if match:
            scores[expected[0]] = clamp_importance(float(match.group(1)))
    return scores


@defer.inlineCallbacks
def score_pending_entries(ports, max_per_tick=None):
    """
    Upgrade heuristic importance scores with one batched LLM call (compacting phase).

    The oldest entries whose `importance_method` is "heuristic" go to the LLM together. Each
    score it returns (clamped to 1-10) replaces the heuristic one and the method becomes "llm".
    Entries it did not score, or a failed or garbled reply, keep their heuristic scores and are
    retried next tick. Entries deleted (or re-scored by hand) while the call ran are skipped.
    When an entry still counts toward the next reflection, the cumulative importance follows
    the new score.

    Args:
        ports (AssistantPorts): The assistant.
        max_per_tick (int, optional): Entries scored this tick; default
            `journal.scoring_max_per_tick`, bounded by `journal.scoring_batch_size`.

    Returns:
        Deferred[dict]: `{"scored": [ids], "skipped": [ids], "unscored": [ids],
        "remaining": int, "error": str or None, "mechanical": bool}`; never errbacks.
    """
    from ai_assistant.memory import journal as journal_module  # journal imports this module

    settings = ports.settings
    if max_per_tick is None:
        max_per_tick = settings.get("journal.scoring_max_per_tick", 3)
    batch_size = max(0, min(int(max_per_tick), int(settings.get("journal.scoring_batch_size", 10))))
    pending = [
        entry
        for entry in journal_module.get_journal(ports)["entries"]
        if entry.get("importance_method") == "heuristic"
    ]
    report = {
        "scored": [],
        "skipped": [],
        "unscored": [],
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
    try:
        reply = yield ports.llm.complete(
            build_scoring_prompt(batch), purpose="importance", temperature=0.0
        )
    except Exception as err:  # noqa: BLE001 - any failure: keep heuristic scores, retry later
        report["error"] = f"{type(err).__name__}: {err}"
        report["unscored"] = asked
        ports.log(f"{ports.name}: importance scoring failed, will retry ({report['error']})")
        return report

    scores = parse_scores(getattr(reply, "content", None) or "", asked)
    if not scores:
        report["error"] = "reply had no usable scores"
        report["unscored"] = asked
        ports.log(f"{ports.name}: importance scoring reply unusable, will retry")
        return report

    # From here on no yield: read fresh state, change it, write it back.
    journal = journal_module.get_journal(ports)
    by_id = {entry["id"]: entry for entry in journal["entries"]}
    reflection = get_reflection_state(ports)
    window = set(reflection["entries_since_reflection"])
    for entry_id in asked:
        entry = by_id.get(entry_id)
        if entry is None or entry.get("importance_method") != "heuristic":
            report["skipped"].append(entry_id)
            continue
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
    threshold = ports.settings.get("reflection.threshold", 150)
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
