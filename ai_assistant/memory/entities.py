"""
Entity profiles: what the assistant knows about each character it meets (the specification's
second memory tier, O-Mem style).

`People(ports)` (or `npc.assistant.people`) is the only code that reads or writes
`documents.ENTITY_PROFILES`, which maps an entity id to::

    {
        "entity_id": "#12", "name": "Alice",
        "entity_type": "player",          # player | npc | assistant | object
        "attributes": {"preference": "Prefers tea, dislikes coffee"},   # Pa: stable facts
        "observations": [                 # Pf: raw, recent, oldest first
            {"id": 7, "text": "I'd love some tea", "time": "...", "source": "direct_message"},
        ],
        "observation_count": 7,           # id counter: ids never repeat
        "relationship": {"state": "stranger", "favorability": 0.12,
                         "interaction_count": 1, "updated_at": "..."},
        "relationship_history": [{"time", "favorability", "state"}],  # after each interaction
        "first_seen": "...", "last_seen": "...", "last_interaction": "...",
        "consolidated_through": 0,        # highest observation id an LLM pass has reviewed
        "last_consolidated": None,
    }

A profile is created the first time a character speaks where the assistant hears it; arrivals
and departures of known characters only move `last_seen`. Observations are bounded by
`entities.max_observations` (oldest dropped). During sleep, the entity consolidation step
(`ai_assistant.sleep.entity_consolidation`) turns the observations of an entity with at least
`entities.consolidation_min_observations` of them into attributes and prunes the observations
it consumed. What the assistant knows about the people present reaches its prompt through the
prompt block `ai_assistant.agent.blocks.people`.

Every reader of a relationship (the prompt's blocks, `@assistant/profile`, reports) goes
through `relationship_summary` / `relationship_text`, which read exactly the keys written here
(`state`, `favorability`, `interaction_count`, `updated_at`), with decay applied;
`People.relevant` picks the people a prompt shows (those present first, then the most
recently met).

**Relationship** (Dunbar bands, as the specification sets them): stranger < 0.25 <=
acquaintance < 0.50 <= friend < 0.75 <= ally (`entities.*_threshold`). Favorability follows one
deterministic rule:

1. a new profile starts at `entities.initial_favorability` (0.1, a stranger);
2. each direct interaction (a talk/whisper/page to the assistant, or speech naming it) adds
   `interaction_gain * (1 - f)` (0.02 of the remaining distance to 1: diminishing returns),
   weighted by `memory.relationship_pace` (the n-th in a period counts 1/n, repeats less);
3. that same line is read for sentiment with a small lexicon: more friendly cues ("thanks",
   "please", "appreciate"...) than hostile ones adds `positive_gain * (1 - f)`; more hostile cues
   ("idiot", "shut up"...) subtracts a flat `negative_penalty` (0.08; a rude word costs more
   than a kind one earns); the result is clamped to 0..1;
4. without contact, favorability drifts back toward the initial value with a half-life of
   `entities.decay_half_life_days` (30). The decay is applied lazily: the stored value is valid
   at `relationship["updated_at"]`; reads compute the decayed value (`current_relationship`)
   and the next interaction stores it before adding its own change.

Overheard room chatter becomes an observation but is not an interaction.
"""

import math
import re

from ai_assistant.memory import provenance as provenance_model
from ai_assistant.memory.attribute_sources import (
    ATTRIBUTE_PROVENANCE,
    derived_from_observations,
    judged_attributes,
)
from ai_assistant.memory.audience import PUBLIC, audience_of
from ai_assistant.memory.entity_pruning import profiles_to_drop
from ai_assistant.memory.relationship_pace import interaction_weight
from ai_assistant.plumbing import documents, state_changes
from ai_assistant.plumbing.ports import iso, parse_iso

ENTITY_TYPES = ("player", "npc", "assistant", "object")
RELATIONSHIP_HISTORY_LIMIT = 200  # points of `relationship_history` kept (the inspector's course)

SPEECH_KINDS = ("talk", "say", "whisper", "page", "pose")
INTERACTIONS = ("direct_message", "direct_addressing")

# Deliberately small and literal: the rule must be predictable, not clever.
POSITIVE_CUES = re.compile(
    r"\b(thanks|thank you|thank|thx|ty|please|appreciate[sd]?|grateful|kind|cheers|"
    r"well done|great|wonderful|friend)\b",
    re.IGNORECASE,
)
NEGATIVE_CUES = re.compile(
    r"\b(idiot|stupid|hate|shut up|useless|fool|dumb|moron|worthless|go away|pathetic|"
    r"get lost|liar)\b",
    re.IGNORECASE,
)


