"""
Corrections supersede: a new fact that contradicts or updates a stored one replaces it in recall,
and the old one is kept, marked superseded (when, and by which memory), instead of the new one
being dropped as a near-duplicate.

Told without an LLM, by general signals on two otherwise near-identical texts (their tokens
mostly shared, in order):

- `NEGATION`: one says it and the other denies it ("Alice is allergic to peanuts." / "Alice is
  not allergic to peanuts.", "... no longer ...", "isn't"), whatever auxiliaries change with it;
- `QUANTITY`: the numbers differ ("potions cost 10 gold" / "potions cost 50 gold", "three" /
  "five"), in one changed run with at most one other word beside them (a unit); a number that
  names rather than counts ("Room 12" / "Room 14") cannot be told apart without an LLM;
- `UPDATE`: a short run of words replaced, after the subject, in texts the embedder already
  finds near-identical ("The inn's door is green." / "The inn's door is red."), no antonym list
  needed. A replaced proper name ("Alice likes tea." / "Bob likes tea.") is another entity, not
  a correction: both stay current.

Texts with the same words are the same fact: exact duplicates stay deduplicated.

The recall pipeline calls `is_superseded(hit)` and `prefer_current(hits)` (current facts first,
superseded ones after them, marked with `formerly` so a prompt can say what was true before);
the claim policy (`longterm.policy`) calls `correction_kind`, `same_fact` and
`superseded_metadata`.
"""

import difflib
import re

from ai_assistant.memory.longterm.sources import is_outranked

NEGATION = "negation"
QUANTITY = "quantity"
UPDATE = "update"

# Shared tokens over the longer text's tokens at or above which two texts are near-identical.
NEAR_IDENTICAL_SHARE = 0.6
MAX_UPDATE_TOKENS = 3

NEGATIONS = frozenset((
    "not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither", "nor", "cannot",
    "isn't", "aren't", "wasn't", "weren't", "doesn't", "don't", "didn't", "won't", "can't",
    "couldn't", "shouldn't", "wouldn't", "hasn't", "haven't", "hadn't", "mustn't", "needn't",
))
# Words that come and go with a negation ("likes" / "does not like", "no longer").
AUXILIARIES = frozenset((
    "do", "does", "did", "is", "are", "was", "were", "am", "be", "been", "has", "have", "had",
    "will", "would", "can", "could", "should", "must", "longer", "anymore", "any", "more",
))
NUMBER_WORDS = frozenset((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    "hundred", "thousand", "million", "dozen", "half", "a", "an", "few", "several", "many",
))

