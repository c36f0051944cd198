"""
Forgetting people: the bound of the entity profiles document (a dreaming-phase step).

A busy assistant meets many strangers once and never again; each left a profile in
`documents.ENTITY_PROFILES`, so without a rule the document grows with everyone ever met. Two
rules keep it bounded, each dreaming tick (`prune_entity_profiles`):

1. **Forget passers-by**: a profile unseen for `entities.forget_after_days` days, with at most
   `entities.forget_max_observations` observations, no consolidated attributes and a
   relationship still in the "stranger" band (as of now, decay applied) is dropped.
2. **Hard cap**: past `entities.max_profiles` profiles, the least known go first - the fewest
   observations, then the longest unseen - whatever their age; a profile with attributes or a
   bond beyond "stranger" goes only after every one without.

What was learnt from a forgotten profile is not lost: its words are in the journal (bounded on
its own) and, once consolidated, in the semantic tier.
"""

from datetime import timedelta

from ai_assistant.memory.entities import current_relationship, get_profiles
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import parse_iso


def _is_passer_by(profile, now, settings):
    """True when the profile is a stranger met a few times, with nothing learnt about them."""
    if profile.get("attributes"):
        return False
    if int(profile.get("observation_count", 0)) > int(
            settings.get("entities.forget_max_observations")):
        return False
    return current_relationship(profile, now, settings).get("state") == "stranger"


def _keep_order(profile, now, settings):
    """Sort key: the profiles kept longest come last (known, observed, recently seen)."""
    known = not _is_passer_by(profile, now, settings)
    return (known, int(profile.get("observation_count", 0)), profile.get("last_seen") or "")


def prune_entity_profiles(ports):
    """
    Drop forgotten passers-by, then the least known profiles past `entities.max_profiles`.

    Args:
        ports (AssistantPorts): The assistant.

    Returns:
        dict: `{"success", "forgotten": n, "capped": n, "kept": n}`.
    """
    settings = ports.settings
    now = ports.clock.now()
    profiles = get_profiles(ports)
    horizon = now - timedelta(days=int(settings.get("entities.forget_after_days")))
    forgotten = [
        entity_id for entity_id, profile in profiles.items()
        if _is_passer_by(profile, now, settings)
        and (parse_iso(profile.get("last_seen")) or now) < horizon
    ]
    for entity_id in forgotten:
        del profiles[entity_id]
    excess = len(profiles) - int(settings.get("entities.max_profiles"))
    capped = []
    if excess > 0:
        ordered = sorted(profiles, key=lambda key: _keep_order(profiles[key], now, settings))
        capped = ordered[:excess]
        for entity_id in capped:
            del profiles[entity_id]
    if forgotten or capped:
        ports.state.set(documents.ENTITY_PROFILES, profiles)
    return {"success": True, "forgotten": len(forgotten), "capped": len(capped),
            "kept": len(profiles)}
