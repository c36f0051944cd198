"""
The recall pipeline (`memory.recall`): one ranking over the journal and every consolidated
memory, for the prompt's "What you remember" block and the `search_facts` tool.

Core tests, no Evennia: a memory found by a word it shares only lexically and one found only
by meaning; one item per source entry; the entries being answered never recalled; dated lines;
the token budget; small talk losing to facts; private memories hidden from everyone else; the
mirror kept beside the store; the ranking handed to the worker pool.
"""

from datetime import UTC, datetime

from support import make_ports, result_of, sync_runner
from twisted.internet import defer

from ai_assistant.agent.blocks import conversation
from ai_assistant.agent.blocks.remembered import recall_lines, remembered_block
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm import mirror as recall_mirror
from ai_assistant.memory.longterm.mirror import MemoryMirror, ensure_loaded, mirror_of
from ai_assistant.memory.recall import pipeline
from ai_assistant.memory.recall.grouping import KEY, layout
from ai_assistant.memory.recall.information import information
from ai_assistant.memory.recall.lines import memory_item, recall_line
from ai_assistant.memory.recall.long_term import search_long_term
from ai_assistant.memory.recall.pipeline import RecallQuery, build_corpus, rank_items
from ai_assistant.plumbing.settings import Settings
from ai_assistant.plumbing.tokens import count_tokens
from ai_assistant.sleep.consolidation import run_sleep_consolidation

NOW = datetime(2023, 6, 1, 12, 0, tzinfo=UTC)
PARAMS = pipeline.recall_params(Settings())


def memory(memory_id, text, *, entry_id=None, when="2023-05-08T13:56:00Z", speaker="Wenna",
           audience=None):  # fmt: skip
    metadata = {"entry_id": entry_id, "timestamp": when, "source_entity": speaker,
                "source_trust": 0.9}  # fmt: skip
    if audience:
        metadata["audience"] = audience
    return {"id": memory_id, "memory": text, "metadata": metadata}


def mirror_with(*memories):
    mirror = MemoryMirror()
    mirror.merge(memories)
    return mirror


def ranked(corpus, text, *, embed=None, viewer=None, exclude=(), limit=10, min_information=0.0):
    query = RecallQuery(text=text, viewer=viewer, exclude=frozenset(exclude), limit=limit)
    return [found.item for found in rank_items(
        tuple(corpus), query, now=NOW, params=PARAMS, embed=embed,
        min_information=min_information)]  # fmt: skip


def topic_embed(topics):
    """An embedder whose vectors are the topics (word lists) a text mentions: meaning only."""

    def embed(texts):
        return [[1.0 if any(word in text.lower() for word in words) else 0.0
                 for words in topics] + [0.01] for text in texts]  # fmt: skip

    return embed


def test_a_memory_is_reachable_by_a_word_it_shares_only_lexically():
    mirror = mirror_with(
        memory("m1", "Wenna said to me: \"My anvil cracked in the forge fire.\"", entry_id=1),
        memory("m2", "Wenna said to me: \"I adopted a puppy named Brindle.\"", entry_id=2),
    )
    # the embedder finds no meaning in common with anything: the word alone finds it
    found = ranked(build_corpus((), mirror), "anvil", embed=topic_embed([["zzz"]]))
    assert [item["id"] for item in found][:1] == ["m1"]


def test_a_memory_is_reachable_by_meaning_alone():
    mirror = mirror_with(
        memory("m1", "Wenna said to me: \"A fox took three of our hens.\"", entry_id=1),
        memory("m2", "Wenna said to me: \"I baked bread for the festival.\"", entry_id=2),
    )
    embed = topic_embed([["wolf", "fox"], ["bread", "bake"]])
    found = ranked(build_corpus((), mirror), "Was there a wolf attack?", embed=embed)
    assert found and found[0]["id"] == "m1"  # no word in common with the query


def test_an_entry_and_the_memory_made_from_it_are_one_item():
    entry = {"id": 5, "content": "Wenna said to me: \"I rowed in the lantern regatta in May.\"",
             "timestamp": "2023-05-08T13:56:00Z", "source_entity": "Wenna"}  # fmt: skip
    mirror = mirror_with(memory("m5", "Wenna rowed in the lantern regatta in May.", entry_id=5))
    corpus = build_corpus([entry], mirror)
    assert [item["id"] for item in corpus] == ["m5"]  # the entry is not a second candidate
    # and when both are ranked (a journal read before the mirror knew), one comes out
    both = ranked((*mirror.entries(), entry), "lantern regatta")
    assert len(both) == 1