_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*%?|[^\W\d_]+(?:['’][^\W\d_]+)?")


def tokens(text):
    """The words and numbers of `text`, in order, as written (apostrophes normalised)."""
    return [token.replace("’", "'") for token in _TOKEN.findall(str(text or ""))]


def _is_number(token):
    return token[:1].isdigit() or token.lower() in NUMBER_WORDS


def _negations(words):
    return sum(1 for word in words if word in NEGATIONS)


def _stem_match(first, second):
    """'likes' and 'like', 'owns' and 'own': the same word, inflected."""
    first, second = first.lower(), second.lower()
    shorter = min(len(first), len(second))
    return shorter >= 3 and first[:max(3, shorter - 1)] == second[:max(3, shorter - 1)]


def _diff(old_tokens, new_tokens):
    """`(shared count, removed, added, first changed position, number of changed runs)`."""
    matcher = difflib.SequenceMatcher(None, [t.lower() for t in old_tokens],
                                      [t.lower() for t in new_tokens], autojunk=False)
    removed, added, first, runs = [], [], None, 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        runs += 1
        first = i1 if first is None else first
        removed += old_tokens[i1:i2]
        added += new_tokens[j1:j2]
    shared = sum(block.size for block in matcher.get_matching_blocks())
    return shared, removed, added, first, runs


def _is_negation(old_words, new_words):
    """One denies what the other says: the same content words (one may be inflected), and
    negations in one but not the other."""
    if _negations(old_words) % 2 == _negations(new_words) % 2:
        return False
    old_content = [w for w in old_words if w not in NEGATIONS | AUXILIARIES]
    new_content = [w for w in new_words if w not in NEGATIONS | AUXILIARIES]
    if len(old_content) != len(new_content) or len(old_content) < 2:
        return False
    differing = [(a, b) for a, b in zip(old_content, new_content, strict=True) if a != b]
    return not differing or (len(differing) == 1 and _stem_match(*differing[0]))


def _is_quantity(removed, added):
    if not any(t[:1].isdigit() or t.lower() in NUMBER_WORDS - {"a", "an"} for t in removed) or \
            not any(t[:1].isdigit() or t.lower() in NUMBER_WORDS - {"a", "an"} for t in added):
        return False
    others = [t for t in removed if not _is_number(t)], [t for t in added if not _is_number(t)]
    return all(len(side) <= 1 for side in others)


def _is_proper_name(token, position):
    return position > 0 and token[:1].isupper()


def correction_kind(old, new, *, near_identical=False):
    """
    Whether `new` corrects or updates `old`, and how.

    Args:
        old (str): The stored fact.
        new (str): The fact being stored.
        near_identical (bool): The embedder finds them near-identical (at or above its
            duplicate similarity); needed for an `UPDATE`, the weakest signal.

    Returns:
        str or None: `NEGATION`, `QUANTITY` or `UPDATE`; None when `new` is the same fact (the
        same words) or another fact altogether.
    """
    old_tokens, new_tokens = tokens(old), tokens(new)
    old_words = [t.lower() for t in old_tokens]
    new_words = [t.lower() for t in new_tokens]
    if old_words == new_words or not old_words or not new_words:
        return None
    if _is_negation(old_words, new_words):
        return NEGATION
    shared, removed, added, first, runs = _diff(old_tokens, new_tokens)
    if shared < 2 or shared / max(len(old_words), len(new_words)) < NEAR_IDENTICAL_SHARE:
        return None
    if runs == 1 and _is_quantity(removed, added):
        return QUANTITY
    if (near_identical and runs == 1 and first and removed and added
            and len(removed) <= MAX_UPDATE_TOKENS and len(added) <= MAX_UPDATE_TOKENS
            and not _negations(old_words) and not _negations(new_words)):
        names = [t for offset, t in enumerate(removed) if _is_proper_name(t, first + offset)]
        names += [t for t in added if t[:1].isupper()]
        if not names:
            return UPDATE
    return None


def same_fact(old, new):
    """True when two texts have the same words (an exact duplicate, whatever the punctuation)."""
    return [t.lower() for t in tokens(old)] == [t.lower() for t in tokens(new)]


def superseded_metadata(new_id, kind, when):
    """The metadata that marks a memory superseded by memory `new_id` at `when` (ISO text)."""
    return {"superseded_by": str(new_id), "superseded_at": when, "superseded_how": kind}


def is_superseded(item):
    """
    Whether a memory (a semantic hit, or anything with `metadata`) was superseded by a newer
    fact: recall shows current facts first and this one only as what was true before.
    """
    if not isinstance(item, dict):
        return False
    return bool((item.get("metadata") or {}).get("superseded_by") or item.get("superseded_by"))


def prefer_current(hits):
    """
    Current facts first (in their order), then testimony a more trusted source contradicts
    (`sources.is_outranked`), then the superseded ones, each marked
    `formerly: True` so a prompt or a tool result can say "(formerly: ...)".

    Args:
        hits (list[dict]): Recall results, best first.

    Returns:
        list[dict]: The same hits, reordered (copies of the superseded ones).
    """
    current = [hit for hit in hits if not is_superseded(hit) and not is_outranked(hit)]
    outranked = [hit for hit in hits if not is_superseded(hit) and is_outranked(hit)]
    former = [{**hit, "formerly": True} for hit in hits if is_superseded(hit)]
    return current + outranked + former
