"""
Relationship pace: favorability moves with diminishing returns per speaker per period.

A band must be earned over time and distinct interactions, not by line count: "hi 1" ... "hi
70" in 14 seconds must not make a new player an ally. `interaction_weight` is the share of the
usual gain (`memory.entities.apply_interaction`) one interaction earns:

- the n-th interaction with the same speaker within `entities.interaction_period_minutes`
  counts 1/n (a period of 70 lines earns about what 5 lines spread over five periods do);
- a line that repeats one of the speaker's recent lines in the period (the same words once
  numbers and punctuation are stripped) counts only `entities.repeat_weight` of that.

Losses (hostile words) are not weighted: rudeness costs its full price however often it comes.
The period's count and recent lines live in the relationship itself (`pace`).
"""

import re
from datetime import timedelta

from ai_assistant.plumbing.ports import iso, parse_iso

RECENT_LINES = 8  # the recent lines of a period a new line is compared with
_WORD = re.compile(r"[a-z]+")


def line_signature(text):
    """A line's words, lower-case, with numbers and punctuation stripped ("hi 7" -> "hi")."""
    return " ".join(_WORD.findall(str(text or "").lower()))


def interaction_weight(relationship, text, now, settings):
    """
    Count one interaction in the relationship's current period (in place) and say its weight.

    Args:
        relationship (dict): A profile's relationship (its `pace` is updated).
        text (str): What the character said.
        now (datetime): When.
        settings (Settings): For `entities.interaction_period_minutes` and
            `entities.repeat_weight`.

    Returns:
        float: 0-1, the share of the usual favorability gain this interaction earns.
    """
    minutes = float(settings.get("entities.interaction_period_minutes"))
    if minutes <= 0:
        return 1.0
    pace = dict(relationship.get("pace") or {})
    started = parse_iso(pace.get("since"))
    if started is None or now - started >= timedelta(minutes=minutes) or now < started:
        pace = {"since": iso(now), "count": 0, "lines": []}
    count = int(pace.get("count", 0)) + 1
    signature = line_signature(text)
    lines = list(pace.get("lines") or [])
    weight = 1.0 / count
    if signature and signature in lines:
        weight *= float(settings.get("entities.repeat_weight"))
    if signature:
        lines = [line for line in lines if line != signature] + [signature[:200]]
    pace.update(count=count, lines=lines[-RECENT_LINES:])
    relationship["pace"] = pace
    return weight
