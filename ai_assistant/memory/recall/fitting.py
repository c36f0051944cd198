"""
Choosing the recall block's lines for a budget, and choosing them again for another.

The pipeline ranks the items and `choose` takes whole lines, best first, while they fit a
token budget (a line that does not fit is skipped: a shorter one further down may), then shows
them oldest first. What it returns, `RecallLines`, is that list of lines and, best first,
every line it could have shown, so the block can be chosen again for a smaller or a larger
budget (`RecallLines.fit`) without ranking again: the prompt does this when the request as a
whole has a budget (`agent.blocks.remembered.fit_to_request`), so recall gets what the
request's other sections leave.
"""

from dataclasses import dataclass

from ai_assistant.memory.recall.grouping import GroupedCost
from ai_assistant.plumbing.tokens import count_tokens


@dataclass(frozen=True)
class RankedLine:
    """A line the block may show: its text and when its item was written (the block's order)."""

    when: str
    line: str


class RecallLines(list):
    """
    The lines a recall block shows, oldest first (a list of str), with what chose them.

    Attributes:
        ranked (tuple[RankedLine]): Every line the block could show, best first.
        limit (int): At most this many lines.
        cost (int): Tokens the chosen lines take in the block's layout (`GroupedCost`).
        complete (bool): Every ranked line was taken, or `limit` of them: a larger budget
            would add none.
        count (callable): The token counter that chose them (a `MemoCount`: choosing again
            counts no line twice).
    """

    def __init__(self, lines=(), ranked=(), limit=0, cost=0, complete=True, count=count_tokens):
        super().__init__(lines)
        self.ranked = tuple(ranked)
        self.limit = limit
        self.cost = cost
        self.complete = complete
        self.count = count

    def fit(self, budget):
        """The lines chosen again from `ranked` for `budget` tokens (0: no budget)."""
        return choose(self.ranked, budget, self.limit, self.count)


class MemoCount:
    """A token counter that counts each text once (fitting again counts the same lines)."""

    def __init__(self, count=count_tokens):
        self._count = count
        self._known = {}

    def __call__(self, text):
        known = self._known.get(text)
        if known is None:
            known = self._known[text] = self._count(text)
        return known


def choose(ranked, budget, limit, count=count_tokens):
    """
    The lines of `ranked` (best first) that fit `budget` tokens as laid out by day and speaker,
    at most `limit` of them, shown oldest first.

    Args:
        ranked (tuple[RankedLine]): The lines the block may show, best first.
        budget (int): Tokens for all lines (0: no budget).
        limit (int): At most this many lines (0: any number).
        count (callable): Token counter.

    Returns:
        RecallLines
    """
    count = count if isinstance(count, MemoCount) else MemoCount(count)
    chosen, used, block, skipped = [], 0, GroupedCost(count), False
    for ranked_line in ranked:
        if limit and len(chosen) >= limit:
            break
        cost = block.cost(ranked_line.line)  # what it adds to the block laid out
        if budget and used + cost > budget:
            skipped = True
            continue  # a shorter line further down may still fit
        block.take(ranked_line.line)
        chosen.append(ranked_line)
        used += cost
    # oldest first; lines of the same moment in a fixed order, whatever ranked them (the
    # inspector's preview, whose ranking may differ by a hair, shows the turn's very block)
    chosen.sort(key=lambda ranked_line: (ranked_line.when, ranked_line.line))
    return RecallLines([ranked_line.line for ranked_line in chosen], ranked, limit, used,
                       complete=not skipped, count=count)  # fmt: skip
