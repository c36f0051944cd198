"""
Where a profile attribute came from, and what a new value may do to it.

A profile (`memory.entities`) keeps, beside its `attributes`, `attribute_provenance`: for each
attribute the provenance (`memory.provenance`) of the observations it was made from (their
references in `derived_from`, and the speaker and trust of the least trusted of them), or an
admin's correction. A consolidation's new value is judged against the current one by the same
rules as a memory (`longterm.sources.conflict`): a more trusted source's attribute (an admin's
correction) is never overwritten, a speaker may replace their own, and another source of equal
trust disputes it. What is not kept is recorded in `attribute_claims` as that speaker's
testimony, for staff to see.
"""

from ai_assistant.memory import provenance as provenance_model
from ai_assistant.memory.longterm.sources import SUPERSEDES, conflict

ATTRIBUTE_PROVENANCE = "attribute_provenance"  # {attribute: provenance}
ATTRIBUTE_CLAIMS = "attribute_claims"  # {attribute: [claims not kept: testimony]}
MAX_CLAIMS_PER_ATTRIBUTE = 5
KEEP, UNCHANGED = "keep", "unchanged"


def attribute_provenance(profile, attribute):
    """
    Where a profile attribute came from: its recorded provenance, or, for an attribute kept
    before provenance existed, the character's own word (attributes were only ever made from
    what they said).
    """
    recorded = (profile.get(ATTRIBUTE_PROVENANCE) or {}).get(attribute)
    if isinstance(recorded, dict):
        try:
            return provenance_model.validate(recorded)
        except provenance_model.ProvenanceError:
            pass
    return provenance_model.build(provenance_model.CHANNEL_TOLD, speaker=profile.get("name"),
                                  speaker_id=profile.get("entity_id"))


def derived_from_observations(profile, consumed):
    """The provenance of attributes made from the observations `consumed`."""
    observations = [o for o in profile.get("observations") or () if o.get("id") in consumed]
    inputs, refs = [], []
    for observation in observations:
        source = observation.get("provenance")
        if not isinstance(source, dict):  # an observation kept before provenance existed
            source = provenance_model.build(
                provenance_model.CHANNEL_TOLD, speaker=profile.get("name"),
                speaker_id=profile.get("entity_id"))
        inputs.append(source)
        refs.append(provenance_model.ref(
            "observation", f"{profile.get('entity_id')}:{observation.get('id')}"))
        refs += source.get("derived_from") or ()
    return provenance_model.derive(inputs, refs)


def judge_attribute(profile, attribute, value, derived):
    """
    What a consolidation's value does to a profile's attribute: the memories' rules
    (`longterm.sources.conflict`) applied to attributes.

    Returns:
        str: `KEEP` (new, or the same or a more trusted source replacing it, or an admin's
        word), `UNCHANGED` (the same value), or the conflict (`DISPUTES`, `OUTRANKED`): the
        value is then kept beside, as the speaker's testimony.
    """
    current = (profile.get("attributes") or {}).get(attribute)
    if current is None:
        return KEEP
    if " ".join(str(current).split()).casefold() == " ".join(str(value).split()).casefold():
        return UNCHANGED
    outcome = conflict({provenance_model.KEY: derived},
                       {provenance_model.KEY: attribute_provenance(profile, attribute)})
    return KEEP if outcome == SUPERSEDES else outcome


def judged_attributes(profile, attributes, derived, now):
    """
    The attributes of a consolidation that may be kept (`judge_attribute`); the others are
    recorded in the profile's `attribute_claims` as testimony (in place), stamped `now`.
    """
    kept, claims = {}, dict(profile.get(ATTRIBUTE_CLAIMS) or {})
    for key, value in attributes.items():
        outcome = judge_attribute(profile, key, value, derived)
        if outcome == KEEP:
            kept[key] = value
            claims.pop(key, None)  # settled by the same or a more trusted source
            continue
        if outcome == UNCHANGED:
            continue
        claim = {"value": value, "provenance": derived, "outcome": outcome, "time": now}
        claims[key] = [*[c for c in claims.get(key) or () if c.get("value") != value],
                       claim][-MAX_CLAIMS_PER_ATTRIBUTE:]
    if claims:
        profile[ATTRIBUTE_CLAIMS] = claims
    else:
        profile.pop(ATTRIBUTE_CLAIMS, None)
    return kept


def attributes_derived_from(profiles, reference):
    """
    Returns:
        list[tuple]: `(entity id, attribute, value, provenance)` of every attribute of
        `profiles` made from the record `reference` ("journal:12"), directly or through
        observations.
    """
    found = []
    for entity_id, profile in profiles.items():
        for attribute, value in (profile.get("attributes") or {}).items():
            recorded = (profile.get(ATTRIBUTE_PROVENANCE) or {}).get(attribute)
            if isinstance(recorded, dict) and reference in (recorded.get("derived_from") or ()):
                found.append((entity_id, attribute, value, recorded))
    return found
