"""
The "Notes on people here" prompt block: what the assistant has noted about the people around
it.

For the person it talks with and the others present, the block shows the notes of their entity
profile (`ai_assistant.memory.entities`): consolidated attributes and the most recent
observations, quoted as untrusted text since players wrote them. Their relationship is shown
once, in the system message (`blocks.memory_nodes.relationships_text`), and an observation that
repeats what is already in the prompt (a new event, a line of the recent conversation) is left
out: each fact appears once.
"""

from ai_assistant.agent.blocks.memory_nodes import people_in
from ai_assistant.memory.audience import visible_to
from ai_assistant.memory.entities import People
from ai_assistant.memory.recall import lines
from ai_assistant.plumbing.quoting import quote_untrusted, safe_name


def said_in_prompt(situation):
    """The texts the prompt already shows: the new events and the recent conversation."""
    texts = {" ".join(str(event.get("text") or "").split())
             for event in situation.get("events") or ()}  # fmt: skip
    for message in situation.get("history") or ():
        content = str(message.get("content") or "")
        texts.add(" ".join(content.removeprefix("(whispered) ").split()))
    texts.discard("")
    return texts


def _noted(ports, situation):
    """`(profile, recent observations shown)` of each person the block shows notes about."""
    profiles = People(ports).profiles()
    limit = int(ports.settings.get("entities.context_max_profiles"))
    recent = int(ports.settings.get("entities.context_observations"))
    already = said_in_prompt(situation)
    # a whispered observation is shown only in a prompt built for the one who whispered it
    viewer = (situation.get("interlocutor") or {}).get("id")
    for entity_id in people_in(situation)[:limit]:
        profile = profiles.get(entity_id)
        if profile is None:
            continue
        observations = [o for o in (profile.get("observations") or [])
                        if " ".join(str(o.get("text") or "").split()) not in already
                        and visible_to(o, viewer)]
        yield profile, (observations[-recent:] if recent else [])


def observations_shown(ports, situation):
    """
    The texts of the recent observations the block shows (whitespace collapsed): recall
    leaves the lines they come from to this block (`blocks.remembered.recall_query`), so each
    fact appears once.
    """
    return {" ".join(str(o.get("text") or "").split())
            for _, observations in _noted(ports, situation or {})
            for o in observations} - {""}  # fmt: skip


def entity_context_block(ports, situation):
    """
    Context provider: the notes about the person the assistant talks with and the others
    present (`situation["interlocutor"]`, `situation["present"]`), at most
    `entities.context_max_profiles` of them.

    Returns:
        str or None: The block, or None when it has no notes about anybody here.
    """
    blocks = []
    for profile, observations in _noted(ports, situation or {}):
        notes = [attribute_line(profile, key, value)
                 for key, value in (profile.get("attributes") or {}).items()]
        notes += [f"recently: {o.get('text')}" for o in observations]
        if notes:
            blocks.append(f"{safe_name(profile.get('name'))}:\n"
                          + quote_untrusted("\n".join(notes), "NOTES ABOUT A CHARACTER"))
    return "\n\n".join(blocks) or None


def attribute_line(profile, key, value):
    """
    One attribute as the prompt shows it (`memory.recall.lines.attribute_line`): a player's
    testimony says whose word it is ("Mallory told me: role: ..."), a dispute both sides; an
    admin's correction and anything kept before provenance existed reads as a note.
    """
    return lines.attribute_line(profile, key, value)