def test_the_entries_being_answered_are_never_recalled():
    entries = [
        {"id": 7, "content": "Wenna said to me: \"When did I row in the lantern regatta?\"",
         "timestamp": "2023-06-01T12:00:00Z", "source_entity": "Wenna"},
        {"id": 3, "content": "Wenna said to me: \"I rowed in the lantern regatta last Saturday.\"",
         "timestamp": "2023-05-08T13:56:00Z", "source_entity": "Wenna"},
    ]  # fmt: skip
    mirror = mirror_with(memory("m7", entries[0]["content"], entry_id=7))
    found = ranked(build_corpus(entries, mirror), "When did I row in the lantern regatta?",
                   exclude={"7"})
    assert [item.get("entry_id", item["id"]) for item in found] == [3]


def test_every_line_shows_when_it_happened():
    item = memory_item(memory("m1", "Wenna joined a bell-ringing guild.", entry_id=1))
    assert recall_line(item) == "- [8 May 2023] Wenna joined a bell-ringing guild."
    undated = memory_item({"id": "m2", "memory": "A fact.", "metadata": {}})
    assert recall_line(undated) == "- A fact."


def test_the_lines_fit_the_token_budget_best_first_then_in_time_order():
    memories = [memory(f"m{n}", f"Wenna said to me: \"The harbour lantern number {n} is "
                                f"painted {'red' if n % 2 else 'blue'} and faces the sea.\"",
                       entry_id=n, when=f"2023-05-{n + 1:02d}T10:00:00Z")
                for n in range(1, 21)]  # fmt: skip
    corpus = build_corpus((), mirror_with(*memories))
    query = RecallQuery(text="harbour lantern red", limit=20, budget=60)
    recalled = rank_items(corpus, query, now=NOW, params=PARAMS)
    lines = pipeline.select_lines(recalled, query.budget, query.limit)
    assert lines and count_tokens(layout(lines)) <= 60  # the block as the prompt lays it out
    assert len(lines) < 20  # the budget, not a fixed number of slots, decided
    best = pipeline.recall_line(recalled[0].item)
    assert best in lines
    dates = [datetime.strptime(line[3:line.index("]")], "%d %B %Y") for line in lines]
    assert dates == sorted(dates)


def test_no_line_is_cut_and_a_pasted_page_is_left_to_the_tools():
    story = ("Orla said to me: \"The lighthouse keeper rows out every dawn, checks the lamp, "
             "logs the wind and the swell, mends whatever the night broke, feeds the three "
             "cats that live in the boathouse, paints one more stair of the spiral steps, and "
             "only then rows back for bread; in winter she does it all by lantern light, and "
             "the whole harbour swears she has not missed a single morning in eleven long "
             "years.\"")
    page = "Orla pasted the lighthouse logbook: " + " ".join(
        f"day {n} the lamp was lit at dusk and the wind blew from the west." for n in range(300))
    mirror = mirror_with(memory("story", story, entry_id=1),
                         memory("page", page, entry_id=2, when="2023-05-09T10:00:00Z"))
    query = RecallQuery(text="lighthouse keeper lamp wind", limit=10, budget=900)
    recalled = rank_items(build_corpus((), mirror), query, now=NOW, params=PARAMS)
    assert {found.item["id"] for found in recalled} == {"story", "page"}  # both found
    lines = pipeline.select_lines(recalled, query.budget, query.limit, max_line_tokens=250)
    assert lines == [recall_line(memory_item(memory("story", story, entry_id=1)))]
    assert len(lines[0]) > 400  # longer than the cut lines used to be
    assert lines[0].endswith("eleven long years.\"")  # whole, not cut
    page_line = recall_line(next(f.item for f in recalled if f.item["id"] == "page"))
    assert pipeline.too_long(count_tokens(page_line) + 1, 250)
    # without a longest line, the budget alone decides: the page fits a large one, whole
    assert page_line in pipeline.select_lines(recalled, 100_000, 10)