# ----------------------------------------------------------------------------------------------
# Relationship


def relationship_state(favorability, settings):
    """
    The Dunbar band of a favorability.

    Args:
        favorability (float): 0.0-1.0.
        settings (Settings): For the `entities.*_threshold` values.

    Returns:
        str: "stranger", "acquaintance", "friend" or "ally" (a threshold belongs to the band
        above it: exactly 0.25 is an acquaintance).
    """
    if favorability >= settings.get("entities.ally_threshold"):
        return "ally"
    if favorability >= settings.get("entities.friend_threshold"):
        return "friend"
    if favorability >= settings.get("entities.acquaintance_threshold"):
        return "acquaintance"
    return "stranger"


def sentiment(text):
    """
    Args:
        text (str): What a character said.

    Returns:
        int: +1 if it holds more friendly cues than hostile ones, -1 for the reverse, else 0.
    """
    text = str(text or "")
    balance = len(POSITIVE_CUES.findall(text)) - len(NEGATIVE_CUES.findall(text))
    return (balance > 0) - (balance < 0)


def decayed_favorability(relationship, now, settings):
    """
    The favorability now, after the drift toward neutral since it was stored.

    Args:
        relationship (dict): A profile's relationship.
        now (datetime): The current time.
        settings (Settings): For `entities.initial_favorability` and the half-life.

    Returns:
        float: The effective favorability.
    """
    stored = float(relationship.get("favorability", 0.0))
    neutral = float(settings.get("entities.initial_favorability"))
    half_life = float(settings.get("entities.decay_half_life_days") or 0)
    since = parse_iso(relationship.get("updated_at"))
    if half_life <= 0 or since is None:
        return stored
    days = max(0.0, (now - since).total_seconds() / 86400.0)
    return neutral + (stored - neutral) * math.pow(0.5, days / half_life)


def current_relationship(profile, now, settings):
    """
    Args:
        profile (dict): An entity profile.
        now (datetime): The current time.
        settings (Settings): The assistant's settings.

    Returns:
        dict: A copy of the relationship with the decayed favorability and its band.
    """
    relationship = dict(profile.get("relationship") or {})
    favorability = decayed_favorability(relationship, now, settings)
    relationship["favorability"] = round(favorability, 4)
    relationship["state"] = relationship_state(favorability, settings)
    return relationship


def relationship_summary(profile, now, settings):
    """
    The relationship of a profile as every reader shows it.

    Args:
        profile (dict): An entity profile (as stored, or a `People.profile` view).
        now (datetime): The current time (decay is applied up to it).
        settings (Settings): The assistant's settings.

    Returns:
        dict: `{"entity_id", "name", "entity_type", "state", "favorability", "interactions",
        "last_interaction", "text"}`; `text` reads like "friend (favorability 0.55, 12
        interactions)".
    """
    relationship = current_relationship(profile, now, settings)
    interactions = int(relationship.get("interaction_count", 0) or 0)
    favorability = float(relationship["favorability"])
    plural = "" if interactions == 1 else "s"
    return {
        "entity_id": profile.get("entity_id"),
        "name": profile.get("name") or profile.get("entity_id"),
        "entity_type": profile.get("entity_type") or "player",
        "state": relationship["state"],
        "favorability": favorability,
        "interactions": interactions,
        "last_interaction": profile.get("last_interaction"),
        "text": f"{relationship['state']} (favorability {favorability:.2f}, "
                f"{interactions} interaction{plural})",
    }


def relationship_text(profile, now, settings):
    """One line: `Alice (player): friend (favorability 0.55, 12 interactions)`."""
    summary = relationship_summary(profile, now, settings)
    return f"{summary['name']} ({summary['entity_type']}): {summary['text']}"


def apply_interaction(relationship, text, now, settings):
    """
    Change a relationship in place for one direct interaction (rules 2-4 of the module doc).

    Args:
        relationship (dict): A profile's relationship (modified).
        text (str): What the character said.
        now (datetime): When.
        settings (Settings): The assistant's settings.

    Returns:
        dict: The same relationship.
    """
    favorability = decayed_favorability(relationship, now, settings)
    weight = interaction_weight(relationship, text, now, settings)  # earned over time only
    favorability += weight * settings.get("entities.interaction_gain") * (1.0 - favorability)
    mood = sentiment(text)
    if mood > 0:
        favorability += weight * settings.get("entities.positive_gain") * (1.0 - favorability)
    elif mood < 0:
        favorability -= settings.get("entities.negative_penalty")
    favorability = min(1.0, max(0.0, favorability))
    relationship["favorability"] = round(favorability, 6)
    relationship["state"] = relationship_state(favorability, settings)
    relationship["interaction_count"] = int(relationship.get("interaction_count", 0)) + 1
    relationship["updated_at"] = iso(now)
    return relationship


