"""
Memory quality on LoCoMo: recall@k of the evidence turns through the assistant's own search.

    .venv/bin/python -m bench.locomo [--data PATH] [--conversations N|A-B] [--questions N]
                                     [--mem0-turns N] [--no-mem0] [--out PATH]

`--conversations` takes the first N conversations or a 1-based range `A-B` (as
`bench.game_recall` does): tune on `1-3`, report `4-5` held out.

Every turn of a conversation is written to a fresh journal as the assistant would experience
it: `Journal(ports).add(content=<what was said>, source_type="direct",
source_entity=<speaker>)` with the session's date on a `FixedClock`. Each question (category 5,
"adversarial", is left out: it has no evidence) is then asked through

- `search_journal`: the real tool through `execute_tool`, journal only (no semantic tier: BM25,
  feedback, speaker and context boosts, fused with the local WordLlama similarity of every
  entry, which the tool computes in the worker pool) and the embedded default (the journal
  consolidated into mem0 with the local WordLlama embedder, no LLM; the tool is then the recall
  pipeline, `memory.recall`, over the journal and the memories' mirror), each at the tool's real
  defaults (seed weights 1/1/1, seed recency, relevance gate) and relevance-only; journal only
  also with the seed's formula over every matching entry (no relevance gate);
- `search_facts` (formerly `recall_memories`): the recall pipeline over the mirror of the same
  mem0 store (memories only), against mem0's own search (`store.search`, WordLlama cosine over
  the local qdrant): recall and time per query of each;
- baselines over the same journal: the seed's keyword overlap, plain BM25 (no boosts), plain
  embedding cosine with the default embedder.

An entry maps back to its turn through a `dia_id` kept outside the journal (the search never
sees it). Recall@k of a question = share of its evidence turns among the top k results.

Results go to `bench/results/locomo.json`.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy

from ai_assistant.memory.journal import Journal
from ai_assistant.memory.search.dense import embeddings
from ai_assistant.memory.search.index import JournalIndexCache
from ai_assistant.memory.search.journal_search import search_entries
from ai_assistant.memory.search.params import SearchParams
from ai_assistant.memory.search.terms import relevance_keyword_overlap
from ai_assistant.plumbing.ports import AssistantPorts, FixedClock, MemoryState
from ai_assistant.plumbing.settings import Settings
from bench.machine import describe

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "bench" / "locomo" / "locomo_dev.json"
RESULTS = REPO / "bench" / "results"
KS = (1, 5, 10)
# The seed's recency, exp(-0.99 * age_hours), is ~0 for anything older than a few hours and
# the heuristic importance says nothing about a question: a question-answering configuration
# ranks by relevance alone (the tool's true defaults are measured too).
RELEVANCE_ONLY = {"journal.alpha_recency": 0.0, "journal.alpha_importance": 0.0}
# The seed's formula applied to every entry with any relevance (no gate, no pool).
NO_GATE = {"journal.relevance_gate": 0.0, "journal.rerank_pool": 0}
# Without the time references of the question (the dates then only match as words).
NO_TIME = {"journal.time_boost": 0.0}
TOOL = "search_journal (journal only, tool defaults)"
NO_TIME_TOOL = "search_journal (journal only, tool defaults, time_boost 0)"
NO_GATE_TOOL = "search_journal (journal only, seed formula without relevance gate)"
RELEVANCE_TOOL = "search_journal (journal only, relevance-only)"
MEM0_TOOL = "search_journal (embedded default: journal + mem0, tool defaults)"
MEM0_RELEVANCE_TOOL = "search_journal (embedded default: journal + mem0, relevance-only)"
RECALL = "search_facts (recall pipeline over the memory mirror)"
MEM0_SEARCH = "mem0 search (the store's own, dense)"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def parse_session_date(text):
    """'1:56 pm on 8 May, 2023' -> aware datetime (UTC)."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.replace(tzinfo=UTC)