def test_small_talk_loses_to_facts_and_says_too_little_to_be_recalled():
    assert information("Wenna said to me: \"Yup, ttyl!\"", ["wenna"]) == 0.0
    assert information("Wenna said to me: \"ok\"") == 0.0
    assert information("Wenna said to me: \"I adopted a puppy named Brindle in May.\"") == 1.0
    mirror = mirror_with(
        memory("chat", "Wenna said to me: \"Yup, ttyl! Have a great weekend!\"", entry_id=1),
        memory("ok", "Wenna said to me: \"Haha ok ok lol\"", entry_id=2),
        memory("fact", "Wenna said to me: \"This weekend I hiked the coastal trail with my "
                       "sister and we camped near the lighthouse.\"", entry_id=3),
    )  # fmt: skip
    # the day named makes every line of that day a candidate; "ok" says nothing at all
    found = ranked(build_corpus((), mirror), "What did Wenna do at the weekend, on 8 May?",
                   min_information=0.25)
    assert [item["id"] for item in found] == ["fact", "chat"]


def test_a_private_memory_is_shown_to_its_audience_only():
    mirror = mirror_with(
        memory("secret", "Wenna whispered to me (private): \"The cellar key is under the "
                         "mat.\"", entry_id=1, audience="#12"),
        memory("public", "Wenna said to me: \"The cellar is damp.\"", entry_id=2),
    )  # fmt: skip
    corpus = build_corpus((), mirror)
    assert {item["id"] for item in ranked(corpus, "cellar key", viewer="#12")} == {
        "secret", "public"}
    assert [item["id"] for item in ranked(corpus, "cellar key", viewer="#13")] == ["public"]
    assert [item["id"] for item in ranked(corpus, "cellar key")] == ["public"]


class ListingStore:
    """A semantic port that lists and adds (fired Deferreds), counting the listings."""

    def __init__(self, memories=()):
        self.memories = {m["id"]: m for m in memories}
        self.listings = 0

    def list(self, *, limit=100, filters=None):
        self.listings += 1
        return defer.succeed(list(self.memories.values())[:limit])

    def search(self, query, *, limit=10, filters=None):
        return defer.succeed([])

    def add(self, text, *, metadata=None, infer=False):
        memory_id = f"m{len(self.memories) + 1}"
        self.memories[memory_id] = {"id": memory_id, "memory": text,
                                    "metadata": dict(metadata or {})}  # fmt: skip
        return defer.succeed([{"id": memory_id, "memory": text, "event": "ADD"}])


class CorrectableStore(ListingStore):
    """A ListingStore staff can correct (get, update, delete)."""

    def get(self, memory_id):
        found = self.memories.get(memory_id)
        return defer.succeed(dict(found) if found else None)

    def update(self, memory_id, text, *, metadata=None):
        found = self.memories[memory_id]
        found.update(memory=text, metadata={**found["metadata"], **(metadata or {})})
        return defer.succeed(dict(found))

    def delete(self, memory_id):
        self.memories.pop(memory_id, None)
        return defer.succeed(None)


def test_corrections_reach_recall_at_once():
    from ai_assistant.memory import corrections

    store = CorrectableStore([memory("m1", "The ferry leaves at noon.", entry_id=1),
                              memory("m2", "The ferry costs two silver.", entry_id=2),
                              memory("m3", "The ferry captain is Ruth.", entry_id=3)])
    ports = make_ports(semantic=store, overrides={"recall.embedding_weight": 0.0})

    def recalled():
        return [hit["memory"] for hit in result_of(search_long_term(ports, "ferry"))]

    assert len(recalled()) == 3
    result_of(corrections.edit_memory(ports, "m1", "The ferry leaves at dawn.", by="#1"))
    result_of(corrections.mark_memory_wrong(ports, "m2", "a rumour", by="#1"))
    result_of(corrections.delete_memory(ports, "m3", by="#1"))
    assert recalled() == ["The ferry leaves at dawn."]
    assert store.listings == 1  # followed, not read again


