"""
Importance: how much a journal entry matters, scored at once without an LLM.

The specification's importance scoring has two tiers. This module is the first:
`score_importance_heuristic` runs as soon as an entry is written, with no LLM, using the
specification's Generative-Agents importance heuristic exactly - including that keywords are
*substring* matches ("quest" also scores "question", "war" also scores "reward").

The second tier, the batched LLM judgement that upgrades heuristic scores during sleep
(`importance_method` "heuristic" -> "llm"), is the sleep step `ai_assistant.sleep.scoring`.
The importance gathered toward the next reflection is kept by
`ai_assistant.memory.reflection_state`.
"""

# How the source of an entry moves its score (the specification's heuristic).
SOURCE_MODIFIERS = {
    "direct": 2,
    "observation": 1,
    "inference": 0,
    "environmental": -1,
}
HIGH_KEYWORDS = (
    "player", "conflict", "discovery", "secret", "revealed",
    "attack", "danger", "important", "urgent", "critical",
    "death", "birth", "marriage", "betrayal", "alliance",
    "war", "peace", "treasure", "quest",
)  # fmt: skip
LOW_KEYWORDS = ("routine", "walked", "moved", "entered", "ordinary")
MIN_IMPORTANCE = 1
MAX_IMPORTANCE = 10


def clamp_importance(value):
    """
    Args:
        value (int or float): Any number.

    Returns:
        int: Rounded and clamped to 1-10.
    """
    return max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, int(round(value))))


def score_importance_heuristic(content, source_type="observation", tags=None):
    """
    Score an entry at once, without an LLM (the first tier; the specification's arithmetic).

    Base 5; source type direct +2, observation +1, inference 0, environmental -1; +2 for each
    high keyword found as a substring (at most +4); -1 for each low keyword; +1 when longer than
    200 characters; +1 when it holds "!" or "?"; clamped to 1-10.

    Args:
        content (str): The entry text.
        source_type (str): direct, observation, inference or environmental.
        tags (list, optional): Unused by the specification's rule; accepted so callers can pass
            them.

    Returns:
        int: 1-10.
    """
    text = content.lower()
    score = 5
    score += SOURCE_MODIFIERS.get(source_type, 0)
    keyword_bonus = sum(2 for keyword in HIGH_KEYWORDS if keyword in text)
    score += min(keyword_bonus, 4)
    score -= sum(1 for keyword in LOW_KEYWORDS if keyword in text)
    if len(content) > 200:
        score += 1
    if "!" in content or "?" in content:
        score += 1
    return max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, score))
