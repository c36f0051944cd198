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
  trust of what is said to the assistant directly), whatever trust the model chose.

`tool_set` picks both sets at once: the permitted tools (trust) and, among them, the lean set
described to the model (purpose: `registry.lean_tools`). A permitted tool that was not described
still runs when the model calls it by name; a tool outside the permitted set never runs, and the
model is told why (`refusal`).
"""

import dataclasses

from ai_assistant.memory.journal import DEFAULT_SOURCE_TRUST
from ai_assistant.tools.registry import SCOPED, lean_tools

OWN = "own"
ADMIN = "admin"
PLAYER = "player"

# What a player says to the assistant is at best a direct statement: that is its trust.
PLAYER_SOURCE_TRUST = DEFAULT_SOURCE_TRUST["direct"]


@dataclasses.dataclass(frozen=True)
class Grant:
    """
    Whom a turn acts for, and so what it may do.

    Attributes:
        authority (str): `OWN`, `ADMIN` or `PLAYER`.
        speaker (dict or None): `{"id", "name"}` of the person whose words drive the turn.
        trust_cap (float or None): The most trust a recorded item may carry (PLAYER turns).
    """

    authority: str = OWN
    speaker: dict | None = None
    trust_cap: float | None = None

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
                return params, None, self._cap_trust(tool, params, "what players said")
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
        return params, None, notes

    def _source_to_speaker(self, tool, params, speaker):
        """Source a recorded item to the speaker, its trust capped at theirs (in place)."""
        if speaker and "source_entity" in (tool.parameters.get("properties") or {}):
            params["source_entity"] = speaker
        return self._cap_trust(tool, params, speaker or "a player")

    def _cap_trust(self, tool, params, source):
        """Cap a recorded item's trust at `trust_cap` (in place); notes for the model."""
        properties = tool.parameters.get("properties") or {}
        notes = []
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


def refusal(tool, grant):
    """The message a model gets for a tool its turn may not run."""
    who = (grant.speaker or {}).get("name") or "a player"
    return (f"'{tool.name}' is not permitted in a turn driven by what {who} said: it has "
            "lasting effects, which only your own turns or an admin's order may have. Answer "
            "in words instead.")


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
        return Grant(OWN, trust_cap=PLAYER_SOURCE_TRUST if review else None)
    if worded and all(event.get("admin") is True for event in worded):
        return Grant(ADMIN, speaker=speaker)
    if speaker is None and worded:
        speaker = {"id": worded[0].get("sender_id"), "name": worded[0].get("sender")}
    return Grant(PLAYER, speaker=speaker, trust_cap=PLAYER_SOURCE_TRUST)


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
