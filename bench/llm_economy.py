"""
LLM economy of sleep: calls and tokens for one full sleep cycle over fresh journal entries.

    .venv/bin/python -m bench.llm_economy [--entries 100] [--out PATH]

A fresh assistant writes N journal entries (heuristic importance), falls asleep and runs
`run_sleep_tick` until the compacting phase is over and the dreaming steps have nothing left
to do. The LLM is the real `LLMClient` against the scripted OpenAI-compatible server
(`tests/scripted_llm.py`) answering through a responder; the semantic tier is the real mem0
(local qdrant + WordLlama in a temp folder) with its LLM pointed at the same server, so any
fact-extraction or update call mem0 made itself would be counted too. Every request is
classified (importance scoring - which also extracts the facts -, consolidation's batched
fact extraction, mem0 fact extraction, mem0 memory update, reflection, other) and its tokens
estimated (4 characters a token, prompt = the request's messages, completion = the reply).

The responder lists one fact per entry, plus a self-referential one for every fourth entry
(which persona protection must drop), so the run also shows what the cycle produced: entries
LLM-scored, entries consolidated, memories stored and their metadata, facts rejected, and
reflections run.

Configurations: the seed's one scoring call per entry (`scoring_max_per_tick=1`), the
current defaults, and the current defaults where the speakers are also heard as people (each
entry an observation of its speaker, with a longer remark, so entity consolidation has more
than one prompt's worth of observations per person) and the model has nothing new to say (no
stable attribute, no insight: valid, minimal answers, as a real model often gives): what each
dreaming tick asks the model then shows whether a step with nothing new to work on is asked
again (`dreaming_calls_by_tick`). Results go to `bench/results/llm_economy.json`.
"""

import argparse
import functools
import json
import re
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO / "tests"))

QUIET_TICKS = 5  # dreaming ticks run once compacting is over
NOTHING_NEW = "current defaults, people heard, a model with nothing new to say"
TOPICS = ("the harbour", "the old tower", "a lost ring", "the spring festival", "wolves",
          "the baker", "a storm", "the library", "a stranger", "the mayor's election")  # fmt: skip
PEOPLE = ("Alice", "Bob", "Carol", "Dmitri", "Eve")