def conversation_turns(sample):
    """
    Args:
        sample (dict): One LoCoMo conversation.

    Returns:
        list: `(datetime, speaker, text, dia_id)` in order.
    """
    conversation = sample["conversation"]
    numbers = sorted(
        int(key.split("_")[1])
        for key, value in conversation.items()
        if key.startswith("session_") and isinstance(value, list)
    )
    turns = []
    for number in numbers:
        moment = parse_session_date(conversation[f"session_{number}_date_time"])
        for turn in conversation[f"session_{number}"]:
            text = turn["text"]
            if turn.get("blip_caption"):
                # what a player sees when someone shares a picture
                text = f"{text} [shares a photo: {turn['blip_caption']}]"
            turns.append((moment, turn["speaker"], text, turn["dia_id"]))
    return turns


def make_ports(name="bench", semantic=None, overrides=None):
    settings = Settings(overrides={"journal.max_entries": 100_000, **(overrides or {})})
    # no reactor runs here: the computing work the game runs in the worker pool (the tool's
    # embedding, recall's ranking) runs in place (same code, same vectors)
    return AssistantPorts(key=name, name=name, state=MemoryState(), clock=FixedClock(),
                          settings=settings, semantic=semantic,
                          run_cpu_bound=sync_runner)  # fmt: skip


def ingest(ports, turns):
    """Write every turn as a journal entry. Returns `{entry id: dia_id}`."""
    mapping = {}
    for moment, speaker, text, dia_id in turns:
        ports.clock.current = moment
        entry = Journal(ports).add(text, source_type="direct", source_entity=speaker)
        mapping[entry["id"]] = dia_id
    return mapping


def questions(sample, limit=None):
    items = [q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]
    return items[:limit] if limit else items


def recall_at(ranked_dia_ids, evidence, k):
    evidence = set(evidence)
    return len(evidence.intersection(ranked_dia_ids[:k])) / len(evidence)


class Tally:
    """Recall sums per category and overall, and query time."""

    def __init__(self):
        self.sums = {}
        self.counts = {}
        self.query_seconds = 0.0
        self.ingest_seconds = 0.0
        self.queries = 0

    def add(self, category, ranked, evidence):
        for key in (CATEGORIES[category], "overall"):
            self.counts[key] = self.counts.get(key, 0) + 1
            for k in KS:
                name = f"{key}@{k}"
                self.sums[name] = self.sums.get(name, 0.0) + recall_at(ranked, evidence, k)

    def report(self):
        result = {}
        for key in list(CATEGORIES.values()) + ["overall"]:
            n = self.counts.get(key, 0)
            result[key] = {f"recall@{k}": round(self.sums.get(f"{key}@{k}", 0.0) / n, 4)
                           if n else None for k in KS}  # fmt: skip
            result[key]["questions"] = n
        result["ingest_seconds"] = round(self.ingest_seconds, 3)
        result["query_ms_mean"] = round(1000 * self.query_seconds / max(1, self.queries), 3)
        return result


# ----------------------------------------------------------------------------------------------
# Ways to answer a question: each returns the ranked entry ids (best first, at most 10)


def run_tool(ports, name, arguments):
    from ai_assistant.tools.registry import execute_tool

    results = []
    execute_tool(name, ports, arguments).addBoth(results.append)
    if not results:
        raise RuntimeError(f"{name} did not answer synchronously")
    result = results[0]
    if not result.get("success"):
        raise RuntimeError(f"{name} failed: {result}")
    return result


def search_tool_ids(ports, question):
    result = run_tool(ports, "search_journal", {"query": question, "limit": 10})
    # a long-term memory the recall pipeline returns stands for the entry it was made from
    return [item["entry_id"] if item.get("tier") == "memory" else item["id"]
            for item in result["results"]]


def recall_memories_ids(ports, question, links):
    result = run_tool(ports, "recall_memories",
                      {"query": question, "limit": 10, "min_source_trust": 0.0})  # fmt: skip
    ranked = []
    for memory in result["memories"]:
        for entry_id in links.get(memory["id"], ()):
            if entry_id not in ranked:
                ranked.append(entry_id)
    return ranked


