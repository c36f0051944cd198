"""
The recall preview: what an assistant would remember if someone said something to it now.

"Why did Ada say that?" The preview builds the two prompt blocks a conversation turn builds
from memory - "What you remember" (`agent.blocks.remembered`) and the notes about the people here
(`agent.blocks.people`) - by calling the very functions the awake turn calls, with a situation
shaped as `agent.awake` shapes it: the speaker's words as a direct message, the conversation
history with them, the people present. The recall pipeline runs off the reactor as in a turn
(its worker pool). Each ranked item comes with its score, tier, source, audience and flags,
and whether its line made it into the block (the token budget leaves the rest out; lines are
never cut, and one too long for the prompt is flagged so).
"""

from twisted.internet import defer

from ai_assistant.agent.blocks.people import entity_context_block
from ai_assistant.agent.blocks.remembered import recall_query, remembered_block
from ai_assistant.memory.audience import PUBLIC, audience_of
from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.corrections import is_wrong
from ai_assistant.memory.entities import People
from ai_assistant.memory.longterm.supersede import is_superseded
from ai_assistant.memory.recall.lines import recall_line
from ai_assistant.memory.recall.pipeline import recall, too_long
from ai_assistant.plumbing.tokens import count_tokens

# The longest text a preview asks about (a turn's events are cut at 2,000 characters too).
MAX_PREVIEW_CHARS = 2000


class UnknownSpeaker(ValueError):
    """The preview names a speaker the assistant has no profile of."""


def _speaker(ports, speaker):
    if not str(speaker or "").strip():
        return None
    person = People(ports).find(speaker)
    if person is None:
        raise UnknownSpeaker(f"The assistant knows nobody called {speaker!r} (a name or an id "
                             "like #12 of someone it has met).")
    return {"id": person["entity_id"], "name": person.get("name") or person["entity_id"]}


def preview_situation(ports, text, speaker=""):
    """
    The situation a conversation turn would have if `speaker` said `text` to the assistant now
    (as `agent.awake._answer` shapes it).

    Raises:
        UnknownSpeaker: `speaker` names nobody the assistant has met.
    """
    interlocutor = _speaker(ports, speaker)
    event = {"kind": "say", "text": str(text)[:MAX_PREVIEW_CHARS], "priority": 9,
             "classification": "direct_message",
             "sender": interlocutor["name"] if interlocutor else "someone",
             "sender_id": interlocutor["id"] if interlocutor else None}
    return {
        "events": [event],
        "history": (Conversation(ports).for_speaker(interlocutor["id"]) if interlocutor
                    else []),
        "interlocutor": interlocutor,
        "mode": "awake",
        "purpose": "conversation",
        "present": ports.world.present() if ports.world else [],
        "private": False,
    }


def _row(found, in_block, max_line_tokens):
    item = found.item
    audience = audience_of(item)
    line = recall_line(item)  # whole, as the turn would show it
    flags = [name for name, on in (
        ("private", audience is not PUBLIC), ("superseded", is_superseded(item)),
        ("disputed", bool(item.get("disputed") or (item.get("metadata") or {}).get("disputed"))),
        ("marked wrong", is_wrong(item)),
        ("too long for the prompt", too_long(count_tokens(line) + 1, max_line_tokens))) if on]
    return {"line": line, "in_block": line in in_block, "score": round(float(found.score), 4),
            "tier": item.get("tier") or "journal", "id": str(item.get("id")),
            "source": {"type": item.get("source_type"), "entity": item.get("source_entity"),
                       "trust": item.get("source_trust"), "entry_id": item.get("entry_id")},
            "audience": audience, "flags": flags}


def recall_preview(npc, text, speaker=""):
    """
    The blocks a turn of `npc` would build if `speaker` said `text` now (reactor thread; the
    ranking runs in the recall pipeline's worker pool): `preview(npc.assistant.ports(), ...)`.
    """
    return preview(npc.assistant.ports(), text, speaker)


@defer.inlineCallbacks
def preview(ports, text, speaker=""):
    """
    The blocks a turn would build if `speaker` said `text` now.

    Returns:
        Deferred[dict]: `{"query", "speaker", "recall_block", "people_block", "lines"}`:
        the two blocks as a prompt shows them (None where a turn shows none) at recall's own
        budget (a reply fits the recall block again to what the rest of its request leaves,
        `recall.request_tokens`: a long request shows fewer lines, a short one more, chosen
        from the same ranking), and every ranked item (`score`, `tier`, `source`, `audience`, `flags`,
        `in_block`).
    """
    situation = preview_situation(ports, text, speaker)
    query = recall_query(ports, situation)
    recalled, lines = (yield recall(ports, query)) if query is not None else ([], [])
    situation["recall"] = lines
    in_block = set(lines)
    longest = ports.settings.get("recall.max_line_tokens")
    return {"query": situation["events"][0]["text"], "speaker": situation["interlocutor"],
            "recall_block": remembered_block(ports, situation),
            "people_block": entity_context_block(ports, situation),
            "lines": [_row(found, in_block, longest) for found in recalled]}
