"""
Least agency: which tools a turn may run, chosen by the turn's purpose AND by whom it acts for.

A turn acts for one of three authorities (its `Grant`):

- `OWN`: the assistant's own turns (autonomous ticks, sleep, reflection, housekeeping passes):
  no one's words drive them, every tool the mode allows may run;
- `ADMIN`: a turn driven only by what admins said (speakers who pass the same `perm(Admin)`
  lock as `@assistant`; the shell marks their events `"admin": True`): an admin's order, the
  wider set;
- `PLAYER`: a turn in which anyone else's words take part: untrusted input. Only SCOPED tools
  (`Tool.reach`) may run: speech, lookups, journaling what was said. Private speech goes to the
  speaker alone (`Tool.recipient_argument`), and what a tool records (`Tool.sourced`) is
  sourced to the speaker with its trust capped at theirs (`PLAYER_SOURCE_TRUST`, the journal's
  trust of what is said to the assistant directly), whatever trust the model chose; its
  importance is capped the same way (`PLAYER_IMPORTANCE_SHARE` of the tool's scale), so a
  player cannot have something of theirs filed as importance 10.

`tool_set` picks both sets at once: the permitted tools (trust) and, among them, the lean set
described to the model (purpose: `registry.lean_tools`). A permitted tool that was not described
still runs when the model calls it by name; a tool outside the permitted set never runs, and the
model is told why (`refusal`).
"""

import dataclasses

from ai_assistant.memory import provenance
from ai_assistant.memory.journal import DEFAULT_SOURCE_TRUST
from ai_assistant.memory.provenance import PLAYER_IMPORTANCE_SHARE
from ai_assistant.tools.registry import SCOPED, lean_tools

OWN = "own"
ADMIN = "admin"
PLAYER = "player"

# What a player says to the assistant is at best a direct statement: that is its trust.
PLAYER_SOURCE_TRUST = DEFAULT_SOURCE_TRUST["direct"]
# The most importance a player's words may be filed with is `PLAYER_IMPORTANCE_SHARE` of the
# tool's scale (`memory.provenance`, which caps the LLM's score of their lines the same way).


