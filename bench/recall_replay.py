"""
Recall replayed: the "What you remember" block of every question of a `bench.game_recall`
run, made again from the state the assistant had, in seconds instead of a full run.

    .venv/bin/python -m bench.game_recall --save-states DIR ...   # once: saves the states
    .venv/bin/python -m bench.recall_replay --states DIR [--set recall.budget_tokens=900]
        [--splits 1-3,4-5] [--out PATH]

`--save-states` keeps, per conversation, what recall ranks at question time (the corpus the
pipeline builds from the journal, the long-term store's mirror, the memory nodes and the
profiles, as `recall.pipeline.build_corpus` makes it), the assistant's settings and clock,
and per question the `RecallQuery` the prompt asked and the request the model received.

The replay runs the pipeline's own worker function (`recall.pipeline.recall_from_corpus`) on
that corpus for each saved query, renders the block with the prompt's own block function
(`agent.blocks.remembered.remembered_block`), puts it in the saved request in place of the
block it had, and counts the evidence as `bench.game_recall` does (strict: the whole
normalised turn, or the whole text of a memory made from it). So a change to the ranking, the
line format or the budget is measured on the request as a whole, with its token count. Changes
to the request's other sections are not replayed (they come from the saved request): measure
those with a full run.
"""

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

from bench.game_recall import load_states, request_text
from bench.locomo import conversation_range
from bench.percentiles import percentile
from bench.prompt_size import request_tokens

_BLOCK = re.compile(r"## What you remember\n(?:\(.*\)\n)?<<<BEGIN MEMORIES>>>.*?<<<END MEMORIES>>>",
                    re.DOTALL)  # fmt: skip
_TURN = "## Your turn"


def with_block(request, block):
    """The request with its "What you remember" block replaced by `block` (None: none)."""
    from ai_assistant.plumbing.markup import strip_markup

    block = strip_markup(block) if block else ""
    heading = f"## What you remember\n{block}" if block else ""
    messages = []
    for message in request["messages"]:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            if _BLOCK.search(content):
                content = _BLOCK.sub(lambda _: heading, content, count=1)
            elif heading:
                content = content.replace(_TURN, f"{heading}\n\n{_TURN}", 1)
            content = re.sub(r"\n{3,}", "\n\n", content)
        messages.append({**message, "content": content})
    return {**request, "messages": messages}


def found_strict(evidence, dia, text):
    """True when turn `dia`'s whole normalised text, or a memory made from it, is in `text`."""
    whole = evidence["texts"].get(dia)
    if whole and whole in text:
        return True
    return any(memory and memory in text for memory in evidence["memory_texts"].get(dia, ()))


def replay_conversation(state, overrides=None):
    """
    Every saved question of one conversation, recalled again.

    Returns:
        list[dict]: Per question: number, category, evidence, strict share, found turns,
        request tokens, the block's tokens and lines.
    """
    from ai_assistant.agent.blocks.remembered import fit_to_request, remembered_block
    from ai_assistant.memory.recall.pipeline import recall_from_corpus
    from ai_assistant.memory.search.dense import EmbeddingMatrices
    from ai_assistant.memory.search.expansion import JournalVocabulary
    from ai_assistant.plumbing.settings import DEFAULTS, Settings, deep_merge
    from ai_assistant.plumbing.tokens import count_tokens

    # the saved settings over today's defaults: a setting added since the state was saved
    # reads its default, not None
    saved = state["settings"]
    settings = Settings(deep_merge(DEFAULTS, saved._tree),
                        {**saved._overrides, **(overrides or {})})
    matrices, vocabulary = EmbeddingMatrices(), JournalVocabulary()
    figures = []
    for asked in state["questions"]:
        query = asked["query"]
        query = type(query)(**{**query.__dict__,
                               "limit": settings.get("recall.prompt_items"),
                               "budget": settings.get("recall.budget_tokens")})  # fmt: skip
        # as the pipeline builds it: memories, the journal (with the question), other tiers
        corpus = (state["corpus"] + tuple(asked.get("journal_added") or ())
                  + tuple(state.get("others") or ()))
        _, lines = recall_from_corpus(corpus, query, state["now"], settings,
                                      matrices=matrices, hidden=state["hidden"],
                                      vocabulary=vocabulary)  # fmt: skip
        # fitted to the request's budget as the reply's cycle fits it, the other sections as
        # the saved request had them
        rest = request_tokens(with_block(asked["request"], None))
        lines = fit_to_request(lines, rest, settings.get("recall.request_tokens"),
                               settings.get("recall.min_tokens"))
        block = remembered_block(None, {"recall": lines})
        request = with_block(asked["request"], block)
        text = request_text(request)
        found = [dia for dia in asked["evidence"] if found_strict(state["evidence"], dia, text)]
        figures.append({
            "number": state["number"], "category": asked["category"],
            "question": asked["question"], "evidence": asked["evidence"], "found": found,
            "strict": len(found) / len(asked["evidence"]),
            "tokens": request_tokens(request),
            "block_tokens": count_tokens(block) if block else 0, "lines": len(lines),
        })  # fmt: skip
    return figures


