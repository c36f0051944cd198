"""
The recall block chosen again for another budget (`memory.recall.fitting`) and fitted to the
request's budget (`agent.blocks.remembered.fit_to_request`): invented fixtures, no Evennia.
"""

from ai_assistant.agent.blocks.remembered import block_tokens, fit_to_request
from ai_assistant.memory.recall.fitting import RankedLine, RecallLines, choose

# best first; each a different day, so the block's order (oldest first) differs from the rank
RANKED = tuple(
    RankedLine(f"2024-02-{day:02d}T10:00:00Z",
               f'- [{day} February 2024] Oskar said to me: "Crossing {rank}: the ferry took '
               f'{rank} carts of peat and a goat to the north shore."')
    for rank, day in enumerate((14, 3, 22, 9, 17, 5, 27, 11, 1, 19), start=1)
)  # fmt: skip


def ranks(lines):
    return sorted(int(line.split("Crossing ")[1].split(":")[0]) for line in lines)


def test_a_larger_budget_adds_the_next_ranked_lines_and_a_smaller_drops_the_last():
    first = choose(RANKED, 120, limit=10)
    assert 1 <= len(first) < 10 and first.cost <= 120 and not first.complete
    assert ranks(first) == list(range(1, len(first) + 1))  # the best ones
    when = {ranked.line: ranked.when for ranked in RANKED}
    assert [when[line] for line in first] == sorted(when[line] for line in first)  # oldest first
    larger = first.fit(400)
    assert ranks(larger) == list(range(1, len(larger) + 1)) and len(larger) > len(first)
    smaller = larger.fit(60)
    assert ranks(smaller) == list(range(1, len(smaller) + 1)) and len(smaller) < len(first)
    everything = first.fit(0)  # no budget: every line, to the limit
    assert len(everything) == 10 and everything.complete
    assert len(first.fit(10_000)) == 10
    assert len(choose(RANKED, 0, limit=4)) == 4


def test_the_request_gives_recall_what_its_other_sections_leave():
    lines = choose(RANKED, 200, limit=10)
    budget = 1000
    roomy = fit_to_request(lines, 400, budget)  # short other sections: more lines
    assert len(roomy) > len(lines)
    assert 400 + block_tokens(roomy) <= budget
    crowded = fit_to_request(lines, 880, budget)  # long ones: fewer
    assert 0 < len(crowded) < len(lines)
    assert 880 + block_tokens(crowded) <= budget
    assert ranks(crowded) == list(range(1, len(crowded) + 1))  # the best stay
    assert fit_to_request(lines, 1000, budget) == []  # no room at all: no block
    assert fit_to_request(lines, 880, 0) is lines  # no request budget: as chosen
    plain = ["- [1 February 2024] A line from elsewhere."]
    assert fit_to_request(plain, 880, budget) is plain  # not the pipeline's: kept
    assert isinstance(roomy, RecallLines) and roomy.ranked == RANKED


def test_a_request_full_of_other_things_still_recalls_the_floor():
    lines = choose(RANKED, 200, limit=10)
    crowded = fit_to_request(lines, 1000, 1000, floor=60)  # no room left: the floor holds
    assert crowded and crowded.cost <= 60
    assert ranks(crowded) == list(range(1, len(crowded) + 1))
    assert fit_to_request(lines, 400, 1000, floor=60) == fit_to_request(lines, 400, 1000)