def mem0_search_ids(store, question, links):
    """mem0's own search (WordLlama cosine over the local qdrant), as the mirror's baseline."""
    found = []
    store.search(question, limit=10).addBoth(found.append)
    ranked = []
    for hit in found[0]:
        for entry_id in links.get(hit["id"], ()):
            if entry_id not in ranked:
                ranked.append(entry_id)
    return ranked


def keyword_overlap_ids(entries, question):
    scores = numpy.asarray(
        [relevance_keyword_overlap(question, e["content"]) for e in entries]
    )
    order = numpy.lexsort((-numpy.arange(len(entries)), -scores))[:10]
    return [entries[i]["id"] for i in order if scores[i] > 0]


# Plain BM25: relevance alone, no boosts, no embedding.
PLAIN_BM25 = SearchParams(alpha_recency=0, alpha_importance=0, speaker_boost=0, context_weight=0)
# The indexes of the journals the plain BM25 baseline searches: each built once, as the tool's.
_PLAIN_INDEXES = JournalIndexCache()


def plain_bm25_ids(entries, question, now):
    ranked = search_entries(entries, question, now=now, params=PLAIN_BM25, limit=10,
                            index_cache=_PLAIN_INDEXES)  # fmt: skip
    return [e["id"] for _, e in ranked]


def plain_embedding_ids(entries, question, embedder):
    vectors = embeddings(embedder.embed, [e["content"] for e in entries])
    scores = numpy.asarray(vectors) @ embedder.embed(question)
    order = numpy.argsort(-scores, kind="stable")[:10]
    return [entries[i]["id"] for i in order]


# ----------------------------------------------------------------------------------------------
# mem0 (the embedded default)


def sync_runner(func, *args, **kwargs):
    from twisted.internet import defer

    return defer.maybeDeferred(func, *args, **kwargs)


def open_store(folder, key):
    from ai_assistant.memory.longterm.mem0_store import make_semantic_store

    settings = Settings(overrides={"journal.max_entries": 100_000})
    return make_semantic_store(settings, data_dir=folder, key=key, runner=sync_runner)


def consolidate_all(ports, batch=200):
    """The sleep path: run_sleep_consolidation until every entry is in mem0 (no LLM)."""
    from ai_assistant.memory.longterm.links import MemoryLinks
    from ai_assistant.sleep.consolidation import run_sleep_consolidation

    while True:
        results = []
        run_sleep_consolidation(ports, max_entries=batch).addBoth(results.append)
        report = results[0]
        if not isinstance(report, dict) or not report.get("success"):
            raise RuntimeError(f"consolidation failed: {report}")
        if report["completed"] or not report["consolidated"]:
            break
    records = MemoryLinks(ports).records()
    return {memory_id: record["journal_ids"] for memory_id, record in records.items()}


# ----------------------------------------------------------------------------------------------


