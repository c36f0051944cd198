"""
Provenance: where a remembered thing came from, the one shape every store records.

Every journal entry, long-term memory, scene note, memory node, profile attribute and session
fact carries a `provenance` dict::

    {"speaker_id": "#12",        # the speaker's stable id (the Evennia dbref), None for none
     "speaker": "Mallory",       # their display name when it was heard (for people to read)
     "channel": "told",          # how it was heard: see CHANNELS
     "trust": 0.9,               # that source's trust, 0.0-1.0
     "derived_from": ["journal:12", "observation:#12:7"]}   # what it was made from, if made

How it was heard (`CHANNELS`): `told` (said to the assistant directly), `whispered` (told in
private), `overheard` (room chatter), `seen` (a pose or action observed), `own` (the
assistant's own thought or observation), `admin` (an admin's own statement: an admin talking
to the assistant, or a turn only admins' words drove) and `correction` (an admin's correction
made in the inspector). Each has its default trust (`CHANNEL_TRUST`).

Anything sleep or a tool makes from other records (a consolidated fact, a reflection, a
merged node, a profile attribute, a pre-compaction note) is `derive`d: it names its inputs in
`derived_from` (references such as "journal:12", see `ref`), and its speaker, channel and
trust are those of its LEAST trusted input, never the model's say-so. So a derived record is
an admin's only when every input is an admin's, and one player's word among the inputs makes
the whole of it that player's testimony.

Records written before provenance existed carry none: `of` gives them a sensible one from
their older fields (`source_type`, `source_entity`, `source_trust`, `audience`, `entry_id`,
`evidence`), so a running game's data keeps loading and nothing has to be migrated.

The rules of trust between sources (who may supersede whom) are `longterm.sources`, which reads
speakers and trust through this module.
"""

CHANNEL_TOLD = "told"
CHANNEL_WHISPERED = "whispered"
CHANNEL_OVERHEARD = "overheard"
CHANNEL_SEEN = "seen"
CHANNEL_OWN = "own"
CHANNEL_ADMIN = "admin"
CHANNEL_CORRECTION = "correction"

# The seed's default trust per journal source type (the journal's `DEFAULT_SOURCE_TRUST`).
SOURCE_TYPE_TRUST = {
    "direct": 0.9,
    "observation": 0.8,
    "inference": 0.6,
    "environmental": 0.3,
}
# The journal's source type for each channel (the older flat fields stay in step).
SOURCE_TYPE_OF_CHANNEL = {
    CHANNEL_TOLD: "direct",
    CHANNEL_WHISPERED: "direct",
    CHANNEL_OVERHEARD: "environmental",
    CHANNEL_SEEN: "observation",
    CHANNEL_OWN: "observation",
    CHANNEL_ADMIN: "direct",
    CHANNEL_CORRECTION: "direct",
}
ADMIN_CHANNELS = (CHANNEL_ADMIN, CHANNEL_CORRECTION)
# The default trust of each channel: its source type's, and an admin's word above everything.
CHANNEL_TRUST = {channel: 1.0 if channel in ADMIN_CHANNELS else SOURCE_TYPE_TRUST[source_type]
                 for channel, source_type in SOURCE_TYPE_OF_CHANNEL.items()}
CHANNELS = tuple(CHANNEL_TRUST)
# What the people reading the inspector see for each channel.
CHANNEL_LABELS = {
    CHANNEL_TOLD: "told me directly",
    CHANNEL_WHISPERED: "whispered to me",
    CHANNEL_OVERHEARD: "overheard",
    CHANNEL_SEEN: "seen",
    CHANNEL_OWN: "my own thought",
    CHANNEL_ADMIN: "an admin's statement",
    CHANNEL_CORRECTION: "an admin's correction",
}
# The most trust the assistant's own inference carries (a reflection's ceiling).
INFERENCE_TRUST = SOURCE_TYPE_TRUST["inference"]
# The most importance a player's words may be filed with, as a share of the scale: 7 of 10,
# what the journal's heuristic gives a plain line said to the assistant directly. The same cap
# holds for a player's tool argument (`tools.agency`) and for the LLM's score of their line.
PLAYER_IMPORTANCE_SHARE = 0.7

MAX_NAME_CHARS = 200
MAX_ID_CHARS = 64
MAX_REF_CHARS = 160
MAX_DERIVED = 200
KEY = "provenance"
# Reference kinds (`ref`).
REF_KINDS = ("journal", "memory", "node", "note", "observation", "attribute", "fact")


