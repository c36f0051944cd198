"""
The "People you know" prompt block: what the assistant knows about the people around it.

For the person it talks with and the others present, the block shows the relationship (band,
current favorability after decay, interactions) and the notes of their entity profile
(`ai_assistant.memory.entities`): consolidated attributes and the most recent observations,
quoted as untrusted text since players wrote them.
"""

from ai_assistant.memory.entities import current_relationship, get_profiles
from ai_assistant.plumbing.quoting import quote_untrusted, safe_name


def _people_in(situation):
    people = []
    interlocutor = situation.get("interlocutor")
    if isinstance(interlocutor, dict) and interlocutor.get("id"):
        people.append(interlocutor["id"])
    for person in situation.get("present") or ():
        person_id = person.get("id") if isinstance(person, dict) else person
        if person_id and person_id not in people:
            people.append(person_id)
    return people


def entity_context_block(ports, situation):
    """
    Context provider: what the assistant knows about the person it talks with and the others
    present (`situation["interlocutor"]`, `situation["present"]`), at most
    `entities.context_max_profiles` of them.

    Returns:
        str or None: The block, or None when it knows nobody here.
    """
    profiles = get_profiles(ports)
    limit = int(ports.settings.get("entities.context_max_profiles"))
    recent = int(ports.settings.get("entities.context_observations"))
    now = ports.clock.now()
    blocks = []
    for entity_id in _people_in(situation or {}):
        profile = profiles.get(entity_id)
        if profile is None:
            continue
        relationship = current_relationship(profile, now, ports.settings)
        header = (
            f"{safe_name(profile.get('name'))} ({profile.get('entity_type')}): "
            f"{relationship['state']}, favorability {relationship['favorability']:.2f}, "
            f"{relationship.get('interaction_count', 0)} interactions"
        )
        notes = [f"{key}: {value}" for key, value in (profile.get("attributes") or {}).items()]
        notes += (
            [f"recently: {o.get('text')}" for o in (profile.get("observations") or [])[-recent:]]
            if recent > 0
            else []
        )
        if notes:
            header += "\n" + quote_untrusted("\n".join(notes), "NOTES ABOUT A CHARACTER")
        blocks.append(header)
        if len(blocks) >= limit:
            break
    return "\n\n".join(blocks) or None