def test_the_mirror_is_read_once_and_follows_what_is_stored_and_deleted():
    store = ListingStore([memory("m1", "Wenna keeps bees.", entry_id=1)])
    ports = make_ports(semantic=store)
    mirror = result_of(ensure_loaded(ports))
    assert mirror.loaded and [item["id"] for item in mirror.entries()] == ["m1"]
    result_of(ensure_loaded(ports))
    assert store.listings == 1
    recall_mirror.record(ports, [{"id": "m2", "memory": "Wenna sells honey.", "event": "ADD"},
                                 {"id": "m1", "memory": "x", "event": "DUPLICATE"}],
                         metadata={"entry_id": 2, "timestamp": "2023-05-09T10:00:00Z"})
    assert [item["content"] for item in mirror_of(ports).entries()] == [
        "Wenna keeps bees.", "Wenna sells honey."]
    recall_mirror.forget(ports, "m1")
    assert [item["id"] for item in mirror_of(ports).entries()] == ["m2"]
    assert mirror_of(ports).source_entries() == frozenset({"2"})


def test_what_sleep_consolidates_is_recalled_after_the_journal_forgot_it():
    store = ListingStore()
    ports = make_ports(semantic=store, overrides={"recall.embedding_weight": 0.0})
    result_of(ensure_loaded(ports))
    ports.clock.current = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    Journal(ports).add("Wenna said to me: \"I adopted a puppy named Brindle.\"",
                      source_type="direct", source_entity="Wenna", tags=["heard"])
    result_of(run_sleep_consolidation(ports))
    for entry in list(Journal(ports).entries()):
        Journal(ports).remove(entry["id"])  # pruned from the journal
    ports.clock.current = NOW
    situation = {"events": [{"text": "What is my puppy called?", "sender": "Wenna",
                             "sender_id": "#12"}],
                 "interlocutor": {"id": "#12", "name": "Wenna"}, "history": []}  # fmt: skip
    lines = result_of(recall_lines(ports, situation))
    assert lines == ["- [8 May 2023] Wenna said to me: \"I adopted a puppy named Brindle.\""]
    block = remembered_block(ports, {**situation, "recall": lines})
    # the key says once what a name alone heads; the lines are quoted data below it
    assert block.startswith(f"{KEY}\n<<<BEGIN MEMORIES>>>") and "Brindle" in block


def test_what_the_notes_on_people_show_is_not_recalled_again():
    from ai_assistant.agent.blocks.people import entity_context_block
    from ai_assistant.memory.entities import People

    ports = make_ports(overrides={"recall.embedding_weight": 0.0,
                                  "entities.context_observations": 1})  # the latest only
    ports.clock.current = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    for said in ("I adopted a puppy named Brindle.", "Brindle chews every boot in the house."):
        Journal(ports).add(f"Wenna said to me: \"{said}\"", source_type="direct",
                          source_entity="Wenna", tags=["heard"])
        People(ports).observe("#12", "Wenna", said)
    ports.clock.current = NOW
    situation = {"events": [{"text": "What is my puppy Brindle like?", "sender": "Wenna",
                             "sender_id": "#12"}],
                 "interlocutor": {"id": "#12", "name": "Wenna"}, "history": []}  # fmt: skip
    notes = entity_context_block(ports, situation)
    assert "recently: Brindle chews every boot" in notes
    # both lines match; the one the notes show as Wenna's recent words is there already
    lines = result_of(recall_lines(ports, situation))
    assert lines == ["- [8 May 2023] Wenna said to me: \"I adopted a puppy named Brindle.\""]
    without_notes = ports.settings.with_overrides({"entities.context_observations": 0})
    ports.settings = without_notes
    assert len(result_of(recall_lines(ports, situation))) == 2


def test_the_ranking_runs_in_the_worker_pool_not_on_the_reactor(monkeypatch):
    ports = make_ports(semantic=ListingStore([memory("m1", "Wenna keeps bees.", entry_id=1)]))
    handed = []

    def worker(func, *args):
        handed.append(func)
        if func is pipeline._recall_in_worker:
            return defer.succeed(([], ["- a line"]))
        return defer.maybeDeferred(func, *args)  # the first read's conversion

    def forbidden(*args, **kwargs):
        raise AssertionError("ranked on the calling (reactor) thread")

    monkeypatch.setattr(pipeline, "rank_items", forbidden)
    ports.run_cpu_bound = worker
    recalled, lines = result_of(pipeline.recall(ports, RecallQuery(text="bees")))
    assert [func.__name__ for func in handed] == ["merge", "_recall_in_worker"]
    assert lines == ["- a line"]


