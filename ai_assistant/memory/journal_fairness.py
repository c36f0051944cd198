"""
Fairness of the journal between speakers: no speaker can crowd out another.

Two pure rules the journal (`memory.journal`) applies:

- **Eviction is per speaker.** When a full journal must drop an unconsolidated entry, it drops
  one of the speaker who holds the most unconsolidated entries (their least important, oldest
  first). An unconsolidated entry is therefore never lost because *another* speaker flooded
  the journal: a burst only ever costs its own speaker's lines until every speaker holds as
  many as the flooder. Consolidated entries (already in long-term memory) still go first,
  and [SYNTHESIS] entries last.
- **Repetition decays the heuristic score.** The n-th line from one speaker within
  `journal.repeat_window_minutes` that resembles one of their earlier lines (the same alarm
  keywords, or the same words once numbers are stripped) scores one point lower for every
  such line beyond `journal.repeat_free`, down to 1: 110 alarm-worded whispers do not all
  score 10.

Scoring and consolidation take unconsolidated entries in turn per speaker (`fair_order`), so
before a burst's lines are all consolidated the others' are too.

A speaker is the entry's stable speaker id when it has one (`speaker_id`), else its
`source_entity` name (case-insensitive); the assistant's own entries share the empty speaker.
"""

import functools
import re
from datetime import timedelta

from ai_assistant.memory.importance import HIGH_KEYWORDS, MIN_IMPORTANCE
from ai_assistant.plumbing.ports import parse_iso

SYNTHESIS_PREFIX = "[SYNTHESIS]"
_WORD = re.compile(r"[a-z]+")
_QUOTED = re.compile(r'"(.*)"', re.DOTALL)
# Lines that share at least this share of their words are "the same pattern".
SIMILAR_WORDS = 0.6
# The newest entries a new line is compared with: a burst shows in the last lines, and a write
# stays cheap in a large, busy journal.
REPEAT_SCAN = 200


def speaker_key(entry):
    """
    Returns:
        str: Who an entry came from, for fairness (`""` for the assistant's own entries).
    """
    return _normalised(entry.get("speaker_id") or entry.get("source_entity"))


def _normalised(speaker):
    return str(speaker or "").strip().lower()


def _synthesis(entry):
    return str(entry.get("content", "")).startswith(SYNTHESIS_PREFIX)


def eviction_order(journal, count):
    """
    Positions of the `count` entries a full journal drops first (see the module doc).

    Args:
        journal (dict): A journal document (`entries`, `consolidated_entry_ids`).
        count (int): How many must go.

    Returns:
        list[int]: Positions in `journal["entries"]`, in the order they go.
    """
    entries = journal["entries"]
    consolidated = set(journal.get("consolidated_entry_ids") or ())
    doomed, synthesis, by_raw = [], [], {}
    for position, entry in enumerate(entries):  # one pass: a full journal drops one per add
        if _synthesis(entry):
            synthesis.append(position)
        elif entry.get("id") in consolidated:
            doomed.append(position)
            if len(doomed) == count:  # the usual case: the oldest consolidated entries go
                return doomed
        else:  # grouped as written, normalised once per name (this runs on every add)
            by_raw.setdefault(entry.get("speaker_id") or entry.get("source_entity"),
                              []).append(position)
    by_speaker = {}
    for raw, positions in by_raw.items():
        by_speaker.setdefault(_normalised(raw), []).extend(positions)

    def weakest(positions):
        return min(positions, key=lambda p: (entries[p].get("importance", 0), p))

    while len(doomed) < count and by_speaker:
        # the speaker holding the most goes first; among equals, the least important line
        most = max(len(positions) for positions in by_speaker.values())
        _, position, speaker = min(
            (entries[w].get("importance", 0), w, s)
            for s, positions in by_speaker.items() if len(positions) == most
            for w in (weakest(positions),))
        by_speaker[speaker].remove(position)
        if not by_speaker[speaker]:
            del by_speaker[speaker]
        doomed.append(position)
    synthesis.sort(key=lambda p: (entries[p].get("importance", 0), p))
    return doomed + synthesis[: count - len(doomed)]


def fair_order(entries):
    """
    Entries taken in turn per speaker: each speaker's oldest first, speakers in the order of
    their oldest entry (round robin), so a flood from one speaker does not make another wait
    behind all of it (scoring and consolidation batches). One speaker's entries keep their
    order, so a journal with a single speaker stays oldest first.

    Args:
        entries (list): Journal entries, oldest first.

    Returns:
        list: The same entries, interleaved by speaker.
    """
    queues = {}
    for entry in entries:
        queues.setdefault(speaker_key(entry), []).append(entry)
    ordered, rounds = [], list(queues.values())
    for turn in range(max((len(queue) for queue in rounds), default=0)):
        ordered.extend(queue[turn] for queue in rounds if turn < len(queue))
    return ordered


@functools.lru_cache(maxsize=1024)  # the same recent lines are compared on every add
def _pattern(text):
    """The alarm keywords a line holds and its words with numbers stripped."""
    lowered = str(text or "").lower()
    quoted = _QUOTED.search(lowered)  # heard lines: 'Eve said to me: "..."' - the words said
    lowered = quoted.group(1) if quoted else lowered
    keywords = frozenset(k for k in HIGH_KEYWORDS if k in lowered)
    return keywords, frozenset(_WORD.findall(lowered))


def _alike(one, other):
    if one[0] and one[0] == other[0]:
        return True
    words, others = one[1], other[1]
    if not words or not others:
        return False
    return len(words & others) / max(len(words), len(others)) >= SIMILAR_WORDS


def repeat_penalty(journal, content, speaker, now, settings):
    """
    How much lower a new line's heuristic score goes for repeating its speaker's pattern.

    Args:
        journal (dict): The journal document before the line is added.
        content (str): The new line.
        speaker (str): `speaker_key` of the new line ("" is never penalised: the assistant's own).
        now (datetime): When it is written.
        settings (Settings): For `journal.repeat_window_minutes` and `journal.repeat_free`.

    Returns:
        int: Points to subtract (0 when the line is not a repeat).
    """
    window = float(settings.get("journal.repeat_window_minutes"))
    if not speaker or window <= 0:
        return 0
    since = now - timedelta(minutes=window)
    pattern = _pattern(str(content or ""))
    repeats = 0
    for entry in reversed(journal["entries"][-REPEAT_SCAN:]):
        if speaker_key(entry) != speaker:
            continue
        moment = parse_iso(entry.get("timestamp"))
        if moment is not None and moment < since:
            break  # entries are oldest first: the speaker's earlier ones are older still
        if _alike(pattern, _pattern(str(entry.get("content") or ""))):
            repeats += 1
    return max(0, repeats + 1 - int(settings.get("journal.repeat_free")))


def decayed_score(score, penalty):
    """A heuristic score less a repeat penalty, never below the lowest importance."""
    return max(MIN_IMPORTANCE, int(score) - int(penalty))
