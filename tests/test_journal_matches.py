"""
A journal search lists as matches only the entries that match the query (the others the
ranking brings along are "related"), and a profile's header counts what it lists (issue 34.5).
The game's and the API's side: tests/test_true_counts.py.
"""

import pytest
import support

from ai_assistant.memory.journal import Journal
from ai_assistant.memory.search.journal_search import search_journal, split_matches
from ai_assistant.workspace.status import format_profile

pytestmark = pytest.mark.core

LINES = ("Bob said the lighthouse lamp went out last night.",
         "Bob said the weather turned cold and grey.",
         "A gull stole a fish from the market stall.")


def write_journal(ports):
    for line in LINES:
        speaker = "Bob" if line.startswith("Bob") else "Cleo"
        Journal(ports).add(line, source_type="direct", source_entity=speaker)


def test_the_search_brings_a_neighbour_but_only_the_match_matches():
    ports = support.make_ports()
    write_journal(ports)
    hits = search_journal(ports, "lighthouse")
    # the weather line rides along on its neighbour's relevance (context): it is in the hits
    assert {entry["content"] for _, entry in hits} >= set(LINES[:2])
    matches, related = split_matches(ports, "lighthouse", hits)
    assert [entry["content"] for _, entry in matches] == [LINES[0]]
    assert LINES[1] in [entry["content"] for _, entry in related]
    # a speaker the query names, and a lemma of a word ("lamps"), match too
    assert len(split_matches(ports, "lamps", search_journal(ports, "lamps"))[0]) == 1
    by_bob, _ = split_matches(ports, "Bob", search_journal(ports, "Bob"))
    assert len(by_bob) == 2


def test_a_profile_header_counts_what_it_lists():
    profile = {"name": "Bob", "entity_id": "#2", "entity_type": "player",
               "observations": [{"time": f"t{i}", "source": "heard", "text": f"obs {i}"}
                                for i in range(12)]}
    text = format_profile(profile)
    assert "Recent observations (10 of 12):" in text
    assert text.count("] (heard) obs ") == 10 and "obs 11" in text and "obs 1\n" not in text
    profile["observations"] = profile["observations"][:3]
    assert "Recent observations (3):" in format_profile(profile)