def tokens(text):
    return max(1, len(text) // 4)


def classify(request):
    text = " ".join(str(m.get("content", "")) for m in request.get("messages", []))
    if "Known attributes" in text:
        return "entity_consolidation"
    if "high-level questions" in text or "high-level insights" in text:
        return "reflection"  # its prompts speak of facts too: told apart first
    if "Rate the significance" in text:
        return "importance_scoring"
    if "List the objective facts each journal entry" in text:
        return "fact_extraction"
    if '"event"' in text and ("ADD" in text or "UPDATE" in text):
        return "mem0_update"
    if "facts" in text.lower() and "extract" in text.lower():
        return "mem0_fact_extraction"
    if "reflect" in text.lower() or "insight" in text.lower():
        return "reflection"
    if "entity" in text.lower() or "profile" in text.lower():
        return "entity_consolidation"
    return "other"


_ENTRY_LINE = re.compile(r"^\[(\d+)\]( \(score only\))?\n<<<BEGIN [^>\n]+>>>\n(.*?)\n<<<END ",
                         flags=re.M | re.S)
_TOLD = re.compile(r"^(\w+) told me about (.*?)\.?$")


def facts_for(content, entry_id):
    """The responder's facts for an entry: one world fact, and a self-reference now and then."""
    match = _TOLD.match(content.strip())
    fact = f"{match.group(1)} talked about {match.group(2)}." if match else content.strip()
    return [fact] + (["The assistant listened patiently."] if entry_id % 4 == 0 else [])


def respond(request, nothing_new=False):
    """
    A plausible answer for each kind of request (the server's responder); `nothing_new`: no
    stable attribute and no insight to give (valid, minimal answers).
    """
    from scripted_llm import Reply

    messages = request.get("messages", [])
    text = "\n".join(str(m.get("content", "")) for m in messages)
    kind = classify(request)
    if nothing_new and kind in ("entity_consolidation", "reflection"):
        content = json.dumps({"attributes": {}} if kind == "entity_consolidation" else
                             {"questions": ["What matters most lately?"], "insights": []})
        return Reply(content=content, usage=(tokens(json.dumps(messages)), tokens(content)))
    if kind == "importance_scoring":
        items = []
        for number, score_only, content in _ENTRY_LINE.findall(text):
            item = {"id": int(number), "score": 4 + int(number) % 5}
            if not score_only:
                item["facts"] = facts_for(content, int(number))
            items.append(item)
        content = json.dumps({"scores": items})
    elif kind == "fact_extraction":
        content = json.dumps({"entries": [
            {"id": int(number), "facts": facts_for(line, int(number))}
            for number, _, line in _ENTRY_LINE.findall(text)]})  # fmt: skip
    elif kind == "mem0_update":
        content = json.dumps({"memory": [{"id": "0", "text": "a fact", "event": "ADD"}]})
    elif kind == "mem0_fact_extraction":
        last = str(messages[-1].get("content", ""))[-120:]
        content = json.dumps({"facts": [last.strip() or "a fact"]})
    elif kind == "reflection":
        content = json.dumps({"questions": ["What matters most lately?"],
                              "insights": [{"insight": "People worry about wolves.",
                                            "evidence": [1, 2]}]})  # fmt: skip
    else:
        content = json.dumps({"summary": "Nothing notable.", "observations": []})
    return Reply(content=content, usage=(tokens(json.dumps(messages)), tokens(content)))


def remark(number):
    """What a speaker says at more length, heard as an observation of them."""
    return (f"About {TOPICS[number % 10]} (note {number}): I saw it myself this morning, and I "
            f"keep thinking about what it means for the rest of us living here, so I wanted "
            f"you to hear it from me first before the whole market starts talking about it.")


def run_cycle(server, entries, overrides, data_dir, max_ticks=400, people=False):
    from scripted_llm import sync_runner
    from twisted.python.failure import Failure

    from ai_assistant.memory.entities import People
    from ai_assistant.memory.journal import Journal
    from ai_assistant.memory.longterm.links import MemoryLinks
    from ai_assistant.memory.longterm.mem0_store import make_semantic_store
    from ai_assistant.memory.persona import is_self_referential
    from ai_assistant.memory.reflection_state import ReflectionState
    from ai_assistant.plumbing.llm import LLMClient
    from ai_assistant.plumbing.ports import AssistantPorts, FixedClock, MemoryState
    from ai_assistant.plumbing.settings import DEFAULTS, Settings
    from ai_assistant.sleep.cycle import run_sleep_tick

    llm = dict(DEFAULTS["llm"], base_url=server.base_url, api_key="x", model="scripted",
               max_retries=0)  # fmt: skip
    settings = Settings(overrides={"llm.base_url": server.base_url, "llm.api_key": "x",
                                   "llm.model": "scripted", **overrides})  # fmt: skip
    store = make_semantic_store(settings, data_dir=data_dir, key="economy", runner=sync_runner)
    ports = AssistantPorts(
        key="economy", name="Economist", state=MemoryState(), clock=FixedClock(),
        settings=settings, semantic=store,
        llm=LLMClient(llm, npc_key="economy", runner=sync_runner), run_cpu_bound=sync_runner,
    )  # fmt: skip
    for number in range(entries):
        ports.clock.advance(minutes=7)
        Journal(ports).add(
            f"{PEOPLE[number % 5]} told me about {TOPICS[number % 10]} (note {number}).",
            source_type="direct", source_entity=PEOPLE[number % 5],
        )  # fmt: skip
        if people:
            People(ports).observe(f"#{number % 5}", PEOPLE[number % 5], remark(number))
    written = {entry["id"] for entry in Journal(ports).entries()}
    ports.state.set("operating_mode", "sleep")
    ports.state.set("sleep_phase", "compacting")
    server.requests.clear()
    ticks, quiet, errors, compacting_ticks = 0, 0, [], 0
    by_tick = []  # the requests of each dreaming tick
    scored, consolidated, rejected, reflections = set(), set(), 0, 0
    try:
        while ticks < max_ticks:
            ticks += 1
            ports.clock.advance(minutes=1)
            asked_before = len(server.requests)
            outcome = []
            run_sleep_tick(ports, lambda target, reason: None).addBoth(outcome.append)
            report = outcome[0]
            if isinstance(report, Failure):
                report.raiseException()
            steps = report.get("steps") or {}
            for name, step in steps.items():
                if isinstance(step, dict) and step.get("error"):
                    errors.append(f"{name}: {step['error']}")
            scoring = steps.get("importance_scoring") or {}
            scored.update(scoring.get("scored") or ())
            rejected += scoring.get("facts_rejected") or 0
            consolidated.update((steps.get("consolidation") or {}).get("consolidated") or ())
            if report["phase"] == "compacting":
                compacting_ticks += 1
            else:
                by_tick.append(len(server.requests) - asked_before)
                quiet += 1
                if quiet >= QUIET_TICKS:  # the dreaming steps have had their chance to finish
                    break
        memories = []
        store.list(limit=10000).addBoth(memories.append)
        memories = memories[0]
        reflections = ReflectionState(ports).current()["reflection_count"]
        linked = {entry_id for record in MemoryLinks(ports).records().values()
                  for entry_id in record.get("journal_ids") or ()}  # fmt: skip
    finally:
        store.close()
    kinds = {}
    for request in server.requests:
        kind = classify(request)
        bucket = kinds.setdefault(kind, {"calls": 0, "prompt_tokens": 0,
                                         "completion_tokens": 0})  # fmt: skip
        bucket["calls"] += 1
        bucket["prompt_tokens"] += tokens(json.dumps(request.get("messages", [])))
        bucket["completion_tokens"] += tokens(respond(request).content)
    calls = sum(b["calls"] for b in kinds.values())
    prompt_tokens = sum(b["prompt_tokens"] for b in kinds.values())
    completion_tokens = sum(b["completion_tokens"] for b in kinds.values())
    journal_memories = [m for m in memories if (m.get("metadata") or {}).get("source") == "journal"]
    return {
        "overrides": overrides,
        "ticks": ticks,
        "compacting_ticks": compacting_ticks,
        "dreaming_calls_by_tick": by_tick,
        "llm_calls": calls,
        "calls_per_entry": round(calls / entries, 3),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "tokens_per_entry": round((prompt_tokens + completion_tokens) / entries, 1),
        "by_kind": kinds,
        # what the cycle produced (counted over the ticks: reflection's [SYNTHESIS] entries
        # may auto-prune old, already consolidated entries from the journal)
        "llm_scored": len(scored & written),
        "consolidated": len(consolidated & written),
        # near-identical facts share one memory (the store's de-duplication), so every
        # consolidated entry is linked to its memories even where they are fewer
        "entries_linked_to_memories": len(linked & consolidated),
        "journal_memories": len(journal_memories),
        "memories_with_llm_importance": sum(
            1 for m in journal_memories if m["metadata"].get("importance_method") == "llm"),
        "self_referential_facts_dropped": rejected,
        "self_referential_memories": sum(
            1 for m in journal_memories if is_self_referential(m.get("memory", ""))),
        "reflections": reflections,
        "step_errors": sorted(set(errors))[:10],
    }


def run(entries=100, log=print):
    from scripted_llm import ScriptedLLMServer

    from ai_assistant.memory.longterm.mem0_store import close_all_stores

    configurations = {
        "seed: one scoring call per entry": ({"journal.scoring_max_per_tick": 1,
                                              "journal.scoring_batch_size": 1}, False),
        "current defaults": ({}, False),
        NOTHING_NEW: ({}, True),
    }
    document = {"benchmark": "llm_economy", "entries": entries,
                "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "token_estimate": "4 characters per token", "runs": {}}  # fmt: skip
    with ScriptedLLMServer(responder=respond) as server:
        for name, (overrides, people) in configurations.items():
            folder = tempfile.mkdtemp(prefix="economy-")
            server.responder = functools.partial(respond, nothing_new=people)
            try:
                document["runs"][name] = run_cycle(server, entries, overrides, folder,
                                                   people=people)
            finally:
                close_all_stores()
                shutil.rmtree(folder, ignore_errors=True)
            log(f"{name}: {document['runs'][name]['llm_calls']} calls")
    best = min(run["calls_per_entry"] for run in document["runs"].values())
    document["target_calls_per_entry<=0.25"] = best <= 0.25
    return document


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--out", default=str(RESULTS / "llm_economy.json"))
    args = parser.parse_args(argv)
    document = run(args.entries)
    print(json.dumps(document["runs"], indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    return document


if __name__ == "__main__":
    main()