def run(data_path, conversations=None, question_limit=None, mem0_turns=None, use_mem0=True,
        log=print):  # fmt: skip
    """
    Run the benchmark.

    Args:
        data_path (str): LoCoMo json.
        conversations (int or tuple, optional): Use only the first N conversations, or
            `(first, last)`: conversations first to last (1-based).
        question_limit (int, optional): At most N questions per conversation.
        mem0_turns (int, optional): Consolidate only the first N turns of each conversation into
            mem0 (then only questions whose evidence lies in them are asked of mem0).
        use_mem0 (bool): Measure the mem0 configurations at all.
        log (callable): Progress lines.

    Returns:
        dict: The results document.
    """
    from ai_assistant.memory.embedder import get_embedder
    from ai_assistant.tools.catalogue import load_all_tools

    load_all_tools()
    if isinstance(conversations, int):
        conversations = (1, conversations)
    data = [sample for _, sample in selected_conversations(data_path, conversations)[0]]
    embedder = get_embedder()
    journal_methods = [TOOL, NO_GATE_TOOL, "keyword_overlap (seed)", "bm25 (plain)",
                       "embedding (plain, wordllama)", RELEVANCE_TOOL, NO_TIME_TOOL]  # fmt: skip
    mem0_methods = [MEM0_TOOL, MEM0_RELEVANCE_TOOL, RECALL, MEM0_SEARCH] if use_mem0 else []
    methods = journal_methods + mem0_methods
    tallies = {name: Tally() for name in methods}
    folder = tempfile.mkdtemp(prefix="locomo-mem0-")
    totals = {"turns": 0, "questions": 0, "mem0_turns": 0, "mem0_questions": 0}
    try:
        for number, sample in enumerate(data):
            turns = conversation_turns(sample)
            asked = questions(sample, question_limit)
            totals["turns"] += len(turns)
            totals["questions"] += len(asked)
            ports = make_ports(f"locomo-{number}")
            started = time.perf_counter()
            mapping = ingest(ports, turns)
            elapsed = time.perf_counter() - started
            for name in journal_methods:
                tallies[name].ingest_seconds += elapsed
            entries = Journal(ports).entries()
            now = ports.clock.now()

            def ask(name, answer, ask_list, mapping=mapping):
                tally = tallies[name]
                for item in ask_list:
                    started = time.perf_counter()
                    ids = answer(item["question"])
                    tally.query_seconds += time.perf_counter() - started
                    tally.queries += 1
                    tally.add(item["category"], [mapping.get(i) for i in ids], item["evidence"])

            defaults = ports.settings
            ask(TOOL, lambda q: search_tool_ids(ports, q), asked)  # noqa: B023
            ports.settings = defaults.with_overrides(NO_GATE)
            ask(NO_GATE_TOOL, lambda q: search_tool_ids(ports, q), asked)  # noqa: B023
            ask(journal_methods[2], lambda q: keyword_overlap_ids(entries, q), asked)  # noqa: B023
            ask(journal_methods[3], lambda q: plain_bm25_ids(entries, q, now), asked)  # noqa: B023
            ask(journal_methods[4], lambda q: plain_embedding_ids(entries, q, embedder),  # noqa: B023
                asked)  # fmt: skip
            # The same journal under the weights a question-answering assistant would use.
            ports.settings = defaults.with_overrides(RELEVANCE_ONLY)
            ask(RELEVANCE_TOOL, lambda q: search_tool_ids(ports, q), asked)  # noqa: B023
            ports.settings = defaults.with_overrides(NO_TIME)
            ask(NO_TIME_TOOL, lambda q: search_tool_ids(ports, q), asked)  # noqa: B023
            log(f"conversation {sample.get('sample_id')}: {len(turns)} turns, "
                f"{len(asked)} questions")  # fmt: skip

            if not use_mem0:
                continue
            subset = turns[:mem0_turns] if mem0_turns else turns
            kept = {t[3] for t in subset}
            mem_asked = [q for q in asked if set(q["evidence"]) <= kept]
            store = open_store(folder, f"locomo-{number}")
            mem_ports = make_ports(f"locomo-{number}", semantic=store)
            try:
                started = time.perf_counter()
                mem_mapping = ingest(mem_ports, subset)
                links = consolidate_all(mem_ports)
                elapsed = time.perf_counter() - started
                for name in mem0_methods:
                    tallies[name].ingest_seconds += elapsed
                totals["mem0_turns"] += len(subset)
                totals["mem0_questions"] += len(mem_asked)
                ask(MEM0_TOOL, lambda q: search_tool_ids(mem_ports, q), mem_asked, mem_mapping)  # noqa: B023
                mem_defaults = mem_ports.settings
                mem_ports.settings = mem_defaults.with_overrides(RELEVANCE_ONLY)
                ask(MEM0_RELEVANCE_TOOL, lambda q: search_tool_ids(mem_ports, q), mem_asked,  # noqa: B023
                    mem_mapping)  # fmt: skip
                ask(RECALL, lambda q: recall_memories_ids(mem_ports, q, links), mem_asked,  # noqa: B023
                    mem_mapping)  # fmt: skip
                ask(MEM0_SEARCH, lambda q: mem0_search_ids(store, q, links), mem_asked,  # noqa: B023
                    mem_mapping)  # fmt: skip
            finally:
                store.close()
            log(f"  mem0: {len(subset)} turns consolidated in {elapsed:.1f}s")
    finally:
        from ai_assistant.memory.longterm.mem0_store import close_all_stores

        close_all_stores()
        shutil.rmtree(folder, ignore_errors=True)

    from ai_assistant.plumbing.settings import DEFAULTS

    return {
        "benchmark": "locomo",
        "machine": describe(),
        "data": os.path.basename(str(data_path)),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "conversations": len(data),
        "sample_ids": [sample.get("sample_id") for sample in data],
        **totals,
        "search_defaults": {key: DEFAULTS["journal"].get(key) for key in (
            "alpha_recency", "alpha_importance", "alpha_relevance", "recency_decay",
            "speaker_boost", "context_weight", "context_terms", "time_boost", "embedding_weight",
            "expansion_weight", "fusion",
            "relevance_gate", "rerank_pool", "feedback_docs", "feedback_terms",
            "feedback_weight")},  # fmt: skip
        "methods": {name: tally.report() for name, tally in tallies.items()},
    }


