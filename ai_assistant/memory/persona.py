"""
Persona protection: keep the assistant's memories about the world, not about itself.

One module, used by reflection (insights), session memory (facts and patterns) and semantic fact
extraction, so the three agree on what counts as self-reference (the specification's persona
protection for insights and for session memory, and its `ASSISTANT_FACT_EXTRACTION_PROMPT`).

It also keeps the versions of the guidelines the assistant writes for itself: every change is
numbered and kept with its text, so admins see them and can revert one (`versions`, `revert`;
`@assistant/persona/history` and `/revert`).
"""

import re

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso

# The specification's patterns, plus the first-person action forms its session-memory examples
# reject ("I helped the player", "The assistant suggested...").
SELF_REFERENCE_PATTERNS = (
    r"\bI should\b",
    r"\bmy behavior\b",
    r"\bmy behaviour\b",
    r"\bthe assistant\b",
    r"\bI need to\b",
    r"\bI will\b",
    r"\bI (?:helped|did|said|suggested|told|gave|made|decided|think|felt|feel|am|was)\b",
    r"\bI'm\b",
    r"\bI've\b",
    r"\bmy (?:personality|identity|role|purpose)\b",
)

_SELF_REFERENCE = re.compile("|".join(SELF_REFERENCE_PATTERNS), re.IGNORECASE)

SELF_REFERENCE_ERROR = "Content appears to reference assistant actions or identity"
SELF_REFERENCE_SUGGESTION = (
    "Session memory should contain facts about the WORLD, PLAYERS, "
    "or EVENTS - not what you did. Rephrase in third-person."
)

ASSISTANT_FACT_EXTRACTION_PROMPT = """
Extract only objective facts about the world, users, and events.
Use third-person, factual language focused on WORLD STATE, not assistant behavior.

NEVER extract:
- Assistant actions ("The assistant helped", "I did X")
- Assistant personality or identity information

ALWAYS extract:
- World state facts ("The tavern is in the north wing")
- User/player information ("Player Alice prefers formal address")
"""


def is_self_referential(text):
    """
    Args:
        text (str): An insight, fact or pattern.

    Returns:
        bool: True if it talks about the assistant itself rather than the world.
    """
    return bool(text) and _SELF_REFERENCE.search(text) is not None


def filter_insights(insights):
    """
    Drop self-referential insights.

    Args:
        insights (list): Strings, or dicts with an `"insight"` (or `"text"`) key.

    Returns:
        tuple: `(kept, rejected)` lists, in input order.
    """
    kept, rejected = [], []
    for item in insights:
        text = item if isinstance(item, str) else (item.get("insight") or item.get("text") or "")
        (rejected if is_self_referential(text) else kept).append(item)
    return kept, rejected


# ----------------------------------------------------------------------------------------------
# Versions of the assistant's own guidelines (`documents.SYSTEM_PROMPT_HISTORY`)
#
# Every change the assistant makes to its guidelines (`update_system_prompt`), every change an
# admin makes to its persona (`@assistant/persona`) and every revert an admin orders
# (`@assistant/persona/revert`) is one numbered version: `{"version", "time", "by", "reason",
# "prompt", "previous", "old_len", "new_len", "which"}`, where `which` is the text changed
# ("guidelines", the assistant's own; "persona", the admins'), `prompt` the text set and
# `previous` the text it replaced (None: none). Numbers only grow, so they stay the same when
# the oldest versions are dropped (`workspace.system_prompt.history_max`).
WHICH = {"guidelines": documents.ASSISTANT_SYSTEM_PROMPT, "persona": documents.USER_SYSTEM_PROMPT}


class PersonaVersionError(ValueError):
    """A revert that cannot be done (unknown version, its text not kept); the message says why."""


def _history(ports):
    history = ports.state.get(documents.SYSTEM_PROMPT_HISTORY, None)
    return [entry for entry in history if isinstance(entry, dict)] if isinstance(
        history, list) else []


def record_version(ports, *, previous, prompt, reason, by, which="guidelines"):
    """
    Set the assistant's guidelines (or the admins' persona) to `prompt` and record it as a new
    version.

    Args:
        ports (AssistantPorts): The assistant.
        previous (str or None): The text replaced.
        prompt (str or None): The new text (None: no guidelines of its own).
        reason (str): Why (kept with the version).
        by (str): Who made the change: "assistant", or "admin <name>".
        which (str): "guidelines" (the assistant's own) or "persona" (the admins'). The first
            persona version is preceded by one that keeps the persona as it was, so that the
            first change can be undone too.

    Returns:
        dict: The version recorded.
    """
    history = _history(ports)
    first_persona = which == "persona" and not any(
        entry.get("which") == "persona" for entry in history)
    number = max([int(entry.get("version") or 0) for entry in history] or [0]) + 1
    if not any("version" in entry for entry in history):
        number = len(history) + 1  # continue an unnumbered history where it stands
    added = []
    if first_persona:
        added.append(_version(ports, number, previous, previous, by, which,
                              "the persona as it was before its first versioned change"))
        number += 1
    version = _version(ports, number, previous, prompt, by, which, reason)
    keep = max(int(ports.settings.get("workspace.system_prompt.history_max")), 1)
    ports.state.set(WHICH[which], prompt)
    ports.state.set(documents.SYSTEM_PROMPT_HISTORY, [*history, *added, version][-keep:])
    return version


def _version(ports, number, previous, prompt, by, which, reason):
    return {"version": number, "time": iso(ports.clock.now()), "by": by, "reason": reason,
            "prompt": prompt, "previous": previous, "old_len": len(previous or ""),
            "new_len": len(prompt or ""), "which": which}


def versions(ports):
    """
    The versions an admin may see and revert to, oldest first.

    Returns:
        list[dict]: `{"version", "time", "by", "reason", "prompt", "kept", "which"}`; the
        first is the text before the oldest kept change (its `version` one less), `kept` is
        False for an old-format change whose text was not kept.
    """
    history = _history(ports)
    listed = []
    for index, entry in enumerate(history, 1):
        number = int(entry.get("version") or index)
        if not listed:
            listed.append({"version": number - 1, "time": None, "by": None,
                           "reason": "before the oldest change kept",
                           "prompt": entry.get("previous"), "kept": "previous" in entry,
                           "which": entry.get("which") or "guidelines"})
        listed.append({"version": number, "time": entry.get("time") or entry.get("timestamp"),
                       "by": entry.get("by") or "assistant",
                       "reason": entry.get("reason") or entry.get("reasoning"),
                       "prompt": entry.get("prompt"), "kept": "prompt" in entry,
                       "which": entry.get("which") or "guidelines"})
    return listed


def revert(ports, number, by):
    """
    Put back the guidelines of version `number`, recorded as a new version.

    Args:
        ports (AssistantPorts): The assistant.
        number (int): A version of `versions(ports)`.
        by (str): Who orders it ("admin <name>").

    Returns:
        dict: The new version.

    Raises:
        PersonaVersionError: Unknown version, or its text was not kept.
    """
    known = {item["version"]: item for item in versions(ports)}
    if number not in known:
        choices = ", ".join(str(key) for key in sorted(known)) or "none yet"
        raise PersonaVersionError(f"no version {number}; versions: {choices}")
    if not known[number]["kept"]:
        raise PersonaVersionError(f"the text of version {number} was not kept")
    which = known[number]["which"]
    current = ports.state.get(WHICH[which], None)
    return record_version(ports, previous=current, prompt=known[number]["prompt"],
                          reason=f"reverted to version {number}", by=by, which=which)