class ProvenanceError(ValueError):
    """A provenance that is not one (the message says which field is wrong)."""


def ref(kind, record_id):
    """
    A reference to a record, as `derived_from` lists it: "journal:12", "memory:<uuid>",
    "node:<id>", "observation:#12:7".

    Args:
        kind (str): One of `REF_KINDS`.
        record_id: The record's id.

    Returns:
        str: The reference.
    """
    if kind not in REF_KINDS:
        raise ProvenanceError(f"unknown reference kind {kind!r}; one of {', '.join(REF_KINDS)}")
    return f"{kind}:{record_id}"[:MAX_REF_CHARS]


def parse_ref(reference):
    """
    Returns:
        tuple: `(kind, id)` of a reference (the id as text); `(None, text)` for one of no
        known kind.
    """
    kind, _, rest = str(reference).partition(":")
    return (kind, rest) if kind in REF_KINDS and rest else (None, str(reference))


def _clean_text(value, limit):
    text = " ".join(str(value).split())[:limit] if value not in (None, "") else ""
    return text or None


def _clean_trust(trust, channel):
    if trust is None:
        return CHANNEL_TRUST[channel]
    if isinstance(trust, bool) or not isinstance(trust, int | float):
        raise ProvenanceError(f"trust must be a number from 0.0 to 1.0, not {trust!r}")
    if not 0.0 <= float(trust) <= 1.0:
        raise ProvenanceError(f"trust must be from 0.0 to 1.0, not {trust:g}")
    return round(float(trust), 6)


def _clean_refs(derived_from):
    if derived_from is None:
        return []
    if isinstance(derived_from, str | bytes) or not hasattr(derived_from, "__iter__"):
        raise ProvenanceError("derived_from must be a list of references")
    return list(dict.fromkeys(str(item)[:MAX_REF_CHARS] for item in derived_from
                              if item not in (None, "")))[:MAX_DERIVED]


def build(channel, *, speaker=None, speaker_id=None, trust=None, derived_from=()):
    """
    A provenance, checked.

    Args:
        channel (str): How it was heard (`CHANNELS`).
        speaker (str, optional): The speaker's name.
        speaker_id (str, optional): The speaker's stable id ("#12").
        trust (float, optional): 0.0-1.0; the channel's default when left out. An admin's
            channel is always 1.0, and no other channel may claim 1.0 or more than its
            default would allow an admin's (a non-admin source is capped below an admin).
        derived_from (list, optional): References of the records it was made from.

    Returns:
        dict: The provenance.

    Raises:
        ProvenanceError: A field that is not valid.
    """
    if channel not in CHANNEL_TRUST:
        raise ProvenanceError(f"unknown channel {channel!r}; one of {', '.join(CHANNELS)}")
    trust = _clean_trust(trust, channel)
    if channel in ADMIN_CHANNELS:
        trust = CHANNEL_TRUST[channel]
    elif trust >= CHANNEL_TRUST[CHANNEL_ADMIN]:
        # only an admin's word is an admin's: anyone else is at most told directly
        trust = CHANNEL_TRUST[CHANNEL_TOLD]
    return {
        "speaker_id": _clean_text(speaker_id, MAX_ID_CHARS),
        "speaker": _clean_text(speaker, MAX_NAME_CHARS),
        "channel": channel,
        "trust": trust,
        "derived_from": _clean_refs(derived_from),
    }


def validate(value):
    """
    A stored or supplied provenance, checked and normalised (`build`'s rules).

    Raises:
        ProvenanceError: When it is not a dict of valid fields.
    """
    if not isinstance(value, dict):
        raise ProvenanceError(f"a provenance is an object, not {type(value).__name__}")
    return build(value.get("channel"), speaker=value.get("speaker"),
                 speaker_id=value.get("speaker_id"), trust=value.get("trust"),
                 derived_from=value.get("derived_from"))


def _fields(item):
    """The record's own fields: a memory hit's metadata, else the record."""
    if not isinstance(item, dict):
        return {}
    metadata = item.get("metadata")
    return metadata if isinstance(metadata, dict) else item