def print_table(document, out=sys.stdout):
    out.write(f"{'method':<66} {'r@1':>6} {'r@5':>6} {'r@10':>6} {'ingest s':>9} {'ms/q':>7}\n")
    for name, report in document["methods"].items():
        overall = report["overall"]
        out.write(f"{name:<66} {overall['recall@1'] or 0:>6.3f} {overall['recall@5'] or 0:>6.3f}"
                  f" {overall['recall@10'] or 0:>6.3f} {report['ingest_seconds']:>9.2f}"
                  f" {report['query_ms_mean']:>7.2f}\n")  # fmt: skip
        for category in CATEGORIES.values():
            row = report[category]
            if row["questions"]:
                out.write(f"    {category:<62} {row['recall@1']:>6.3f} {row['recall@5']:>6.3f}"
                          f" {row['recall@10']:>6.3f}   (n={row['questions']})\n")  # fmt: skip


def conversation_range(value):
    """
    `--conversations`' value as `(first, last)` 1-based numbers: `"N"` is the first N,
    `"A-B"` conversations A to B.

    Raises:
        ValueError: Not a count or a range of numbers from 1 up.
    """
    text = str(value).strip()
    first, dash, last = text.partition("-")
    try:
        bounds = (int(first), int(last)) if dash else (1, int(text))
    except ValueError:
        raise ValueError(f"{value!r} is neither a count (3) nor a range (4-5)") from None
    if bounds[0] < 1 or bounds[1] < bounds[0]:
        raise ValueError(f"{value!r}: conversations are numbered from 1, first <= last")
    return bounds


def selected_conversations(data, conversations):
    """
    `([(number, conversation)], how many the file holds)`: the conversations of the data
    file `data` within `conversations` (`(first, last)`, 1-based; None for all). Raises
    ValueError when none is in that range.
    """
    every = json.loads(Path(data).read_text())
    first, last = conversations or (1, len(every))
    numbered = list(enumerate(every, start=1))[first - 1 : last]
    if not numbered:
        raise ValueError(f"the data holds {len(every)} conversations, none in {first}-{last}")
    return numbered, len(every)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--conversations", default=None,
                        help="the first N conversations, or a 1-based range A-B")
    parser.add_argument("--questions", type=int, default=None, help="per conversation")
    parser.add_argument("--mem0-turns", type=int, default=None,
                        help="consolidate only the first N turns of each conversation")
    parser.add_argument("--no-mem0", action="store_true")
    parser.add_argument("--out", default=str(RESULTS / "locomo.json"))
    args = parser.parse_args(argv)
    try:
        conversations = conversation_range(args.conversations) if args.conversations else None
    except ValueError as error:
        parser.error(f"--conversations: {error}")
    document = run(args.data, conversations, args.questions, args.mem0_turns,
                   not args.no_mem0)  # fmt: skip
    print_table(document)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    return document


if __name__ == "__main__":
    main()
