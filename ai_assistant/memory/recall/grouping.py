"""
The recall block's layout: lines grouped by day, then by whose words they are.

A recalled line says its date and its speaker (`lines.recall_line`): `- [8 May 2023] Wren said
to me: "..."`. Shown one by one, a block of thirty lines repeats the same two or three dates
and speakers thirty times, a third of its tokens. Grouped, each day is named once and each
speaker once within it:

    [8 May 2023]
    - The harbour froze over.
    Wren said to me:
    - "I sold the boat."
    - "The new one is smaller."
    Orla said to me: "Good riddance."

so the same budget holds more whole lines. Nothing is cut or reworded: every line's own text
follows its speaker's prefix as the line had it. Lines without a speaker's prefix (the
assistant's own memories, a paraphrased fact that names its subject) come first under their
day, so none reads as said by the speaker above it.

`layout` renders lines (as `lines.recall_line` makes them) grouped; `GroupedCost` tells the
budget what one more line adds to a block laid out this way.
"""

import re

from ai_assistant.plumbing.tokens import count_tokens

# `- [8 May 2023] rest` (the date) and `Wren said to me: "..."` (a speaker's quoted words)
_DATED = re.compile(r"^- \[(?P<date>[^\]\n]+)\] (?P<rest>.*)$", re.DOTALL)
_UNDATED = re.compile(r"^- (?P<rest>.*)$", re.DOTALL)
_FRAMED = re.compile(r'^(?P<frame>[^"\n:]{1,80}?):\s*(?P<said>".*")$', re.DOTALL)


def line_parts(line):
    """
    `(date, frame, said)` of a recall line: its date ("" when undated), the prefix that says
    whose quoted words it holds ("" when none: the whole text is `said`), and the rest.
    """
    dated = _DATED.match(line) or _UNDATED.match(line)
    date = dated.groupdict().get("date") or "" if dated else ""
    rest = dated.group("rest") if dated else line
    framed = _FRAMED.match(rest)
    if framed:
        return date, framed.group("frame"), framed.group("said")
    return date, "", rest


def _grouped(lines):
    """`{date: {frame: [said, ...]}}`, days and speakers in the order they first come."""
    days = {}
    for line in lines:
        date, frame, said = line_parts(line)
        days.setdefault(date, {}).setdefault(frame, []).append(said)
    return days


def _day_text(frames):
    rows = [f"- {said}" for said in frames.get("", ())]
    for frame, said in frames.items():
        if not frame:
            continue
        if len(said) == 1:
            rows.append(f"{frame}: {said[0]}")
        else:
            rows.append(f"{frame}:")
            rows.extend(f"- {one}" for one in said)
    return rows


def layout(lines):
    """
    The block's text: `lines` (oldest first, as `pipeline.select_lines` gives them) grouped by
    day and speaker. Every line's words are there whole.
    """
    rows = []
    for date, frames in _grouped(lines).items():
        if date:
            rows.append(f"[{date}]")
        rows.extend(_day_text(frames))
    return "\n".join(rows)


class GroupedCost:
    """
    What each next line adds to a block laid out by `layout`, in tokens: its own text, plus
    its day's heading the first time the day comes and its speaker's prefix the first time the
    speaker comes that day. The sum is within a few tokens of the block's own count.

    Args:
        count (callable): Token counter.
    """

    def __init__(self, count=count_tokens):
        self._count = count
        self._days = set()
        self._frames = set()

    def cost(self, line):
        """Tokens `line` would add (nothing is recorded: `take` does)."""
        date, frame, said = line_parts(line)
        cost = self._count(f"- {said}") + 1  # the line and its newline
        if date and date not in self._days:
            cost += self._count(f"[{date}]") + 1
        if frame and (date, frame) not in self._frames:
            cost += self._count(f"{frame}:") + 1
        return cost

    def take(self, line):
        """Record that `line` is in the block."""
        date, frame, _ = line_parts(line)
        self._days.add(date)
        if frame:
            self._frames.add((date, frame))
