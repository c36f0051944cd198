"""
The recall block's layout: lines grouped by day, then by whose words they are.

A recalled line says its date and its speaker (`lines.recall_line`): `- [8 May 2023] Wren said
to me: "..."`. Shown one by one, a block of thirty lines repeats the same two or three dates
and speakers thirty times, a fifth of its tokens. Grouped, each day is named once, each speaker
once within it, each year once, at its first day, and "said to me" once, in the block's key
(`KEY`, shown above the block by `agent.blocks.remembered`):

    (A name alone heads what that person said to me.)
    [8 May 2023]
    - The harbour froze over.
    Wren:
    "I sold the boat."
    "The new one is smaller."
    Orla: "Good riddance."
    [9 May] Wren told me:
    - the new boat is called Tern
    - it leaks
    Bo said: "Fair winds."

so the same budget holds more whole lines. Nothing is cut or reworded: every line's own text
follows its speaker as the line had it, and every other frame stays whole ("Bo said" overheard
in the room, "whispered to me (private)", "says (disputed)"). A quoted line under its speaker
needs no bullet (the quotes mark it); a line in other words ("Wren told me: the new boat ...",
a fact the model paraphrased) keeps one. Lines without a speaker's prefix (the assistant's own
memories, a fact that names its subject) come first under their day, so none reads as said by
the speaker above it. A day whose first lines are a speaker's starts on its heading's line.

`layout` renders lines (as `lines.recall_line` makes them) grouped; `GroupedCost` tells the
budget what one more line adds to a block laid out this way.
"""

import re

from ai_assistant.memory.longterm.sources import HEARD_VERBS
from ai_assistant.plumbing.tokens import count_tokens

# `- [8 May 2023] rest` (the date)
_DATED = re.compile(r"^- \[(?P<date>[^\]\n]+)\] (?P<rest>.*)$", re.DOTALL)
_UNDATED = re.compile(r"^- (?P<rest>.*)$", re.DOTALL)
# `Wren said to me: "..."`: a speaker's quoted words
_FRAMED = re.compile(r'^(?P<frame>[^"\n:]{1,80}?):\s*(?P<said>".*")$', re.DOTALL)
# `Wren told me: ...`: a speaker's word in other words, with the plain verbs of
# `longterm.sources.attribution` only (a fact with a colon in it is not someone's word, and a
# disputed or outranked claim keeps its warning on its own line)
_VERBS = ("told me", *HEARD_VERBS.values())
_ATTRIBUTED = re.compile(r'^(?P<frame>[^"\n:]{1,80}? (?:'
                         + "|".join(re.escape(verb) for verb in _VERBS)
                         + r")):\s+(?P<said>\S.*)$", re.DOTALL)  # fmt: skip
# `8 May 2023`: a date whose year a later day of the same year leaves out
_DAY_AND_YEAR = re.compile(r"^(?P<day>.+) (?P<year>\d{4})$")


def line_parts(line):
    """
    `(date, frame, said)` of a recall line: its date ("" when undated), the prefix that says
    whose words it holds ("" when none: the whole text is `said`), and the rest.
    """
    dated = _DATED.match(line) or _UNDATED.match(line)
    date = dated.groupdict().get("date") or "" if dated else ""
    rest = dated.group("rest") if dated else line
    framed = _FRAMED.match(rest) or _ATTRIBUTED.match(rest)
    if framed:
        return date, framed.group("frame"), framed.group("said")
    return date, "", rest


# What a heard line's speaker said directly to the assistant: `Wren said to me: "..."`. It is
# said once, in the block's key (`KEY`), and each speaker's heading is the name alone.
DIRECT = " said to me"
KEY = "(A name alone heads what that person said to me.)"


def shown_frame(frame):
    """A speaker's heading: the name alone for what they said to me, else the whole frame."""
    name = frame.removesuffix(DIRECT)
    return name if name and name != frame else frame


def needs_key(lines):
    """True when the block of `lines` heads a speaker with the name alone (`KEY`)."""
    return any(line_parts(line)[1].endswith(DIRECT) for line in lines)


def _year(date):
    match = _DAY_AND_YEAR.match(date)
    return match.group("year") if match else None


def shown_date(date, year_shown):
    """The day's heading: `[8 May 2023]`, or `[9 May]` once its year has been named."""
    match = _DAY_AND_YEAR.match(date)
    return f"[{match.group('day')}]" if match and year_shown else f"[{date}]"


def said_row(frame, said):
    """One line under its speaker (or under its day, with no speaker)."""
    return said if frame and said.startswith('"') else f"- {said}"


def _grouped(lines):
    """`{date: {frame: [said, ...]}}`, days and speakers in the order they first come."""
    days = {}
    for line in lines:
        date, frame, said = line_parts(line)
        days.setdefault(date, {}).setdefault(frame, []).append(said)
    return days


def _day_rows(heading, frames):
    """The rows of one day: its heading (if any), its facts, then each speaker's words."""
    rows = [heading] if heading and "" in frames else []
    rows.extend(said_row("", said) for said in frames.get("", ()))
    for frame, said in frames.items():
        if not frame:
            continue
        shown = shown_frame(frame)
        lead = f"{heading} {shown}:" if heading and not rows else f"{shown}:"
        if len(said) == 1:
            rows.append(f"{lead} {said[0]}")
        else:
            rows.append(lead)
            rows.extend(said_row(frame, one) for one in said)
    return rows or [heading]


def layout(lines):
    """
    The block's text: `lines` (oldest first, as `pipeline.select_lines` gives them) grouped by
    day and speaker, each year named at its first day. Every line's words are there whole.
    """
    rows, years = [], set()
    for date, frames in _grouped(lines).items():
        heading = shown_date(date, _year(date) in years) if date else ""
        years.add(_year(date))
        rows.extend(_day_rows(heading, frames))
    return "\n".join(rows)


class GroupedCost:
    """
    What each next line adds to a block laid out by `layout`, in tokens: its own text, plus
    its day's heading the first time the day comes (with the year the first time the year
    comes: the block is in time order, so a year's first day is the one that names it) and its
    speaker's prefix the first time the speaker comes that day. The sum is within a few tokens
    of the block's own count (a day that starts on a speaker's line costs a little less).

    Args:
        count (callable): Token counter.
    """

    def __init__(self, count=count_tokens):
        self._count = count
        self._days = set()
        self._years = set()
        self._frames = set()

    def cost(self, line):
        """Tokens `line` would add (nothing is recorded: `take` does)."""
        date, frame, said = line_parts(line)
        cost = self._count(said_row(frame, said)) + 1  # the line and its newline
        if date and date not in self._days:
            year = _year(date)
            cost += self._count(shown_date(date, year in self._years)) + 1
        if frame and (date, frame) not in self._frames:
            cost += self._count(f"{shown_frame(frame)}:") + 1
        return cost

    def take(self, line):
        """Record that `line` is in the block."""
        date, frame, _ = line_parts(line)
        self._days.add(date)
        self._years.add(_year(date))
        if frame:
            self._frames.add((date, frame))