def _legacy_channel(fields):
    source_type = str(fields.get("source_type") or "")
    trust = fields.get("source_trust")
    if fields.get("corrected_by") and source_type == "admin":
        return CHANNEL_CORRECTION
    if source_type == "admin" or (isinstance(trust, int | float) and not isinstance(trust, bool)
                                  and trust >= CHANNEL_TRUST[CHANNEL_ADMIN]):
        return CHANNEL_ADMIN
    if source_type == "direct":
        return CHANNEL_WHISPERED if fields.get("audience") else CHANNEL_TOLD
    if source_type == "environmental":
        return CHANNEL_OVERHEARD
    if source_type == "observation" and fields.get("source_entity"):
        return CHANNEL_SEEN
    if not source_type and fields.get("source_entity"):
        return CHANNEL_TOLD  # a scene noted on someone's word before provenance existed
    return CHANNEL_OWN


def _legacy_refs(fields):
    refs = []
    if fields.get("entry_id") is not None:
        refs.append(ref("journal", fields["entry_id"]))
    for cited in fields.get("evidence") or ():
        kind, rest = parse_ref(cited)
        if kind:
            refs.append(str(cited))
        elif str(cited).startswith("mem:"):
            refs.append(ref("memory", str(cited)[4:]))
        else:
            refs.append(ref("journal", cited))
    return refs


def of(item):
    """
    The provenance of any record: its own, or one read from its older fields.

    Args:
        item (dict): A journal entry, a memory (hit or metadata), a node, a scene note, an
            observation... (anything that may carry `provenance`).

    Returns:
        dict: A valid provenance (`build`'s shape). A record without one gets the speaker
        `source_entity` names (and, for a whisper, its audience as the id), the channel its
        `source_type` means, its `source_trust` (the channel's default if none), and what
        `entry_id` and `evidence` say it was made from.
    """
    fields = _fields(item)
    stored = fields.get(KEY)
    if isinstance(stored, dict):
        try:
            return validate(stored)
        except ProvenanceError:
            pass  # an unreadable stored provenance: fall back to the older fields
    channel = _legacy_channel(fields)
    trust = fields.get("source_trust")
    if isinstance(trust, bool) or not isinstance(trust, int | float) or not 0 <= trust <= 1:
        trust = None
    speaker_id = fields.get("speaker_id") or (fields.get("audience")
                                              if channel == CHANNEL_WHISPERED else None)
    speaker = fields.get("source_entity") if channel != CHANNEL_OWN else None
    if channel == CHANNEL_OWN and fields.get("source_type") == "inference" and trust is None:
        trust = INFERENCE_TRUST
    return build(channel, speaker=speaker, speaker_id=speaker_id, trust=trust,
                 derived_from=_legacy_refs(fields))


def derive(inputs, derived_from, *, ceiling=None):
    """
    The provenance of a record made from others: their references, the lowest trust among
    them, and the speaker and channel of the least trusted of them (the first such on a tie);
    when any input is someone's testimony, of the least trusted such input, so a player's word
    is never laundered into the assistant's own.

    Args:
        inputs (list[dict]): The provenances (or records) it was made from.
        derived_from (list): Their references (`ref`).
        ceiling (float, optional): The most trust it may carry whatever its inputs (an
            inference's: `INFERENCE_TRUST`).

    Returns:
        dict: The derived provenance; with no inputs, the assistant's own thought.
    """
    provenances = [of({KEY: item}) if _is_provenance(item) else of(item)
                   for item in inputs or ()]
    if not provenances:
        base = build(CHANNEL_OWN)
    else:
        # someone's word among the inputs makes it their testimony, even when the assistant's
        # own observation (trust 0.8) is trusted less than what a player told it (0.9)
        testimony = [item for item in provenances if is_player_sourced(item)]
        base = min(testimony or provenances, key=lambda provenance: provenance["trust"])
    trust = min(item["trust"] for item in provenances) if provenances else base["trust"]
    trust = trust if ceiling is None else min(trust, float(ceiling))
    channel = base["channel"]
    if channel in ADMIN_CHANNELS and trust < CHANNEL_TRUST[CHANNEL_ADMIN]:
        channel = CHANNEL_OWN  # an admin's words capped as an inference are the assistant's
    return build(channel, speaker=base["speaker"], speaker_id=base["speaker_id"], trust=trust,
                 derived_from=derived_from)


def _is_provenance(item):
    return isinstance(item, dict) and "channel" in item and "trust" in item


def is_admin(provenance):
    """Whether it is an admin's statement or correction."""
    return provenance.get("channel") in ADMIN_CHANNELS


