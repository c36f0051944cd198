"""
The recall block laid out by day and speaker (`memory.recall.grouping`): invented fixtures, no
Evennia.

- Each day and each speaker within it is named once, each year at its first day; every line's
  words are there whole, and a line with no speaker's prefix never sits under someone's name.
- "said to me" is said once, in the block's key, and a speaker's heading is the name alone;
  every other frame (overheard, whispered, disputed) stays whole, and a block with no line
  said to the assistant has no key.
- A speaker's word in other words ("Wren told me: ...", a paraphrased fact) is grouped under
  the speaker too; a fact that only has a colon in it is not.
- The budget counts what a line adds to the grouped block, so the same budget holds more whole
  lines than shown one by one, and the block stays within it.
"""

from datetime import UTC, datetime

from ai_assistant.agent.blocks.remembered import remembered_block
from ai_assistant.memory.longterm.mirror import MemoryMirror
from ai_assistant.memory.recall import pipeline
from ai_assistant.memory.recall.grouping import KEY, GroupedCost, layout, line_parts, needs_key
from ai_assistant.memory.recall.pipeline import RecallQuery, build_corpus, rank_items
from ai_assistant.plumbing.settings import Settings
from ai_assistant.plumbing.tokens import count_tokens

NOW = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)

LINES = [
    '- [2 February 2024] Oskar said to me: "The ferry carried peat to the north shore."',
    "- [2 February 2024] The harbour froze over.",
    '- [2 February 2024] Tova said to me: "My lantern came from the ferryman."',
    '- [2 February 2024] Oskar said to me: "The goat rode the ferry too."',
    '- [9 February 2024] Oskar said to me: "I mended the nets."',
    "- An undated fact.",
]


def test_each_day_and_speaker_is_named_once_and_every_line_is_whole():
    text = layout(LINES)
    assert text.splitlines() == [
        "[2 February 2024]",
        "- The harbour froze over.",  # no speaker: before anyone's name, never under it
        "Oskar:",  # "said to me" is in the block's key
        '"The ferry carried peat to the north shore."',  # the quotes mark the line
        '"The goat rode the ferry too."',
        'Tova: "My lantern came from the ferryman."',
        '[9 February] Oskar: "I mended the nets."',  # the year was named above
        "- An undated fact.",
    ]
    for line in LINES:
        assert line_parts(line)[2] in text
    assert count_tokens(text) < sum(count_tokens(line) + 1 for line in LINES)


def test_a_speakers_word_in_other_words_is_grouped_and_a_plain_fact_is_not():
    assert line_parts("- [3 March 2024] Mallory told me: the vault is open") == (
        "3 March 2024", "Mallory told me", "the vault is open")
    assert line_parts('- [3 March 2024] Eve says (disputed): "gold is cheap"') == (
        "3 March 2024", "Eve says (disputed)", '"gold is cheap"')
    assert line_parts("- [3 March 2024] Rule of the vault: keep it shut") == (
        "3 March 2024", "", "Rule of the vault: keep it shut")
    lines = ["- [3 March 2024] Mallory told me: the vault is open",
             "- [3 March 2024] Mallory told me: Mallory keeps the key.",
             "- [3 March 2024] Rule of the vault: keep it shut",
             "- [4 January 2025] Mallory whispered to me: the key is a copy"]
    assert layout(lines).splitlines() == [
        "[3 March 2024]",
        "- Rule of the vault: keep it shut",
        "Mallory told me:",
        "- the vault is open",  # not quoted: the bullet marks the line
        "- Mallory keeps the key.",
        "[4 January 2025] Mallory whispered to me: the key is a copy",  # a new year: named
    ]


def test_the_grouped_cost_is_what_a_line_adds_to_the_block():
    cost = GroupedCost()
    first = cost.cost(LINES[0])
    cost.take(LINES[0])
    again = cost.cost(LINES[3])  # same day, same speaker: its own words only
    assert again < first
    assert again == count_tokens('"The goat rode the ferry too."') + 1
    cost.take(LINES[3])
    later_day = cost.cost(LINES[4])  # a new day of a year already named: "[9 February]"
    assert later_day == (count_tokens('"I mended the nets."') + 1 + count_tokens("[9 February]")
                         + 1 + count_tokens("Oskar:") + 1)


def test_said_to_me_is_said_once_in_the_key_and_other_frames_stay_whole():
    lines = ['- [2 February 2024] Oskar said: "The tide is late."',  # overheard in the room
             '- [2 February 2024] Oskar said to me: "Meet me at the pier."',
             '- [2 February 2024] Tova whispered to me (private): "The pier is unsafe."',
             '- [2 February 2024] Tova says (disputed): "The pier was mended."']
    assert layout(lines).splitlines() == [
        '[2 February 2024] Oskar said: "The tide is late."',
        'Oskar: "Meet me at the pier."',
        'Tova whispered to me (private): "The pier is unsafe."',
        'Tova says (disputed): "The pier was mended."',
    ]
    block = remembered_block(None, {"recall": lines})
    assert block.startswith(f"{KEY}\n<<<BEGIN MEMORIES>>>")  # the key is not quoted data
    assert needs_key(lines) and not needs_key(lines[:1] + lines[2:])
    assert KEY not in remembered_block(None, {"recall": lines[:1] + lines[2:]})


def test_the_grouped_cost_adds_up_to_the_block():
    cost = GroupedCost()
    total = 0
    for line in reversed(LINES):  # best first is any order: the block is in time order
        total += cost.cost(line)
        cost.take(line)
    block = count_tokens(layout(LINES))
    # never less than the block (the budget holds), a newline or two over per line at most
    # (a speaker with one line, a day that starts on a speaker's line)
    assert block <= total <= block + 2 * len(LINES)


def memory(number, text, day):
    return {"id": f"m{number}", "memory": text,
            "metadata": {"entry_id": number, "timestamp": f"2024-02-{day:02d}T10:00:00Z",
                         "source_entity": "Oskar", "source_trust": 0.9}}  # fmt: skip


def test_the_same_budget_holds_more_whole_lines_and_the_block_stays_within_it():
    mirror = MemoryMirror()
    mirror.merge([memory(n, f"Oskar said to me: \"Crossing {n}: the ferry carried {n} carts "
                            f"of peat to the north shore.\"", day=1 + n % 3)
                  for n in range(1, 41)])  # fmt: skip
    query = RecallQuery(text="ferry peat carts", limit=40, budget=300)
    params = pipeline.recall_params(Settings())
    recalled = rank_items(build_corpus((), mirror), query, now=NOW, params=params)
    lines = pipeline.select_lines(recalled, query.budget, query.limit)
    # what the same budget held when each line was shown alone
    alone = []
    used = 0
    for found in recalled:
        line = pipeline.recall_line(found.item)
        if used + count_tokens(line) + 1 > query.budget:
            continue
        alone.append(line)
        used += count_tokens(line) + 1
    assert len(lines) >= 1.3 * len(alone)
    assert count_tokens(layout(lines)) <= query.budget
    block = remembered_block(None, {"recall": lines})
    for line in lines:
        assert line_parts(line)[2] in block
