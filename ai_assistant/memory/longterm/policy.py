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
- `STORE`: anything else: the claim is stored beside whatever is there.

Only memories with the claim's audience are compared: a private fact never hides or replaces a
public one, nor one private to someone else. The rules of who may replace whom (a claim never
replacing one from a more trusted source; equal sources disagreeing kept beside each other as
a dispute) belong here, in `judge_claim`, and nowhere else.

The store applies the verdict (`mem0_store.Mem0Store`, under its lock with the comparison, so two
claims never race past each other): it asks for `verdict.new_metadata(...)` on the stored claim
and writes `verdict.marks(...)` on the memories the verdict names.
"""

from dataclasses import dataclass

from ai_assistant.memory.audience import audience_of
from ai_assistant.memory.longterm.supersede import (
    correction_kind,
    same_fact,
    superseded_metadata,
)

STORE = "store"
KEEP_EXISTING = "keep_existing"
SUPERSEDE = "supersede"

# The stored memories a new claim is compared with: the most similar, current ones.
COMPARED = 10


@dataclass(frozen=True)
class Verdict:
    """
    The decision on one claim.

    Attributes:
        action (str): `STORE`, `KEEP_EXISTING` or `SUPERSEDE`.
        existing (dict | None): The memory kept instead (`KEEP_EXISTING`).
        superseded (tuple): `(memory, kind)` for each stored memory the claim corrects.
    """

    action: str
    existing: dict | None = None
    superseded: tuple = ()

    @property
    def stores(self):
        """True when the claim is to be stored."""
        return self.action != KEEP_EXISTING

    def new_metadata(self, metadata):
        """The metadata the claim is stored with: its own, plus the ids it supersedes."""
        if not self.superseded:
            return dict(metadata)
        return {**metadata, "supersedes": [memory["id"] for memory, _ in self.superseded]}

    def marks(self, new_id, when):
        """
        What to write on existing memories once the claim is stored as `new_id`.

        Args:
            new_id (str): The stored claim's id.
            when (str): ISO time of the change.

        Returns:
            list[tuple]: `(memory, metadata to merge into it)`.
        """
        return [(memory, superseded_metadata(new_id, kind, when))
                for memory, kind in self.superseded]


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
    corrected, near = [], None
    for hit in hits:
        close = hit["score"] >= duplicate_similarity
        kind = correction_kind(hit["memory"], text, near_identical=close)
        if kind:
            corrected.append((hit, kind))
        elif close and near is None:
            near = hit
    if corrected:
        return Verdict(SUPERSEDE, superseded=tuple(corrected))
    if near is not None:
        return Verdict(KEEP_EXISTING, existing=near)
    return Verdict(STORE)