def speaker_key(provenance):
    """
    Who it came from, for comparing speakers: the stable id when there is one, else the name
    case-folded; None for the assistant's own.
    """
    if provenance.get("channel") == CHANNEL_OWN and not provenance.get("speaker_id"):
        return None
    if provenance.get("speaker_id"):
        return f"id:{provenance['speaker_id']}"
    name = " ".join(str(provenance.get("speaker") or "").split()).casefold()
    return f"name:{name}" if name else None


def is_player_sourced(provenance):
    """Whether it rests on someone's words other than an admin's (a player's testimony)."""
    return not is_admin(provenance) and speaker_key(provenance) is not None


def importance_cap(provenance, scale=10):
    """
    The most importance a record may be given (by a tool argument or an LLM score): a
    player's words at most `PLAYER_IMPORTANCE_SHARE` of the scale; None when uncapped.
    """
    if not is_player_sourced(provenance):
        return None
    return PLAYER_IMPORTANCE_SHARE * scale


def source_fields(provenance):
    """
    The older flat fields the same provenance means (`source_type`, `source_trust`,
    `source_entity`), so readers of those agree with it.
    """
    return {
        "source_type": SOURCE_TYPE_OF_CHANNEL[provenance["channel"]],
        "source_trust": provenance["trust"],
        "source_entity": provenance.get("speaker"),
    }


def summary(provenance):
    """
    The provenance as the inspector and the API show it: the fields plus `channel_label`.
    """
    shown = dict(provenance)
    shown["channel_label"] = CHANNEL_LABELS.get(provenance.get("channel"), "?")
    shown["derived_from"] = [{"ref": item, "kind": parse_ref(item)[0], "id": parse_ref(item)[1]}
                             for item in provenance.get("derived_from") or ()]
    return shown


def settle(fields, given=None, **older):
    """
    The provenance of a new record, its flat source fields brought in step with it.

    Args:
        fields (dict): The record's `source_type`, `source_trust`, `source_entity` (changed in
            place: the trust follows `given`, and so does the speaker when the fields name
            none or an admin gave it).
        given (dict, optional): The writer's provenance; None reads one from `fields` and
            `older` (`audience`, `evidence`, ...: see `of`).

    Returns:
        dict: The provenance.

    Raises:
        ProvenanceError: A provenance that is not valid.
    """
    if given is None:
        return of({**fields, **older})
    given = validate(given)
    fields["source_trust"] = given["trust"]
    if fields.get("source_entity") is None or is_admin(given):
        fields["source_entity"] = given.get("speaker")
    return given


def with_provenance(metadata, provenance=None):
    """
    A record's metadata with its provenance, the flat source fields in step with it.

    Args:
        metadata (dict): The record's metadata (not changed).
        provenance (dict, optional): Its provenance; None reads one from the metadata.

    Returns:
        dict: A copy with `provenance` and, where it says so, `source_trust` and
        `source_entity` (an admin's statement also gets `source_type` "admin").

    Raises:
        ProvenanceError: A provenance that is not valid.
    """
    metadata = dict(metadata)
    provenance = of(metadata) if provenance is None else validate(provenance)
    metadata[KEY] = provenance
    metadata["source_trust"] = provenance["trust"]
    if provenance.get("speaker") or is_admin(provenance):
        metadata["source_entity"] = provenance.get("speaker")
    return metadata


# How a heard line is classified (`agent.perception`): addressed to the assistant, or not.
ADDRESSED = ("direct_message", "direct_addressing")
PRIVATE_KINDS = ("whisper", "page")


def heard(event):
    """
    Where a perceived utterance came from: its speaker's stable id and name, and how it was
    heard. An admin's words told to the assistant (said to it or whispered: the shell marks
    an admin's events `"admin": True`) are the admin's statement, at an admin's trust; what
    anyone else says is at most told directly.

    Args:
        event (dict): A perception event (`kind`, `classification`, `sender`, `sender_id`).

    Returns:
        dict: The provenance.
    """
    if event.get("kind") == "pose":
        channel = CHANNEL_SEEN
    elif event.get("kind") in PRIVATE_KINDS:
        channel = CHANNEL_WHISPERED
    elif event.get("classification") in ADDRESSED:
        channel = CHANNEL_TOLD
    else:
        channel = CHANNEL_OVERHEARD
    if event.get("admin") is True and channel in (CHANNEL_TOLD, CHANNEL_WHISPERED):
        channel = CHANNEL_ADMIN
    refs = [ref("journal", event["journal_id"])] if event.get("journal_id") is not None else []
    return build(channel, speaker=event.get("sender"), speaker_id=event.get("sender_id"),
                 derived_from=refs)
