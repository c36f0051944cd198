"""
What happens to a new claim told to the long-term store, given the memories already there.

One function decides, `judge_claim`, for a claim (its text and metadata) against the stored
memories most like it (current ones only: a superseded memory stands for the one that
superseded it). Its `Verdict` is one of:

- `KEEP_EXISTING`: the claim says what a stored memory says (the same words, or a
  near-identical text that corrects nothing): nothing is stored, that memory is returned;
- `SUPERSEDE`: the claim corrects stored memories (a negation, a changed number, a small update:
  `supersede.correction_kind`): it is stored, saying which it supersedes, and each of those is
  kept, marked superseded (when, how, by which memory), for recall to prefer the current fact;
- `DISPUTE`: the claim contradicts stored memories from other sources of equal trust: it is
  stored beside them, and it and each of them are marked `disputed_with` the other(s);
- `OUTRANKED`: the claim contradicts a more trusted source: it is stored beside as its
  speaker's testimony, marked `outranked_by` that memory (never current fact);
- `STORE`: anything else: the claim is stored beside whatever is there.

Who may replace whom is `sources.conflict`: a claim never supersedes one from a more trusted
source; an admin may supersede anything and a speaker their own earlier claim. One claim may do
several of these at once (supersede its speaker's own earlier claim and dispute another's):
the action names the strongest, the verdict carries each.

Only memories with the claim's audience are compared: a private fact never hides or replaces a
public one, nor one private to someone else. Every writer (the `store_memory` tool,
consolidation, corrections) reaches this through `Memories.add` with the claim's source
metadata, so the same rules hold for all of them.

The store applies the verdict (`mem0_store.Mem0Store`, under its lock with the comparison, so two
claims never race past each other): it asks for `verdict.new_metadata(...)` on the stored claim
and writes `verdict.marks(...)` on the memories the verdict names.
"""

from dataclasses import dataclass

from ai_assistant.memory.audience import audience_of
from ai_assistant.memory.longterm.sources import (
    DISPUTED_WITH,
    DISPUTES,
    OUTRANKED_BY,
    SUPERSEDES,
    conflict,
)
from ai_assistant.memory.longterm.supersede import (
    correction_kind,
    same_fact,
    superseded_metadata,
)

STORE = "store"
KEEP_EXISTING = "keep_existing"
SUPERSEDE = "supersede"
DISPUTE = "dispute"
OUTRANKED = "outranked"

# The stored memories a new claim is compared with: the most similar, current ones.
COMPARED = 10


@dataclass(frozen=True)
class Verdict:
    """
    The decision on one claim.

    Attributes:
        action (str): `STORE`, `KEEP_EXISTING`, `SUPERSEDE`, `DISPUTE` or `OUTRANKED`.
        existing (dict | None): The memory kept instead (`KEEP_EXISTING`).
        superseded (tuple): `(memory, kind)` for each stored memory the claim corrects.
        disputed (tuple): The stored memories of equal trust the claim contradicts.
        outranked_by (tuple): The more trusted stored memories the claim contradicts.
    """

    action: str
    existing: dict | None = None
    superseded: tuple = ()
    disputed: tuple = ()
    outranked_by: tuple = ()

    @property
    def stores(self):
        """True when the claim is to be stored."""
        return self.action != KEEP_EXISTING

    def new_metadata(self, metadata):
        """The metadata the claim is stored with: its own, plus the ids it supersedes,
        disputes, or is outranked by."""
        metadata = dict(metadata)
        if self.superseded:
            metadata["supersedes"] = [memory["id"] for memory, _ in self.superseded]
        if self.disputed:
            metadata[DISPUTED_WITH] = [memory["id"] for memory in self.disputed]
        if self.outranked_by:
            metadata[OUTRANKED_BY] = [memory["id"] for memory in self.outranked_by]
        return metadata

    def marks(self, new_id, when):
        """
        What to write on existing memories once the claim is stored as `new_id`.

        Args:
            new_id (str): The stored claim's id.
            when (str): ISO time of the change.

        Returns:
            list[tuple]: `(memory, metadata to merge into it)`.
        """
        marks = [(memory, superseded_metadata(new_id, kind, when))
                 for memory, kind in self.superseded]
        for memory in self.disputed:  # each side of a dispute names the other
            others = list((memory.get("metadata") or {}).get(DISPUTED_WITH) or ())
            marks.append((memory, {DISPUTED_WITH: [*others, str(new_id)]}))
        return marks


def judge_claim(text, metadata, existing, *, duplicate_similarity):
    """
    Whether to store a claim beside the stored memories, keep one of them instead, or store
    it superseding those it corrects.

    Args:
        text (str): The claim.
        metadata (dict): Its metadata (source, trust, audience, ...).
        existing (list[dict]): The current stored memories most like it, best first:
            `{"id", "memory", "score" (cosine), "metadata"}`.
        duplicate_similarity (float): Cosine at or above which the store's embedder finds two
            texts near-identical.

    Returns:
        Verdict
    """
    audience = audience_of({"metadata": metadata})
    hits = [hit for hit in existing if audience_of(hit) == audience]
    exact = [hit for hit in hits if same_fact(hit["memory"], text)]
    if exact:
        return Verdict(KEEP_EXISTING, existing=exact[0])
    corrected, disputed, outranked_by, near = [], [], [], None
    for hit in hits:
        close = hit["score"] >= duplicate_similarity
        kind = correction_kind(hit["memory"], text, near_identical=close)
        if not kind:
            near = hit if close and near is None else near
            continue
        outcome = conflict(metadata, hit)
        if outcome == SUPERSEDES:
            corrected.append((hit, kind))
        elif outcome == DISPUTES:
            disputed.append(hit)
        else:
            outranked_by.append(hit)
    if corrected or disputed or outranked_by:
        action = SUPERSEDE if corrected else DISPUTE if disputed else OUTRANKED
        return Verdict(action, superseded=tuple(corrected), disputed=tuple(disputed),
                       outranked_by=tuple(outranked_by))
    if near is not None:
        return Verdict(KEEP_EXISTING, existing=near)
    return Verdict(STORE)
