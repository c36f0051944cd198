"""The journal tools, run the way the ReAct loop and admins run them: through execute_tool."""

import copy
import json

import pytest
from support import make_ports
from twisted.internet import defer

from ai_assistant.memory.journal import Journal
from ai_assistant.tools import journal as journal_tools
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import REGISTRY, ToolCache, execute_tool

load_all_tools()


class FakeSemantic:
    def __init__(self, hits=None, error=None):
        self.hits, self.error, self.searches = hits or [], error, []

    def search(self, query, *, limit=10, filters=None):
        self.searches.append((query, limit))
        return defer.fail(self.error) if self.error else defer.succeed(self.hits)


def call(ports, tool, arguments, cache=None):
    results = []
    execute_tool(tool, ports, arguments, cache=cache).addBoth(results.append)
    assert results, "the tool did not answer synchronously"
    return results[0]


def test_tools_are_registered_in_the_journal_family():
    for name in ("add_journal_entry", "search_journal", "review_journal"):
        assert REGISTRY.get(name).family == "journal"
    search = REGISTRY.get("search_journal")
    assert search.cacheable and search.cache_ttl == 300.0


def test_add_journal_entry_from_json_arguments():
    ports = make_ports()
    result = call(ports, "add_journal_entry", json.dumps({
        "content": "Alice said the bridge is out", "source_type": "direct",
        "source_entity": "Alice", "tags": ["travel"], "reasoning": "worth remembering",
    }))  # fmt: skip
    assert result["success"] is True
    assert result["entry"]["id"] == 1
    stored = Journal(ports).entry(1)
    assert stored["source_trust"] == 0.9 and stored["importance_method"] == "heuristic"
    assert stored["tags"] == ["travel"]


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({}, "content"),
        ({"content": ""}, "content is required"),
        ({"content": "x", "importance": 0}, "importance"),
        ({"content": "x", "importance": 11}, "importance"),
        ({"content": "x", "source_type": "gossip"}, "source_type"),
        ({"content": "x", "tags": "quest"}, "tags"),
        ({"content": "x" * 5000}, "too long"),
        ({"content": "x", "source_trust": 2}, "source_trust"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_add_arguments_give_a_clear_error_and_change_nothing(arguments, message):
    ports = make_ports()
    Journal(ports).add("existing", importance=5)
    before = copy.deepcopy(ports.state.data)
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    result = call(ports, "add_journal_entry", raw)
    assert result["success"] is False
    assert message in result["error"]
    assert ports.state.data == before


def test_add_run_directly_still_validates():
    ports = make_ports()
    tool = REGISTRY.get("add_journal_entry")
    assert tool.run(ports, content="x", importance=11)["success"] is False
    assert tool.run(ports, content="x", tags="solo")["error"].startswith("tags must be a list")
    assert ports.state.data == {}


def test_add_reports_when_a_full_journal_drops_the_new_entry():
    ports = make_ports(overrides={"journal.max_entries": 1})
    Journal(ports).add("vital", importance=10)
    result = call(ports, "add_journal_entry", {"content": "trivia", "importance": 1})
    assert result["success"] is True and "not kept" in result["note"]


def _journal_with_entries(ports):
    Journal(ports).add("Wolves attacked the sheep", tags=["danger", "town"],
                      related_projects=["defence"])  # fmt: skip
    Journal(ports).add("The baker sells fresh bread", tags=["town"])
    ports.clock.advance(days=10)
    Journal(ports).add("Wolves howled again at the gate", tags=["danger"])


def test_search_journal_text_mode_with_filters():
    ports = make_ports()
    _journal_with_entries(ports)
    result = call(ports, "search_journal", {"query": "wolves"})
    assert result["mode"] == "dense+hybrid"  # the local embedder joins BM25 by default
    assert [r["id"] for r in result["results"]][:2] == [3, 1]
    assert call(ports, "search_journal", {"query": "wolves", "days_back": 7})["count"] == 1
    tagged = call(ports, "search_journal", {"query": "wolves", "tags": ["danger", "town"]})
    assert [r["id"] for r in tagged["results"]] == [1]
    project = call(ports, "search_journal", {"query": "", "related_to_project": "defence"})
    assert [r["id"] for r in project["results"]] == [1]
    assert call(ports, "search_journal", {"query": "wolves", "limit": 1})["count"] == 1


def test_search_journal_embeds_only_through_the_worker_runner(monkeypatch):
    from ai_assistant.memory.search import dense

    def forbidden(*args, **kwargs):
        raise AssertionError("embedding computed on the calling (reactor) thread")

    from ai_assistant.memory.search import expansion

    handed_off = []

    def runner(func, *args):
        handed_off.append(func)
        if func is expansion.expansion_terms:
            return defer.succeed({})  # the worker's answer: no neighbours
        return defer.succeed([0.0] * len(args[2]))  # the worker's answer: no similarity

    monkeypatch.setattr(dense, "cosine_scores", forbidden)
    monkeypatch.setattr(dense, "embeddings", forbidden)
    monkeypatch.setattr(expansion, "embeddings", forbidden)
    ports = make_ports(overrides={"journal.embedding_weight": 0.5}, run_cpu_bound=runner)
    _journal_with_entries(ports)
    # "livestock losses" shares no word with any entry, and the (stub) embedding finds nothing
    assert call(ports, "search_journal", {"query": "livestock losses"})["count"] == 0
    assert call(ports, "search_journal", {"query": "wolves"})["count"] >= 2
    # the similarities, then the query's expansion: both in the worker pool
    assert handed_off == [dense.dense_similarities, expansion.expansion_terms] * 2


def test_search_journal_answers_when_the_expansion_fails():
    from ai_assistant.memory.search import expansion

    def runner(func, *args):
        if func is expansion.expansion_terms:
            return defer.fail(RuntimeError("vocabulary broke"))
        return defer.maybeDeferred(func, *args)

    ports = make_ports(run_cpu_bound=runner)
    _journal_with_entries(ports)
    result = call(ports, "search_journal", {"query": "wolves"})
    assert result["success"] and result["mode"] == "dense+hybrid" and result["count"] >= 2
    assert "query expansion failed (vocabulary broke)" in ports.log.text()


def test_search_journal_expands_the_query_with_the_journals_own_words():
    # "music" is in no line; the local embedder puts "guitar" near it, and the journal says it
    guitar = "I practise the guitar most nights, it calms me."
    lines = [("Wren", guitar),
             ("Orla", "The harbour was calm this morning, Wren."),
             ("Wren", "I would like fresh bread for the trip."),
             ("Orla", "Did you see the gulls over the pier, Wren?"),
             ("Wren", "I mended the nets by the old boat."),
             ("Orla", "Looks like rain over the hills.")]  # fmt: skip
    relevance_only = {"journal.alpha_recency": 0, "journal.alpha_importance": 0,
                      "journal.context_weight": 0}  # fmt: skip
    scores = {}
    for weight in (0.3, 0.0):
        ports = make_ports(overrides={**relevance_only, "journal.expansion_weight": weight})
        for speaker, text in lines:
            Journal(ports).add(text, source_type="direct", source_entity=speaker)
        result = call(ports, "search_journal", {"query": "What music does Wren like?"})
        ranked = {r["content"]: r["score"] for r in result["results"]}
        scores[weight] = ranked[guitar]
        # the lines that say "like" still match the question's own word best
        assert list(ranked)[0] == "I would like fresh bread for the trip."
    # with the expansion the guitar line counts as a partial match, not just a near meaning
    assert scores[0.3] > 1.5 * scores[0.0]


def test_search_journal_finds_a_paraphrase_through_the_local_embedder():
    # each line read alone: in this three-line journal the bread line stands between the two
    # wolf lines, and read with their words it would rank first (by design: an answer often
    # follows the question that names its subject)
    ports = make_ports(overrides={"journal.alpha_recency": 0, "journal.alpha_importance": 0,
                                  "journal.context_terms": 0})  # fmt: skip
    _journal_with_entries(ports)
    result = call(ports, "search_journal", {"query": "wolf attack on the flock"})
    assert result["mode"] == "dense+hybrid" and result["results"][0]["id"] == 1
    off = make_ports(overrides={"journal.embedding_weight": 0})
    _journal_with_entries(off)
    assert call(off, "search_journal", {"query": "livestock"})["mode"] == "hybrid"


def test_search_journal_rejects_bad_arguments():
    ports = make_ports()
    assert call(ports, "search_journal", {"tags": "danger"})["success"] is False
    assert call(ports, "search_journal", {"limit": 0})["success"] is False
    assert REGISTRY.get("search_journal").run(ports, days_back=-1)["success"] is False


def test_search_journal_merges_semantic_hits_mapped_to_entries(monkeypatch):

    monkeypatch.setattr(journal_tools, "default_embed", lambda settings: None)  # mem0 only
    semantic = FakeSemantic([
        {"id": "m9", "memory": "sheep were lost", "score": 0.9, "metadata": {"entry_id": 1}},
        {"id": "m7", "memory": "an old fact", "score": 0.5, "metadata": {}},
        {"id": "m8", "memory": "bread", "score": 0.8, "metadata": {"entry_id": 2}},
    ])  # fmt: skip
    ports = make_ports(semantic=semantic)
    _journal_with_entries(ports)
    result = call(ports, "search_journal", {"query": "livestock losses"})
    assert semantic.searches == [("livestock losses", 50)]
    assert result["mode"] == "semantic+hybrid"
    # 1 and 2 found only through embeddings; 3 follows through its neighbour 2
    assert [r["id"] for r in result["results"]] == [1, 2, 3]
    assert result["memories"] == [{"id": "m7", "memory": "an old fact", "score": 0.5}]
    filtered = call(ports, "search_journal", {"query": "livestock", "tags": ["danger"]})
    assert [r["id"] for r in filtered["results"]] == [1, 3]  # 2 has no "danger" tag
    assert "memories" not in filtered


def test_semantic_similarity_and_text_match_add_up_in_one_ranking():
    # entry 1 matches "wolves" in text and semantically; entry 3 (newer) only in text
    semantic = FakeSemantic([{"id": "m1", "memory": "wolves", "score": 0.8,
                              "metadata": {"entry_id": 1}}])  # fmt: skip
    overrides = {"journal.alpha_recency": 0, "journal.alpha_importance": 0,
                 "journal.context_weight": 0, "journal.context_terms": 0}  # fmt: skip
    ports = make_ports(semantic=semantic, overrides=overrides)
    _journal_with_entries(ports)
    text_only = call(ports, "search_journal", {"query": "wolves", "semantic": False})
    fused = call(ports, "search_journal", {"query": "wolves"})
    assert [r["id"] for r in text_only["results"]][0] == 3
    assert [r["id"] for r in fused["results"]] == [1, 3]
    assert fused["results"][0]["score"] == pytest.approx(1.0)
    assert fused["results"][1]["score"] < 1.0


def test_search_journal_falls_back_when_semantic_fails_or_is_declined():
    semantic = FakeSemantic(error=RuntimeError("qdrant down"))
    ports = make_ports(semantic=semantic)
    _journal_with_entries(ports)
    result = call(ports, "search_journal", {"query": "wolves"})
    assert result["success"] and result["mode"] == "dense+hybrid"
    assert result["note"] == "semantic memory unavailable"
    semantic.error = None
    declined = call(ports, "search_journal", {"query": "wolves", "semantic": False})
    assert declined["mode"] == "hybrid" and len(semantic.searches) == 1


def test_search_results_are_cached():
    ports = make_ports()
    _journal_with_entries(ports)
    cache = ToolCache(clock=lambda: 0.0)
    first = call(ports, "search_journal", {"query": "wolves"}, cache)
    Journal(ports).add("Wolves everywhere")
    second = call(ports, "search_journal", {"query": "wolves"}, cache)
    assert second["cached"] is True and second["count"] == first["count"]


def test_review_journal_saves_a_synthesis_entry():
    ports = make_ports()
    _journal_with_entries(ports)
    result = call(ports, "review_journal", {"synthesis": "Wolves grow bolder near the town"})
    assert result["success"] is True
    assert result["reviewed_count"] == 1  # only the last 7 days
    assert result["entries"][0]["id"] == 3
    assert result["summary"]["entries"] == 1
    saved = Journal(ports).entry(result["saved_entry"]["id"])
    assert saved["content"] == "[SYNTHESIS] Wolves grow bolder near the town"
    assert saved["tags"] == ["synthesis", "meta_learning"]
    assert saved["evidence"] == [3]


def test_review_journal_without_saving_and_with_tags():
    ports = make_ports()
    _journal_with_entries(ports)
    result = call(ports, "review_journal", {
        "synthesis": "Town life is steady", "days_back": 30, "tags": ["town"],
        "save_as_entry": False,
    })  # fmt: skip
    assert [e["id"] for e in result["entries"]] == [1, 2]
    assert "saved_entry" not in result
    assert len(Journal(ports).entries()) == 3


def test_review_journal_requires_a_synthesis():
    ports = make_ports()
    assert call(ports, "review_journal", {})["success"] is False
    assert "synthesis is required" in call(ports, "review_journal", {"synthesis": " "})["error"]
    assert ports.state.data == {}
