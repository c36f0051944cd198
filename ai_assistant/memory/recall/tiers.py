"""
The tiers beyond the journal and the long-term store, as items recall ranks with the others.

- **Memory nodes** (the patrol's scenes): a living node becomes one item, its text the scene
  as `nodes.scene_to_text` tells it (setting, action, first line of dialogue, feeling), dated
  by the scene's first `when`. Dead nodes are forgotten and never recalled.
- **Entity profiles**: what the assistant learnt about a person (the profile's attributes,
  written by entity consolidation) becomes one item per person, "What I know about Alice:
  job: baker; likes: tea", dated when it was last consolidated. Observations are not items:
  each is a line the journal and the long-term store already hold.

Every item is journal-shaped (`content`, `timestamp`, `source_entity`, `importance`, `tier`),
so the journal's search ranks it alongside memories and entries; `source_key` keeps one item
per node and per person.
"""

from ai_assistant.memory import provenance
from ai_assistant.memory.nodes import DEAD, scene_to_text, when_date
from ai_assistant.memory.recall.lines import NODE_TIER, PROFILE_TIER, attribute_line

# Attributes shown per person (the profile keeps at most `entities.max_attributes`).
MAX_PROFILE_ATTRIBUTES = 12


def node_item(node):
    """
    A memory node as a recall item, or None for a forgotten (dead) or empty one.

    Args:
        node (dict): A node of the "memory_nodes" document.

    Returns:
        dict | None: id `node:<id>`, content, timestamp, importance (0-10), audience, tier,
        and `metadata` with its provenance (so its line says whose word it rests on).
    """
    if node.get("status") == DEAD:
        return None
    scene = node.get("scene") or {}
    when = scene.get("when") or []
    text = scene_to_text(node)
    date = when_date(when[0]) if when else ""
    if date and text.startswith(date):
        text = text[len(date):].lstrip(" —")  # the line shows the date on its own
    if not text.strip():
        return None
    item = {
        "id": f"node:{node.get('id')}",
        "content": text,
        "timestamp": date or node.get("created_at"),
        "importance": round(float(node.get("importance") or 0.0) * 10),
        "source_type": "observation",
        "tags": list(node.get("themes") or ()),
        "metadata": {provenance.KEY: provenance.of(node)},
        "tier": NODE_TIER,
    }
    if node.get("audience") not in (None, ""):
        item["audience"] = node["audience"]
    return item


def profile_item(profile):
    """
    What the assistant learnt about one person as a recall item, or None when nothing yet.

    Args:
        profile (dict): An entity profile.

    Returns:
        dict | None: id `profile:<entity id>`, content, timestamp, source_entity, tier.
    """
    attributes = profile.get("attributes") or {}
    # each attribute says whose account it is (`lines.attribute_line`)
    facts = [attribute_line(profile, key, value)
             for key, value in list(attributes.items())[:MAX_PROFILE_ATTRIBUTES]
             if str(value).strip()]  # fmt: skip
    if not facts:
        return None
    name = profile.get("name") or profile.get("entity_id")
    return {
        "id": f"profile:{profile.get('entity_id')}",
        "content": f"What I know about {name}: " + "; ".join(facts),
        "timestamp": profile.get("last_consolidated") or profile.get("last_seen"),
        "source_entity": name,
        "source_type": "inference",
        "tags": ["profile"],
        "tier": PROFILE_TIER,
    }


def tier_items(nodes, profiles):
    """
    The recall items of the memory nodes and the entity profiles.

    Args:
        nodes (dict): The "memory_nodes" document (`{id: node}`).
        profiles (dict): The "entity_profiles" document (`{entity id: profile}`).

    Returns:
        tuple[dict]: Node items, then profile items.
    """
    made = [node_item(node) for node in (nodes or {}).values()]
    made += [profile_item(profile) for profile in (profiles or {}).values()]
    return tuple(item for item in made if item is not None)
