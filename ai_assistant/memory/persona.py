"""
Persona protection: keep the assistant's memories about the world, not about itself.

One module, used by reflection (insights), session memory (facts and patterns) and semantic fact
extraction, so the three agree on what counts as self-reference (the specification's persona
protection for insights and for session memory, and its `ASSISTANT_FACT_EXTRACTION_PROMPT`).
"""

import re

# The specification's patterns, plus the first-person action forms its session-memory examples
# reject ("I helped the player", "The assistant suggested...").
SELF_REFERENCE_PATTERNS = (
    r"\bI should\b",
    r"\bmy behavior\b",
    r"\bmy behaviour\b",
    r"\bthe assistant\b",
    r"\bI need to\b",
    r"\bI will\b",
    r"\bI (?:helped|did|said|suggested|told|gave|made|decided|think|felt|feel|am|was)\b",
    r"\bI'm\b",
    r"\bI've\b",
    r"\bmy (?:personality|identity|role|purpose)\b",
)

_SELF_REFERENCE = re.compile("|".join(SELF_REFERENCE_PATTERNS), re.IGNORECASE)

SELF_REFERENCE_ERROR = "Content appears to reference assistant actions or identity"
SELF_REFERENCE_SUGGESTION = (
    "Session memory should contain facts about the WORLD, PLAYERS, "
    "or EVENTS - not what you did. Rephrase in third-person."
)

ASSISTANT_FACT_EXTRACTION_PROMPT = """
Extract only objective facts about the world, users, and events.
Use third-person, factual language focused on WORLD STATE, not assistant behavior.

NEVER extract:
- Assistant actions ("The assistant helped", "I did X")
- Assistant personality or identity information

ALWAYS extract:
- World state facts ("The tavern is in the north wing")
- User/player information ("Player Alice prefers formal address")
"""


def is_self_referential(text):
    """
    Args:
        text (str): An insight, fact or pattern.

    Returns:
        bool: True if it talks about the assistant itself rather than the world.
    """
    return bool(text) and _SELF_REFERENCE.search(text) is not None


def filter_insights(insights):
    """
    Drop self-referential insights.

    Args:
        insights (list): Strings, or dicts with an `"insight"` (or `"text"`) key.

    Returns:
        tuple: `(kept, rejected)` lists, in input order.
    """
    kept, rejected = [], []
    for item in insights:
        text = item if isinstance(item, str) else (item.get("insight") or item.get("text") or "")
        (rejected if is_self_referential(text) else kept).append(item)
    return kept, rejected