# ----------------------------------------------------------------------------------------------
# Profiles


def new_profile(entity_id, name, entity_type, now, settings):
    """A fresh profile for a character met for the first time."""
    favorability = float(settings.get("entities.initial_favorability"))
    stamp = iso(now)
    return {
        "entity_id": entity_id,
        "name": name,
        "entity_type": entity_type if entity_type in ENTITY_TYPES else "player",
        "attributes": {},
        "observations": [],
        "observation_count": 0,
        "relationship": {
            "state": relationship_state(favorability, settings),
            "favorability": favorability,
            "interaction_count": 0,
            "updated_at": stamp,
        },
        "first_seen": stamp,
        "last_seen": stamp,
        "last_interaction": None,
        "consolidated_through": 0,
        "last_consolidated": None,
    }


def get_profiles(ports):
    """
    `{entity id: profile}`, for readers (recall reads the profiles through it); only `People`
    writes them.
    """
    return dict(ports.state.get(documents.ENTITY_PROFILES, {}) or {})


def _add_observation(profile, text, source, now, settings, audience=None, provenance=None):
    limit = int(settings.get("entities.max_observation_chars"))
    text = " ".join(str(text or "").split())
    if len(text) > limit:
        text = text[:limit] + "..."
    number = int(profile.get("observation_count", 0)) + 1
    profile["observation_count"] = number
    observation = {"id": number, "text": text, "time": iso(now), "source": source}
    if audience:
        observation["audience"] = str(audience)  # whispered: only its speaker may see it again
    if provenance is not None:
        observation["provenance"] = provenance  # who said it, how, and its journal entry
    profile["observations"].append(observation)
    bound = max(1, int(settings.get("entities.max_observations")))
    del profile["observations"][:-bound]


def _note_relationship(profile):
    """Keep the relationship now in the profile's bounded course (it outlives consolidation)."""
    relationship = profile["relationship"]
    profile.setdefault("relationship_history", []).append({
        "time": relationship.get("updated_at"), "favorability": relationship.get("favorability"),
        "state": relationship.get("state")})
    del profile["relationship_history"][:-RELATIONSHIP_HISTORY_LIMIT]


# ----------------------------------------------------------------------------------------------
# The owner


