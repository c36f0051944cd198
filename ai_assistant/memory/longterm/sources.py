"""
Who said a memory, how far it is trusted, and what that decides when two claims conflict.

A memory's source is in its metadata: its `provenance` (`memory.provenance`: the speaker's
stable id and name, how it was heard, the trust), and the older flat fields `source_entity`
(who said it; none for the assistant's own observations and thoughts), `source_type` and
`source_trust`, which a memory stored before provenance existed has alone. An admin's
statement is one whose provenance says so, or, for an older memory, one with trust 1.0 (what
only an admin's turn may record: a player's is capped at `tools.agency.PLAYER_SOURCE_TRUST`)
or `source_type` "admin".

When a new claim corrects a stored one (`supersede.correction_kind`), `conflict` says what
happens (the claim policy, `policy.judge_claim`, applies it):

- `SUPERSEDES`: an admin's claim, a speaker correcting their own earlier claim (the assistant
  included), or a claim from a more trusted source replaces the stored one;
- `DISPUTES`: another source of equal trust: both are kept, current, each marked
  `disputed_with` the other, so recall says "Eve says A; Mallory says B" and settles nothing;
- `OUTRANKED`: a less trusted source: the claim is stored beside as its speaker's testimony,
  marked `outranked_by` the trusted memory, never current fact. Stored rather than kept out
  because what someone claimed is itself worth knowing (the assistant can say "Mallory told me
  otherwise"), the `store_memory` call that asked for it is acknowledged and nothing
  acknowledged is lost, and staff see it in the inspector; recall ranks it after the facts and
  always shows it as that speaker's word.

Recall (`recall.lines.recall_line`) uses `attribution` for the short prefix that says whose
word a line is: nothing for the assistant's own memories, an admin's statements and anything
without a speaker; "Mallory told me:" for a player's claim.
"""

from ai_assistant.memory import provenance as provenance_model

ADMIN_TRUST = 1.0
ADMIN_SOURCE = "admin"
# Trust closer than this is the same trust (stored trust is a float the model may have chosen).
SAME_TRUST = 1e-6
# The trust of a memory that records none (the specification's neutral middle).
UNKNOWN_TRUST = 0.5

SUPERSEDES = "supersedes"
DISPUTES = "disputes"
OUTRANKED = "outranked"

DISPUTED_WITH = "disputed_with"
OUTRANKED_BY = "outranked_by"
MAX_NAME_CHARS = 40


def _metadata(item):
    if not isinstance(item, dict):
        return {}
    return item.get("metadata") if isinstance(item.get("metadata"), dict) else item


def _provenance(item):
    """The memory's recorded provenance (`memory.provenance`), or None for an older one."""
    metadata = _metadata(item)
    if not isinstance(metadata.get(provenance_model.KEY), dict):
        return None
    return provenance_model.of(metadata)


def trust_of(item):
    """The trust of a memory's source (a memory, a hit, or its metadata)."""
    recorded = _provenance(item)
    if recorded is not None:
        return recorded["trust"]
    trust = _metadata(item).get("source_trust")
    if isinstance(trust, bool) or not isinstance(trust, int | float):
        return UNKNOWN_TRUST
    return float(trust)


def is_admin(item):
    """Whether a memory is an admin's statement (trust 1.0, or an admin source)."""
    recorded = _provenance(item)
    if recorded is not None:
        return provenance_model.is_admin(recorded)
    metadata = _metadata(item)
    return metadata.get("source_type") == ADMIN_SOURCE or trust_of(metadata) >= ADMIN_TRUST


def speaker_of(item):
    """Who said it, case-folded; None when no one did (the assistant's own memory)."""
    name = " ".join(str(_metadata(item).get("source_entity") or "").split())
    return name.casefold() or None


def same_speaker(new, old):
    """
    Whether two claims come from the same speaker: by their stable ids when both recorded
    one (two players may share a name), else by name; the assistant's own memories are all
    one speaker's.
    """
    new_id = (_provenance(new) or {}).get("speaker_id")
    old_id = (_provenance(old) or {}).get("speaker_id")
    if new_id and old_id:
        return new_id == old_id
    return speaker_of(new) == speaker_of(old)


def conflict(new, old):
    """
    What a new claim does to a stored one it corrects.

    Args:
        new (dict): The new claim's metadata.
        old (dict): The stored memory (a hit with `metadata`, or its metadata).

    Returns:
        str: `SUPERSEDES`, `DISPUTES` or `OUTRANKED`.
    """
    if is_admin(new):
        return SUPERSEDES
    if is_admin(old):
        return OUTRANKED  # only an admin replaces an admin, whatever name a player chose
    if same_speaker(new, old):
        return SUPERSEDES  # a speaker correcting their own claim (or the assistant its own)
    new_trust, old_trust = trust_of(new), trust_of(old)
    if new_trust > old_trust + SAME_TRUST:
        return SUPERSEDES
    if new_trust < old_trust - SAME_TRUST:
        return OUTRANKED
    return DISPUTES


def is_disputed(item):
    """Whether a memory is one side of a dispute between sources of equal trust."""
    return bool(_metadata(item).get(DISPUTED_WITH))


def is_outranked(item):
    """Whether a memory is testimony contradicted by a more trusted source."""
    return bool(_metadata(item).get(OUTRANKED_BY))


def rests_on_testimony(item):
    """
    Whether a memory is someone's word rather than the assistant's or an admin's fact: by its
    provenance when it records one (`provenance.is_player_sourced`), else by its speaker.
    """
    recorded = _provenance(item)
    if recorded is not None:
        return provenance_model.is_player_sourced(recorded)
    return speaker_of(item) is not None and not is_admin(item)


def speaker_name(item):
    """
    The name a recalled line gives its speaker: the provenance's speaker (who said it, even
    when the flat `source_entity` names the step that derived it: "reflection on ...") or
    `source_entity`, at most `MAX_NAME_CHARS`.
    """
    recorded = _provenance(item) or {}
    name = (recorded.get("speaker") or _metadata(item).get("source_entity")
            or recorded.get("speaker_id") or "")
    return " ".join(str(name).split())[:MAX_NAME_CHARS]


# A claim's verb by how it was heard (`provenance` channels); any other channel "told me".
HEARD_VERBS = {provenance_model.CHANNEL_WHISPERED: "whispered to me",
               provenance_model.CHANNEL_OVERHEARD: "was overheard saying"}


def attribution(item):
    """
    The short prefix that says whose word a recalled memory is ("" for a fact).

    Args:
        item (dict): A recall item (journal entry or memory item) or a store hit.

    Returns:
        str: "" for the assistant's own memories and admins' statements; otherwise
        "Mallory told me: " (or "whispered to me", "was overheard saying" by how it was
        heard), "Eve says (disputed): " or "Mallory claimed (I know otherwise): ".
    """
    if is_outranked(item):
        verb = "claimed (I know otherwise)"
    elif is_disputed(item):
        verb = "says (disputed)"
    else:
        # how it reached the assistant matters to how far it is to be believed
        verb = HEARD_VERBS.get((_provenance(item) or {}).get("channel"), "told me")
    if not rests_on_testimony(item):
        # a dispute between the assistant's own memories is still a dispute
        return "(disputed) " if verb == "says (disputed)" else ""
    return f"{speaker_name(item)} {verb}: "