def test_search_facts_recalls_through_the_pipeline_for_whom_the_turn_answers():
    store = ListingStore([
        memory("m1", "Wenna whispered: the cellar key is under the mat.", entry_id=1,
               audience="#12"),
        memory("m2", "The cellar door squeaks.", entry_id=2),
    ])  # fmt: skip
    ports = make_ports(semantic=store, overrides={"recall.embedding_weight": 0.0})
    for_wenna = result_of(search_long_term(ports, "cellar key", viewer="#12"))
    assert [hit["id"] for hit in for_wenna][0] == "m1"
    assert for_wenna[0]["when"] == "8 May 2023" and for_wenna[0]["trust"] == 0.9
    for_bob = result_of(search_long_term(ports, "cellar key", viewer="#2"))
    assert [hit["id"] for hit in for_bob] == ["m2"]


def test_the_recent_conversation_is_sized_by_tokens():
    ports = make_ports(overrides={"recall.history_tokens": 40})
    history = [{"role": "user", "name": "Wenna", "content": f"Line {n}: " + "word " * 10}
               for n in range(10)]  # fmt: skip
    shown = conversation.shown_history(ports, {"history": history, "events": []})
    assert 1 <= len(shown) < 10 and shown[-1] is history[-1]
    assert sum(count_tokens(m["content"]) + 4 for m in shown) <= 40
    # the newest line is always shown, even alone over the budget
    long = [{"role": "user", "name": "Wenna", "content": "word " * 200}]
    assert conversation.shown_history(ports, {"history": long, "events": []}) == long


def test_the_pipeline_answers_synchronously_in_tests():
    # tests run the worker's part in place: their ports carry a runner that works in place
    assert make_ports().run_cpu_bound is sync_runner


def test_search_journal_is_the_same_pipeline_over_the_journal_and_every_memory():
    from ai_assistant.tools.catalogue import load_all_tools
    from ai_assistant.tools.registry import execute_tool

    load_all_tools()
    store = ListingStore([memory("m1", "Wenna said to me: \"My anvil cracked.\"", entry_id=41),
                          memory("m2", "Wenna whispered: the anvil money is hidden.",
                                 entry_id=42, audience="#12")])  # fmt: skip
    ports = make_ports(semantic=store, overrides={"recall.embedding_weight": 0.0})
    Journal(ports).add("Bob said to me: \"The anvil is for sale.\"", source_type="direct",
                      source_entity="Bob")
    result = result_of(execute_tool("search_journal", ports, {"query": "anvil"}))
    assert result["mode"] == "recall"
    by_id = {item["id"]: item for item in result["results"]}
    assert set(by_id) == {"m1", 1}  # the journal's entry and the memory; not the secret
    assert by_id["m1"]["tier"] == "memory" and by_id["m1"]["entry_id"] == 41


def test_a_stores_cosines_replace_its_candidates_embeddings_in_the_same_ranking():
    import numpy

    from ai_assistant.memory.search import dense

    embedded = []

    def embed(texts):
        embedded.extend(texts)
        return [[float(len(text)), float(text.count("e")) + 1.0, float(text.count("o"))]
                for text in texts]

    texts = ("the ferry leaves at dawn", "bees behind the mill", "a lantern sold", "old nets",
             "the chapel bell rang")
    corpus = tuple({"content": text} for text in texts)
    whole, whole_rows = pipeline._dense(corpus, "who keeps bees", embed,
                                        dense.EmbeddingMatrices())
    known = whole[:3]  # as the store computed them for its three candidates
    dense._EMBED_CACHE.clear()  # nothing embedded before is known to the process
    embedded.clear()
    cosines, rows = pipeline._dense(corpus, "who keeps bees", embed, dense.EmbeddingMatrices(),
                                    known)
    assert numpy.allclose(cosines, whole)
    assert "who keeps bees" in embedded and not set(texts[:3]) & set(embedded)
    embedded.clear()
    assert numpy.allclose(rows([4, 1]), whole_rows([4, 1]))
    assert embedded == [texts[1]]  # the one candidate the second stage asked for