@dataclasses.dataclass(frozen=True)
class Grant:
    """
    Whom a turn acts for, and so what it may do.

    Attributes:
        authority (str): `OWN`, `ADMIN` or `PLAYER`.
        speaker (dict or None): `{"id", "name"}` of the person whose words drive the turn.
        trust_cap (float or None): The most trust a recorded item may carry (PLAYER turns).
        speakers (tuple): In an own pass over a conversation, the names of those who spoke in
            it: what the pass records must be sourced to one of them.
        provenance (dict or None): Where what this turn records comes from (the speaker, how
            they were heard, the journal entries of their words): `record_provenance` hands
            it, trust capped, to every sourced tool as its `provenance` argument.
        speaker_lines (tuple): In an own pass over a conversation, `(name, speaker id,
            journal id)` of each line reviewed: what a record sourced to one of them rests on.
    """

    authority: str = OWN
    speaker: dict | None = None
    trust_cap: float | None = None
    speakers: tuple = ()
    provenance: dict | None = None
    speaker_lines: tuple = ()

    def permits(self, tool):
        """True when this turn may run `tool` at all."""
        return self.authority != PLAYER or tool.reach == SCOPED

    def admit(self, tool, params):
        """
        Check one call against this turn's trust, limiting its arguments where needed.

        Args:
            tool (Tool): The tool called.
            params (dict): Its validated arguments (not changed).

        Returns:
            tuple: `(params to run with, refusal message or None, notes for the model)`.
        """
        if not self.permits(tool):
            return params, refusal(tool, self), []
        if self.authority != PLAYER:
            if tool.sourced and self.trust_cap is not None:  # an own pass over players' words
                params = dict(params)
                misattributed = self._misattributed(params)
                if misattributed:
                    return params, misattributed, []
                notes = self._cap_trust(tool, params, "what players said")
                params["provenance"] = self.record_provenance(params)
                return params, None, notes
            if tool.sourced:
                params = dict(params)
                params["provenance"] = self.record_provenance(params)
            return params, None, []
        params, notes = dict(params), []
        speaker = str((self.speaker or {}).get("name") or "")
        recipient = tool.recipient_argument
        if recipient and recipient in params:
            if str(params[recipient]).strip().lower() != speaker.lower():
                return params, (
                    f"'{tool.name}' may only go to {speaker or 'the person you are answering'} "
                    "in this conversation: private messages to others are not yours to send "
                    "on a player's word"), []
        if tool.sourced:
            notes += self._source_to_speaker(tool, params, speaker)
            params["provenance"] = self.record_provenance(params)
        return params, None, notes

    def record_provenance(self, params):
        """
        The provenance of what a sourced tool records in this turn (`memory.provenance`),
        never the model's say-so: a player's turn records that player's words (their id, how
        they were heard, the journal entries of what they said) at their trust at most; an
        admin's turn the admin's statement; an own pass over a conversation the named
        speaker's lines at a player's trust; any other own turn the assistant's own thought,
        or, when it names who told it, that person's word (never an admin's).

        Args:
            params (dict): The call's arguments, trust already capped.

        Returns:
            dict: The provenance.
        """
        wanted = params.get("source_trust")
        wanted = None if isinstance(wanted, bool) or not isinstance(wanted, int | float) \
            else float(wanted)
        if self.authority == ADMIN:
            return dict(self.provenance or provenance.build(provenance.CHANNEL_ADMIN))
        if self.authority == PLAYER:
            base = self.provenance or provenance.build(
                provenance.CHANNEL_TOLD, speaker=(self.speaker or {}).get("name"),
                speaker_id=(self.speaker or {}).get("id"))
            trust = base["trust"] if wanted is None else min(wanted, base["trust"])
            return provenance.build(base["channel"], speaker=base["speaker"],
                                    speaker_id=base["speaker_id"], trust=trust,
                                    derived_from=base["derived_from"])
        named = " ".join(str(params.get("source_entity") or "").split())
        if self.speaker_lines:  # a review of a conversation: the named speaker's lines
            lines = [line for line in self.speaker_lines if line[0].lower() == named.lower()]
            speaker_id = next((line[1] for line in lines if line[1]), None)
            refs = [provenance.ref("journal", line[2]) for line in lines if line[2] is not None]
            cap = self.trust_cap if self.trust_cap is not None else PLAYER_SOURCE_TRUST
            return provenance.build(provenance.CHANNEL_TOLD, speaker=named or None,
                                    speaker_id=speaker_id, derived_from=refs,
                                    trust=cap if wanted is None else min(wanted, cap))
        channel = provenance.CHANNEL_TOLD if named else provenance.CHANNEL_OWN
        ceiling = provenance.CHANNEL_TRUST[channel]
        return provenance.build(channel, speaker=named or None,
                                trust=ceiling if wanted is None else min(wanted, ceiling))

    def _misattributed(self, params):
        """A refusal when a pass over a conversation credits someone who did not speak in it."""
        if not self.speakers:
            return None
        named = str(params.get("source_entity") or "").strip().lower()
        if named in {speaker.lower() for speaker in self.speakers}:
            return None
        return ("source_entity must name who said it in the conversation you are reviewing: "
                f"one of {', '.join(self.speakers)}; {params.get('source_entity')!r} did not "
                "speak there")

    def _source_to_speaker(self, tool, params, speaker):
        """
        Source a recorded item to the speaker, its trust capped at theirs (in place). A tool
        whose schema has no source (a scene note) is handed one all the same: the model cannot
        set it, only the grant does.
        """
        if speaker:
            params["source_entity"] = speaker
        return self._cap_trust(tool, params, speaker or "a player")

    def _cap_trust(self, tool, params, source):
        """Cap a recorded item's trust and importance (in place); notes for the model."""
        properties = tool.parameters.get("properties") or {}
        notes = _cap_importance(properties, params, source)
        if "source_trust" not in properties:  # recorded with the cap as its trust
            params["source_trust"] = (PLAYER_SOURCE_TRUST if self.trust_cap is None
                                      else self.trust_cap)
            return notes
        source_type = params.get("source_type")
        if source_type not in DEFAULT_SOURCE_TRUST:
            source_type = "direct"
        wanted = params.get("source_trust")
        default = DEFAULT_SOURCE_TRUST[source_type]
        trust = default if wanted is None else wanted
        cap = self.trust_cap if self.trust_cap is not None else PLAYER_SOURCE_TRUST
        if "source_trust" in properties and (wanted is not None or default > cap):
            params["source_trust"] = min(float(trust), cap)
            if float(trust) > cap:
                notes.append(f"source_trust capped at {cap:g}: it came from {source}")
        return notes


def _cap_importance(properties, params, source):
    """Cap a requested importance at `PLAYER_IMPORTANCE_SHARE` of its scale (in place)."""
    scale = properties.get("importance")
    wanted = params.get("importance")
    if not scale or isinstance(wanted, bool) or not isinstance(wanted, int | float):
        return []
    cap = PLAYER_IMPORTANCE_SHARE * float(scale.get("maximum", 10))
    if scale.get("type") == "integer":
        cap = int(cap)
    if wanted <= cap:
        return []
    params["importance"] = cap
    return [f"importance capped at {cap:g}: it came from {source}"]