class People:
    """
    The people one assistant knows: the only code that reads or writes
    `documents.ENTITY_PROFILES`.

    Cheap to build (`People(ports)`, or `npc.assistant.people` in a game): it keeps nothing
    and reads the document afresh on every call.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    # -- reading

    def profiles(self):
        """`{entity id: profile}` as stored (a new dict; the profiles are the stored ones)."""
        return get_profiles(self.ports)

    def profile(self, entity_id):
        """
        Returns:
            dict or None: A copy of the profile with its relationship as of now (decay
            applied).
        """
        profile = self.profiles().get(entity_id)
        if profile is None:
            return None
        view = dict(profile)
        view["relationship"] = current_relationship(profile, self.ports.clock.now(),
                                                    self.ports.settings)
        return view

    def find(self, name_or_id):
        """
        Find a profile by id ("#12" or "12") or by name (case-insensitive; the most recently
        seen wins if names repeat), else by a unique name prefix.

        Returns:
            dict or None: As `profile`.
        """
        query = str(name_or_id or "").strip()
        if not query:
            return None
        profiles = self.profiles()
        for candidate in (query, f"#{query.lstrip('#')}", query.lstrip("#")):
            if candidate in profiles:
                return self.profile(candidate)
        lowered = query.lower()
        by_recency = sorted(profiles.values(), key=lambda p: p.get("last_seen") or "",
                            reverse=True)
        exact = [p for p in by_recency if str(p.get("name", "")).lower() == lowered]
        if exact:
            return self.profile(exact[0]["entity_id"])
        prefixed = [p for p in by_recency if str(p.get("name", "")).lower().startswith(lowered)]
        if len(prefixed) == 1:
            return self.profile(prefixed[0]["entity_id"])
        return None

    def relevant(self, people=(), limit=None):
        """
        The profiles a prompt shows: those of `people` (present, in order) first, then the
        others by most recent interaction.

        Args:
            people (iterable of str): Entity ids of the people present (the interlocutor
                first).
            limit (int, optional): At most this many.

        Returns:
            list[tuple]: `(profile, present)` pairs.
        """
        profiles = self.profiles()
        chosen = [(profiles[i], True) for i in dict.fromkeys(people) if i in profiles]
        here = {profile.get("entity_id") for profile, _ in chosen}
        others = sorted((p for i, p in profiles.items() if i not in here and isinstance(p, dict)),
                        key=lambda p: p.get("last_interaction") or p.get("last_seen") or "",
                        reverse=True)  # fmt: skip
        chosen += [(profile, False) for profile in others]
        return chosen if limit is None else chosen[: max(0, int(limit))]

    def due_for_consolidation(self):
        """
        Returns:
            list[str]: Ids of entities due for consolidation - at least
            `entities.consolidation_min_observations` observations, some not yet reviewed -
            the ones with the most observations first.
        """
        minimum = max(1, int(self.ports.settings.get("entities.consolidation_min_observations")))
        due = []
        for entity_id, profile in self.profiles().items():
            # whispered observations never become attributes (`sleep.entity_consolidation`)
            observations = [o for o in profile.get("observations") or []
                            if audience_of(o) is PUBLIC]
            reviewed = int(profile.get("consolidated_through", 0) or 0)
            if len(observations) >= minimum and any(o.get("id", 0) > reviewed
                                                    for o in observations):
                due.append((-len(observations), profile.get("last_consolidated") or "",
                            entity_id))
        return [entity_id for *_, entity_id in sorted(due)]

    # -- writing

    def _save(self, profiles, change=None):
        """Store the profiles; `change` says what changed (`plumbing.state_changes`), if known."""
        self.ports.state.set(documents.ENTITY_PROFILES, profiles, change=change)

    def observe(self, entity_id, name, text, *, source="direct_message", interaction=True,
                entity_type=None, audience=None, provenance=None):
        """
        Note that a character said something: the profile is created if new, the words become
        an observation, and a direct interaction moves the relationship.

        Args:
            entity_id (str): The character's stable id.
            name (str): Its display name.
            text (str): What it said (or did, for a pose).
            source (str): How it was perceived (an event classification).
            interaction (bool): True when it was addressed to the assistant.
            entity_type (str, optional): player, npc, assistant or object (kept if known).
            audience (str, optional): For words told in private, the id of who may see them
                (`memory.audience`); None for what the room heard.
            provenance (dict, optional): Where the words came from (`memory.provenance`);
                attributes made from the observation are derived from it.

        Returns:
            dict: The stored profile.
        """
        now, settings = self.ports.clock.now(), self.ports.settings
        profiles = self.profiles()
        profile = profiles.get(entity_id)
        if profile is None:
            profile = new_profile(entity_id, name, entity_type, now, settings)
            profiles[entity_id] = profile
        elif entity_type in ENTITY_TYPES:
            profile["entity_type"] = entity_type
        profile["name"] = name or profile.get("name")
        profile["last_seen"] = iso(now)
        if text and str(text).strip():
            _add_observation(profile, text, source, now, settings, audience, provenance)
        if interaction:
            apply_interaction(profile["relationship"], text, now, settings)
            profile["last_interaction"] = iso(now)
            _note_relationship(profile)
        # one speaker's profile, not every profile again (a store that logs changes)
        self._save(profiles, [state_changes.assign((entity_id,), profile)])
        return profile

    def seen(self, entity_id):
        """Move `last_seen` of a known character to now (a stranger gets no profile)."""
        profiles = self.profiles()
        if entity_id in profiles:
            profiles[entity_id]["last_seen"] = moment = iso(self.ports.clock.now())
            self._save(profiles, [state_changes.assign((entity_id, "last_seen"), moment)])

    def observe_events(self, events):
        """
        What perception saw (`agent.awake.PERCEPTION_LISTENERS`): speech updates the speaker's
        profile, arrivals and departures of known characters update `last_seen`.

        Args:
            events (list[dict]): A drained batch of perception events.
        """
        for event in events or ():
            entity_id = event.get("sender_id")
            if not entity_id or entity_id == self.ports.key or event.get("classification") in (
                    "self", "out_of_character"):
                continue
            if event.get("kind") not in SPEECH_KINDS:
                self.seen(entity_id)  # seen, but not an interaction
                continue
            private = event.get("kind") in ("whisper", "page")
            self.observe(
                entity_id,
                event.get("sender") or str(entity_id),
                event.get("text"),
                source="whisper" if private else event.get("classification") or event.get("kind"),
                interaction=event.get("classification") in INTERACTIONS,
                entity_type=event.get("sender_type") or self._type_from_world(entity_id),
                audience=entity_id if private else None,
                provenance=provenance_model.heard(event),
            )

    def _type_from_world(self, entity_id):
        if self.ports.world is None:
            return None
        try:
            for person in self.ports.world.present() or []:
                if person.get("id") == entity_id:
                    return "player" if person.get("is_player") else "npc"
        except Exception:  # a broken room only costs us the type
            return None
        return None

    def merge_attributes(self, entity_id, attributes, consumed, max_attributes):
        """
        Keep the attributes a consolidation found and prune the observations it consumed.

        Reads the profile fresh (observations may have arrived while the LLM thought). With
        nothing stable to say yet the observations stay, but are not re-sent until more come.

        Each attribute is derived from the observations consumed and judged against the one
        it would replace like a memory (`memory.attribute_sources`).

        Args:
            entity_id (str): The character's id.
            attributes (dict): `{type: value}` from the consolidation reply.
            consumed (set): Ids of the observations the consolidation read.
            max_attributes (int): Most attributes kept (the newest win).

        Returns:
            dict: `{"entity_id", "attributes": {...}, "pruned": n}`.
        """
        profiles = self.profiles()
        profile = profiles.get(entity_id)
        if profile is None:
            return {"entity_id": entity_id, "attributes": {}, "pruned": 0}
        before = len(profile.get("observations") or [])
        if attributes:
            derived = derived_from_observations(profile, consumed)
            kept = judged_attributes(profile, attributes, derived,
                                     iso(self.ports.clock.now()))
            merged = dict(profile.get("attributes") or {})
            merged.update(kept)
            # keep the newest facts when over the cap (dicts keep insertion order; refresh it)
            for key in kept:
                merged[key] = merged.pop(key)
            profile["attributes"] = dict(list(merged.items())[-max_attributes:])
            sources = dict(profile.get(ATTRIBUTE_PROVENANCE) or {})
            sources.update({key: derived for key in kept})
            profile[ATTRIBUTE_PROVENANCE] = {key: sources[key] for key in profile["attributes"]
                                             if key in sources}
            profile["observations"] = [
                o for o in profile.get("observations") or [] if o.get("id") not in consumed
            ]
        profile["consolidated_through"] = max(
            [int(profile.get("consolidated_through", 0) or 0)]
            + [i for i in consumed if isinstance(i, int)]
        )
        profile["last_consolidated"] = iso(self.ports.clock.now())
        self._save(profiles)
        pruned = before - len(profile.get("observations") or [])
        return {"entity_id": entity_id, "attributes": attributes, "pruned": pruned}

    def set_attribute(self, entity_id, attribute, value, provenance=None):
        """
        Set (or, with an empty `value`, remove) one attribute of a profile, by hand.

        The profile is replaced by a changed copy, so no cached view of it stays stale.

        `provenance` says where the value came from (an admin's correction); None records
        none (an older value put back without one).

        Returns:
            dict: The new profile.

        Raises:
            KeyError: When there is no profile of `entity_id`.
        """
        profiles = self.profiles()
        profile = dict(profiles[entity_id])
        attributes = dict(profile.get("attributes") or {})
        sources = dict(profile.get(ATTRIBUTE_PROVENANCE) or {})
        if value:
            attributes[attribute] = value
            if provenance is not None:
                sources[attribute] = provenance_model.validate(provenance)
            else:
                sources.pop(attribute, None)
        else:
            attributes.pop(attribute, None)
            sources.pop(attribute, None)
        profile["attributes"] = attributes
        profile[ATTRIBUTE_PROVENANCE] = sources
        profiles[entity_id] = profile
        self._save(profiles)
        return profile

    def prune(self):
        """
        Drop forgotten passers-by, then the least known profiles past `entities.max_profiles`
        (a dreaming-phase step; the rules are in `memory.entity_pruning`).

        Returns:
            dict: `{"success", "forgotten": n, "capped": n, "kept": n}`.
        """
        settings, now = self.ports.settings, self.ports.clock.now()
        profiles = self.profiles()
        forgotten, capped = profiles_to_drop(
            profiles, now, settings,
            band=lambda profile: current_relationship(profile, now, settings).get("state"))
        for entity_id in (*forgotten, *capped):
            del profiles[entity_id]
        if forgotten or capped:
            self._save(profiles)
        return {"success": True, "forgotten": len(forgotten), "capped": len(capped),
                "kept": len(profiles)}