def summary(figures):
    """Strict share (mean and pooled), overall and per category, and the request's tokens."""
    if not figures:
        return {}
    turns = sum(len(f["evidence"]) for f in figures)
    categories = {}
    for name in sorted({f["category"] for f in figures}):
        chosen = [f for f in figures if f["category"] == name]
        categories[name] = {"questions": len(chosen),
                            "strict": round(statistics.fmean(f["strict"] for f in chosen), 4)}
    tokens = [f["tokens"] for f in figures]
    return {
        "questions": len(figures),
        "strict": round(statistics.fmean(f["strict"] for f in figures), 4),
        "strict_pooled": round(sum(len(f["found"]) for f in figures) / turns, 4),
        "per_category": categories,
        "request_tokens": {"mean": round(statistics.fmean(tokens), 1),
                           "p95": percentile(tokens, 0.95), "max": max(tokens)},
        "block_tokens_mean": round(statistics.fmean(f["block_tokens"] for f in figures), 1),
        "lines_mean": round(statistics.fmean(f["lines"] for f in figures), 1),
    }  # fmt: skip


def replay(folder, overrides=None, splits=()):
    """The replay's results document over every saved conversation (and `splits`)."""
    started = time.perf_counter()
    figures = []
    for state in load_states(folder):
        figures.extend(replay_conversation(state, overrides))
    document = {"benchmark": "recall_replay", "overrides": overrides or {},
                "all": summary(figures)}  # fmt: skip
    for first, last in splits:
        document[f"{first}-{last}"] = summary([f for f in figures
                                               if first <= f["number"] <= last])
    document["seconds"] = round(time.perf_counter() - started, 1)
    document["per_question"] = figures
    return document


def setting_value(text):
    """`key=value` of `--set`, the value read as JSON when it is JSON (numbers, booleans)."""
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"{text!r} is not key=value")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--states", required=True, help="a folder written by --save-states")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting overridden for the replay (repeatable)")
    parser.add_argument("--splits", default=None, help="ranges summarised apart, e.g. 1-3,4-5")
    parser.add_argument("--out", default=None, help="where to write the results (JSON)")
    args = parser.parse_args(argv)
    try:
        overrides = dict(setting_value(text) for text in args.set)
        splits = [conversation_range(part) if "-" in part else (int(part), int(part))
                  for part in (args.splits.split(",") if args.splits else ())]  # fmt: skip
        document = replay(args.states, overrides, splits)
    except ValueError as error:
        parser.error(str(error))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps({k: v for k, v in document.items() if k != "per_question"}, indent=2),
          file=sys.stdout)  # fmt: skip
    return document


if __name__ == "__main__":
    main()
