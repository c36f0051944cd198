"""
Forgetting people: the bound of the entity profiles document (a dreaming-phase step).

A busy assistant meets many strangers once and never again; each left a profile in
`documents.ENTITY_PROFILES`, so without a rule the document grows with everyone ever met. Two
rules keep it bounded, each dreaming tick (`People.prune`, which asks `profiles_to_drop`):

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

from ai_assistant.plumbing.ports import parse_iso


def _is_passer_by(profile, settings, band):
    """True when the profile is a stranger met a few times, with nothing learnt about them."""
    if profile.get("attributes"):
        return False
    if int(profile.get("observation_count", 0)) > int(
            settings.get("entities.forget_max_observations")):
        return False
    return band(profile) == "stranger"


def _keep_order(profile, settings, band):
    """Sort key: the profiles kept longest come last (known, observed, recently seen)."""
    known = not _is_passer_by(profile, settings, band)
    return (known, int(profile.get("observation_count", 0)), profile.get("last_seen") or "")


def profiles_to_drop(profiles, now, settings, band):
    """
    Which profiles to forget (rule 1), then which to drop past the cap (rule 2).

    Args:
        profiles (dict): `{entity id: profile}`; not changed.
        now (datetime): The current time.
        settings (Settings): For the `entities.*` bounds.
        band (callable): `band(profile) -> str`, the relationship band as of now ("stranger",
            ...), decay applied.

    Returns:
        tuple[list, list]: The ids forgotten as passers-by, and the ids capped.
    """
    horizon = now - timedelta(days=int(settings.get("entities.forget_after_days")))
    forgotten = [
        entity_id for entity_id, profile in profiles.items()
        if _is_passer_by(profile, settings, band)
        and (parse_iso(profile.get("last_seen")) or now) < horizon
    ]
    gone = set(forgotten)
    left = {key: profile for key, profile in profiles.items() if key not in gone}
    excess = len(left) - int(settings.get("entities.max_profiles"))
    capped = []
    if excess > 0:
        capped = sorted(left, key=lambda key: _keep_order(left[key], settings, band))[:excess]
    return forgotten, capped
