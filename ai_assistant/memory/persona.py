"""
Persona protection: keep the assistant's memories about the world, not about itself.

One module, used by reflection (insights), session memory (facts and patterns) and semantic fact
extraction, so the three agree on what counts as self-reference (the specification's persona
protection for insights and for session memory, and its `ASSISTANT_FACT_EXTRACTION_PROMPT`).

It also owns who the assistant is told to be (`Persona`): the guidelines it writes for itself,
whose every change is numbered and kept with its text, so admins see them and can revert one
(`@assistant/persona/history` and `/revert`), and the admins' own instructions.
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
# Who the assistant is: its own guidelines and the admins' instructions
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


def admin_instructions_attribute(text):
    """
    The `(Attribute name, value)` that gives an assistant made from a prototype its admins'
    instructions (`prototypes.assistant_prototype`).
    """
    return str(documents.USER_SYSTEM_PROMPT), text


class Persona:
    """
    Who the assistant is told to be, read fresh from its state on every call.

    It owns three documents: `documents.ASSISTANT_SYSTEM_PROMPT` (the guidelines the assistant
    writes for itself), `documents.USER_SYSTEM_PROMPT` (the admins' instructions, which the
    assistant cannot change and which the prompt places last, so they win) and
    `documents.SYSTEM_PROMPT_HISTORY` (the numbered versions of both, see above).

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    # --- the admins' instructions -------------------------------------------------------------

    def admin_instructions(self):
        """The admins' instructions (str), or None when they gave none."""
        return self.ports.state.get(documents.USER_SYSTEM_PROMPT, None)

    def instruct(self, text, *, reason="set by an admin", by=None):
        """
        Set the admins' instructions to `text` (None removes them).

        Args:
            text (str or None): The instructions.
            reason (str): Why (kept with the version).
            by (str, optional): Who ("admin <name>"): the change is then a numbered version
                (`which` "persona") that `revert` can undo; without, it is set unrecorded (a
                game's own setup).

        Returns:
            dict or None: The version recorded (None: unrecorded, or `text` unchanged).
        """
        current = self.admin_instructions()
        if by is None:
            self.ports.state.set(documents.USER_SYSTEM_PROMPT, text)
            return None
        if current == text:
            return None
        return self._record(current, text, reason=reason, by=by, which="persona")

    # --- its own guidelines -------------------------------------------------------------------

    def own_guidelines(self):
        """The guidelines the assistant wrote for itself (str), or None."""
        return self.ports.state.get(documents.ASSISTANT_SYSTEM_PROMPT, None)

    def rewrite(self, prompt, *, reason, by):
        """
        Set the assistant's guidelines to `prompt` and record it as a new version.

        Args:
            prompt (str or None): The new text (None: no guidelines of its own).
            reason (str): Why (kept with the version).
            by (str): Who made the change: "assistant", or "admin <name>".

        Returns:
            dict: The version recorded.
        """
        current = self.own_guidelines()
        previous = current if isinstance(current, str) and current else None
        return self._record(previous, prompt, reason=reason, by=by, which="guidelines")

    # --- the versions of both -----------------------------------------------------------------

    def _record(self, previous, prompt, *, reason, by, which):
        """
        Set the `which` text to `prompt` and record it as a new version. The first persona
        version is preceded by one that keeps the persona as it was, so that the first change
        can be undone too.
        """
        history = self._history()
        first_persona = which == "persona" and not any(
            entry.get("which") == "persona" for entry in history)
        number = max([int(entry.get("version") or 0) for entry in history] or [0]) + 1
        if not any("version" in entry for entry in history):
            number = len(history) + 1  # continue an unnumbered history where it stands
        added = []
        if first_persona:
            added.append(self._version(number, previous, previous, by, which,
                                       "the persona as it was before its first versioned change"))
            number += 1
        version = self._version(number, previous, prompt, by, which, reason)
        keep = max(int(self.ports.settings.get("workspace.system_prompt.history_max")), 1)
        self.ports.state.set(WHICH[which], prompt)
        self.ports.state.set(documents.SYSTEM_PROMPT_HISTORY, [*history, *added, version][-keep:])
        return version

    def _version(self, number, previous, prompt, by, which, reason):
        return {"version": number, "time": iso(self.ports.clock.now()), "by": by,
                "reason": reason, "prompt": prompt, "previous": previous,
                "old_len": len(previous or ""), "new_len": len(prompt or ""), "which": which}

    def _history(self):
        history = self.ports.state.get(documents.SYSTEM_PROMPT_HISTORY, None)
        return [entry for entry in history if isinstance(entry, dict)] if isinstance(
            history, list) else []

    def versions(self):
        """
        The versions an admin may see and revert to, oldest first.

        Returns:
            list[dict]: `{"version", "time", "by", "reason", "prompt", "kept", "which"}`; the
            first is the text before the oldest kept change (its `version` one less), `kept` is
            False for an old-format change whose text was not kept, `which` the text changed
            ("guidelines" or "persona").
        """
        listed = []
        for index, entry in enumerate(self._history(), 1):
            number = int(entry.get("version") or index)
            which = entry.get("which") or "guidelines"
            if not listed:
                listed.append({"version": number - 1, "time": None, "by": None,
                               "reason": "before the oldest change kept",
                               "prompt": entry.get("previous"), "kept": "previous" in entry,
                               "which": which})
            listed.append({"version": number,
                           "time": entry.get("time") or entry.get("timestamp"),
                           "by": entry.get("by") or "assistant",
                           "reason": entry.get("reason") or entry.get("reasoning"),
                           "prompt": entry.get("prompt"), "kept": "prompt" in entry,
                           "which": which})
        return listed

    def revert(self, number, by):
        """
        Put back the text (guidelines or the admins' persona) of version `number`, recorded as
        a new version.

        Args:
            number (int): A version of `versions()`.
            by (str): Who orders it ("admin <name>").

        Returns:
            dict: The new version.

        Raises:
            PersonaVersionError: Unknown version, or its text was not kept.
        """
        known = {item["version"]: item for item in self.versions()}
        if number not in known:
            choices = ", ".join(str(key) for key in sorted(known)) or "none yet"
            raise PersonaVersionError(f"no version {number}; versions: {choices}")
        if not known[number]["kept"]:
            raise PersonaVersionError(f"the text of version {number} was not kept")
        prompt, reason = known[number]["prompt"], f"reverted to version {number}"
        if known[number]["which"] == "guidelines":
            return self.rewrite(prompt, reason=reason, by=by)
        return self._record(self.admin_instructions(), prompt, reason=reason, by=by,
                            which="persona")