def refusal(tool, grant):
    """The message a model gets for a tool its turn may not run."""
    who = (grant.speaker or {}).get("name") or "a player"
    return (f"'{tool.name}' is not permitted in a turn driven by what {who} said: it has "
            "lasting effects, which only your own turns or an admin's order may have. Answer "
            "in words instead.")


def _speakers(messages):
    """The names of the players who spoke in a reviewed conversation, each once."""
    names = (str(m.get("name") or "").strip() for m in messages
             if isinstance(m, dict) and m.get("role") == "user")
    return tuple(dict.fromkeys(name for name in names if name))


def _review_lines(messages):
    """`(name, speaker id, journal id)` of each player's line in a reviewed conversation."""
    return tuple((str(m.get("name") or "").strip(), m.get("speaker_id"), m.get("journal_id"))
                 for m in messages or ()
                 if isinstance(m, dict) and m.get("role") == "user"
                 and str(m.get("name") or "").strip())


def turn_provenance(authority, speaker, worded):
    """
    Where the words driving a turn came from: its speaker, how they were heard (whispered,
    told directly, or, for an admin's turn, the admin's statement), and the journal entries
    of their lines (`derived_from`).
    """
    speaker = speaker or {}
    refs = [provenance.ref("journal", event["journal_id"]) for event in worded
            if event.get("journal_id") is not None
            and (authority == ADMIN or event.get("sender_id") == speaker.get("id"))]
    if authority == ADMIN:
        channel = provenance.CHANNEL_ADMIN
    elif any(event.get("kind") in ("whisper", "page") for event in worded
             if event.get("sender_id") == speaker.get("id")):
        channel = provenance.CHANNEL_WHISPERED
    else:
        channel = provenance.CHANNEL_TOLD
    return provenance.build(channel, speaker=speaker.get("name"), speaker_id=speaker.get("id"),
                            derived_from=refs)


def _has_words(event):
    return bool(str(event.get("text") or "").strip()) and event.get("classification") != "self"


def grant_for(situation):
    """
    The grant of a turn, from its situation (`agent.context.build_messages`' input).

    A turn whose events carry anyone's words acts for them: ADMIN when every one of those
    events is an admin's (`event["admin"]`), else PLAYER (the speaker is the interlocutor).
    A turn with no one's words in its events is the assistant's own (OWN), unless it is a
    conversation, which always answers someone (PLAYER, to be safe); an own pass over a
    conversation's history (`compaction_review`) caps what it records at a player's trust.

    Args:
        situation (dict): `events`, `interlocutor`, `purpose`...

    Returns:
        Grant: The grant.
    """
    situation = situation or {}
    worded = [event for event in situation.get("events") or () if _has_words(event)]
    speaker = situation.get("interlocutor")
    if not worded and situation.get("purpose") != "conversation":
        # a pass over a conversation (pre-compaction review) records what players said
        review = situation.get("compaction_review")
        return Grant(OWN, trust_cap=PLAYER_SOURCE_TRUST if review else None,
                     speakers=_speakers(review or ()), speaker_lines=_review_lines(review))
    if worded and all(event.get("admin") is True for event in worded):
        return Grant(ADMIN, speaker=speaker,
                     provenance=turn_provenance(ADMIN, speaker, worded))
    if speaker is None and worded:
        speaker = {"id": worded[0].get("sender_id"), "name": worded[0].get("sender")}
    return Grant(PLAYER, speaker=speaker, trust_cap=PLAYER_SOURCE_TRUST,
                 provenance=turn_provenance(PLAYER, speaker, worded))


def tool_set(tools, situation, grant=None):
    """
    The tools a turn may run and those it describes to the model: one choice, by trust and
    by purpose.

    Args:
        tools (list[Tool]): What the mode allows (`ToolRegistry.available`).
        situation (dict): The turn's situation (purpose, events, interlocutor).
        grant (Grant, optional): Default `grant_for(situation)`.

    Returns:
        tuple: `(grant, permitted, offered, withheld)`: the grant, the tools it permits, the
        lean set of those to describe, and the tools the mode allows but the trust does not.
    """
    grant = grant or grant_for(situation)
    permitted = [tool for tool in tools if grant.permits(tool)]
    withheld = [tool for tool in tools if not grant.permits(tool)]
    request = " ".join(str(event.get("text") or "")
                       for event in (situation or {}).get("events") or ())
    offered = lean_tools(permitted, (situation or {}).get("purpose"), request)
    return grant, permitted, offered, withheld
