"""
Fact extraction: the objective world facts of journal entries, for consolidation to store.

Consolidation (journal -> semantic memory) stores each entry's objective world facts, extracted
under ASSISTANT_FACT_EXTRACTION_PROMPT's persona rules, one memory each, without mem0 inference.
They are extracted in one of two ways, both parsed and kept here:

- riding on the LLM importance scoring call (`ai_assistant.sleep.scoring`): asking for them next
  to the score costs one call per batch instead of one mem0 extraction call (with a
  ~9,000-token prompt) per entry;
- for entries that call gave no facts for (importance set by hand, a reply without facts,
  entries too long for the scoring prompt), consolidation asks for all of a tick's entries in
  ONE extraction call (`build_extraction_prompt`, `extract_missing_facts`).

Either way the facts are kept on the journal entry until consolidation stores them without
further inference::

    entry["facts"] = ["Alice prefers formal address."]   # persona-filtered, may be empty
    entry["facts_method"] = "llm"
    entry["facts_rejected"] = 1   # only when persona protection dropped some

The per-entry reply parsing (`reply_items`, `item_entry_id`) is shared with the scoring step,
whose reply holds a score and a fact list per entry.
"""

import re

from twisted.internet import defer

from ai_assistant.memory.journal import Journal
from ai_assistant.memory.persona import ASSISTANT_FACT_EXTRACTION_PROMPT, is_self_referential
from ai_assistant.plumbing.quoting import quote_untrusted, with_data_rule
from ai_assistant.plumbing.replies import find_json

FACT_MAX_CHARS = 500  # a longer "fact" is cut: it is a paragraph, not a fact
FACT_RULES = (
    ASSISTANT_FACT_EXTRACTION_PROMPT.strip()
    + "\nWrite each fact as one short, self-contained sentence that names who or what it is "
    "about (\"Alice\", not \"she\" or \"you\"). An event that states no such fact gets an "
    "empty list."
)
EXTRACTION_SYSTEM_PROMPT = with_data_rule(
    "You extract the objective facts that journal entries of a game character state, for "
    "its long-term memory."
)
# The keys under which a reply may list its per-entry items.
REPLY_LIST_KEYS = ("scores", "entries", "events", "results", "items")


# ----------------------------------------------------------------------------------------------
# Per-entry replies (shared with the scoring step)


def as_entry_id(value):
    """An int entry id read from a reply value (an int, a whole float or digits in a string)."""
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


def match_entry_id(value, wanted):
    """The asked-about id `value` stands for (ids may be ints or strings), or None."""
    if value in wanted:
        return value
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value) in wanted:
        return str(value)
    number = as_entry_id(value)
    return number if number in wanted else None


def reply_items(data):
    """
    The per-entry items of a parsed JSON reply, as dicts with an "id".

    Accepts `{"scores": [...]}` (or "entries", "events", "results", "items"), a bare list, and
    `{"<id>": <score or item>, ...}`.
    """
    if isinstance(data, dict) and ("id" in data or "entry_id" in data):
        return [data]  # a single item
    if isinstance(data, dict):
        for key in REPLY_LIST_KEYS:
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


def item_entry_id(item, wanted):
    """The asked-about entry id a reply item names, or None."""
    return match_entry_id(item.get("id", item.get("entry_id")), wanted)


# ----------------------------------------------------------------------------------------------
# Reading and keeping facts


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
            and "id" not in data and not any(key in data for key in REPLY_LIST_KEYS)):
        found = data["facts"]
        if all(isinstance(fact, str) for fact in found):
            # mem0's shape names no entry: it can only answer a one-entry question
            return {expected[0]: list(found)} if len(expected) == 1 else {}
        data = found  # {"facts": [{"id": 3, "facts": [...]}, ...]}
    for item in reply_items(data):
        entry_id = item_entry_id(item, wanted)
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
    Clean `raw_facts` and keep them on `entry` (`facts`, `facts_method` "llm"): a journal
    entry, or the fields the caller then sets on one (`Journal.update`).

    Returns:
        list: The self-referential facts that were rejected.
    """
    max_facts = ports.settings.get("memory.max_facts_per_entry")
    kept, rejected = clean_facts(raw_facts, max_facts)
    entry["facts"] = kept
    entry["facts_method"] = "llm"
    if rejected:  # so consolidation does not keep the words those facts were dropped from
        entry["facts_rejected"] = len(rejected)
    else:
        entry.pop("facts_rejected", None)
    return rejected


# ----------------------------------------------------------------------------------------------
# Consolidation's own extraction (entries the scoring call gave no facts for)


def build_extraction_prompt(entries):
    """
    One prompt for the facts of several journal entries (their full text).

    Args:
        entries (list): Journal entries.

    Returns:
        list: Chat messages asking for `{"entries": [{"id", "facts": [...]}]}` as JSON.
    """
    lines = [f"[{entry['id']}]\n" + quote_untrusted(entry["content"], f"ENTRY {entry['id']}")
             for entry in entries]
    user = (
        "List the objective facts each journal entry below states.\n\n"
        + "\n".join(lines)
        + "\n\nFacts:\n"
        + FACT_RULES
        + '\n\nAnswer with JSON only: {"entries": [{"id": <id>, "facts": ["<fact>", ...]}, '
        "...]} with one item per entry."
    )
    return [
        {"role": "system", "content": EXTRACTION_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


@defer.inlineCallbacks
def extract_missing_facts(ports, entries):
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
    facts = parse_facts(getattr(reply, "content", None) or "", asked)
    if not facts:
        raise ValueError("fact extraction reply had no usable facts")
    # No yield from here on: fresh state.
    journal = Journal(ports)
    changes = {}
    rejected = 0
    for entry in journal.entries():
        if entry["id"] in facts:
            rejected += len(store_facts(ports, changes.setdefault(entry["id"], {}),
                                        facts[entry["id"]]))
    journal.update(changes)
    if rejected:
        ports.log(f"{ports.name}: dropped {rejected} self-referential extracted fact(s)")
    return set(facts)
