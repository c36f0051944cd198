"""
Where did the turns stored nowhere go? A trace of `bench.game_recall`'s `never_stored`.

    .venv/bin/python -m bench.never_stored [--data PATH] [--out PATH]
        [--consolidation mechanical|llm] [--conversations N|A-B] [--sessions N]

Plays conversations the way `bench.game_recall` does (the same `Game`: every turn through
`talk`'s path, a full sleep after each session, at the game's defaults, the scripted
paraphrasing model with `--consolidation llm`), asks no questions, and then lists every turn
that is in neither the journal nor any long-term memory, with what happened to its journal
entry on the way:

- `consolidated into N memories` (N = 0: consolidated into nothing), and whether word for word;
- `store kept <memory>`: the store found the claim already stored and kept that memory (a
  duplicate);
- `evicted` (a full journal) or `pruned low importance` (the dreaming phase's episodic
  pruning), with the entry's importance, how it was set and its facts;
- `link record of <memory> forgot this entry`: aging the memory links dropped the only record
  that tied the entry to a memory;
- `no journal entry`: the turn never became one.

It watches, it changes nothing: the owners' verbs (`Journal`'s pruning, `Memories.add`,
consolidation's marking, the links' aging) are wrapped to record what they did, then called
as they are. Each turn also gets its `information` (`memory.recall.information`, the speakers'
names ignored): small talk is 0-0.25. Results go to `--out` (default
`bench/results/never_stored.json`; `never_stored_llm.json` with `--consolidation llm`).
"""

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from bench import game_recall
from bench.inline import inline_threads
from bench.locomo import DEFAULT_DATA, conversation_range, selected_conversations
from bench.paraphrasing_model import ParaphrasingModel
from bench.scale import boot

REPO = Path(__file__).resolve().parent.parent
RESULTS = {"mechanical": REPO / "bench" / "results" / "never_stored.json",
           "llm": REPO / "bench" / "results" / "never_stored_llm.json"}  # fmt: skip


class Watch:
    """What happened to each journal entry: `events[entry id] = [str, ...]`."""

    def __init__(self):
        self.events = defaultdict(list)
        self._undo = []

    def _wrap(self, owner, name, make):
        original = getattr(owner, name)
        setattr(owner, name, make(original))
        self._undo.append((owner, name, original))

    def start(self):
        """Wrap the verbs that can lose a line (see the module doc)."""
        from ai_assistant.memory import journal
        from ai_assistant.memory.longterm import links, memories
        from ai_assistant.sleep import consolidation

        events = self.events

        def described(entry):
            return (f"importance {entry.get('importance')} ({entry.get('importance_method')}), "
                    f"facts {entry.get('facts')!r}")

        def auto_prune(original):
            def wrapped(document):
                before = {entry["id"]: dict(entry) for entry in document["entries"]}
                consolidated = set(document.get("consolidated_entry_ids") or ())
                removed = original(document)
                for entry_id in removed:
                    events[entry_id].append(
                        f"evicted from a full journal (consolidated: {entry_id in consolidated}"
                        f"; {described(before[entry_id])})")
                return removed
            return wrapped

        def prune_low(original):
            def wrapped(self, **kwargs):
                before = {entry["id"]: dict(entry) for entry in self.entries()}
                report = original(self, **kwargs)
                for entry_id in report["pruned"]:
                    events[entry_id].append(
                        f"pruned low importance ({described(before[entry_id])})")
                return report
            return wrapped

        def finish(original):
            def wrapped(ports, entry_id, memory_ids, verbatim=False, **kwargs):
                events[entry_id].append(f"consolidated into {len(memory_ids)} memories"
                                        + (" (word for word)" if verbatim else ""))
                return original(ports, entry_id, memory_ids, verbatim, **kwargs)
            return wrapped

        def add(original):
            def wrapped(self, text, metadata=None):
                entry_id = (metadata or {}).get("entry_id")

                def seen(stored):
                    for item in stored or ():
                        if item.get("event") == "DUPLICATE":
                            events[entry_id].append(
                                f"store kept {item.get('id')} {item.get('memory')!r} "
                                f"for {text!r}")
                    return stored
                return original(self, text, metadata).addCallback(seen)
            return wrapped

        def age(original):
            def wrapped(ports, records):
                before = {key: list(record.get("journal_ids") or ())
                          for key, record in records.items()}  # fmt: skip
                shrunk = original(ports, records)
                for memory_id, entry_ids in before.items():
                    kept = set((records.get(memory_id) or {}).get("journal_ids") or ())
                    for entry_id in entry_ids:
                        if entry_id not in kept:
                            events[entry_id].append(
                                f"link record of {memory_id} forgot this entry (aged)")
                return shrunk
            return wrapped

        self._wrap(journal, "auto_prune", auto_prune)
        self._wrap(journal.Journal, "prune_low_importance", prune_low)
        self._wrap(consolidation, "_finish_entry", finish)
        self._wrap(memories.Memories, "add", add)
        self._wrap(links, "age_memory_links", age)

    def stop(self):
        """Put every wrapped verb back."""
        while self._undo:
            owner, name, original = self._undo.pop()
            setattr(owner, name, original)


def trace_conversation(sample, number, args, watch):
    """
    Listen to and sleep on one conversation; trace its turns stored nowhere.

    Returns:
        dict: The conversation's figures and its `lost` turns.
    """
    from ai_assistant.memory.recall.information import information

    watch.events.clear()
    started = time.perf_counter()
    game = game_recall.Game(sample, number)
    model = None
    if args.consolidation == "llm":
        model = ParaphrasingModel(max_facts=game.ports.settings.get("memory.max_facts_per_entry"))
        game.ports.llm = model
    sessions = game_recall.turn_sessions(sample)[: args.sessions or None]
    for moment, turns in sessions:
        game.listen(moment, turns)
        game.sleep()
    evidence = game_recall.Evidence(sessions, game.entry_dia, game.memories(),
                                    [entry["id"] for entry in game.journal_entries()])
    entries_of = defaultdict(list)
    for entry_id, dia in game.entry_dia.items():
        entries_of[dia].append(entry_id)
    said = {dia: (speaker, text) for _, turns in sessions for speaker, text, dia in turns}
    names = {word for name in game.players for word in name.lower().split()}
    lost = []
    for dia in evidence.never_stored(evidence.keys):
        speaker, text = said[dia]
        lost.append({"dia_id": dia, "speaker": speaker, "text": text,
                     "information": information(text, ignore=names),
                     "entries": {str(entry_id): watch.events.get(entry_id, [])
                                 for entry_id in entries_of.get(dia, ())}
                                or "no journal entry"})  # fmt: skip
    return {"number": number, "sample_id": sample.get("sample_id"),
            "turns": len(evidence.keys), "never_stored": len(lost),
            "seconds": round(time.perf_counter() - started, 1),
            **({"model_calls": dict(sorted(model.calls.items()))} if model else {}),
            "lost": lost}  # fmt: skip


def run(args, log=print):
    """Boot the shell, trace every conversation asked for, return the results document."""
    numbered, _ = selected_conversations(args.data, args.conversations)
    conversations, watch = [], Watch()
    with tempfile.TemporaryDirectory(prefix="ai_assistant_never_stored_") as folder:
        boot(folder, "sqlite")
        inline_threads()
        watch.start()
        try:
            from django.conf import settings

            for number, sample in numbered:
                settings.GAME_DIR = str(Path(folder) / f"conversation_{number}")
                traced = trace_conversation(sample, number, args, watch)
                conversations.append(traced)
                log(f"{traced['sample_id']}: {traced['never_stored']} of {traced['turns']} "
                    f"turns stored nowhere")
        finally:
            watch.stop()
            from ai_assistant.memory.longterm.mem0_store import close_all_stores

            close_all_stores()
    return {"benchmark": "never_stored",
            "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "what": {"data": str(args.data), "consolidation": args.consolidation,
                     "sessions_per_conversation": args.sessions or "all"},
            "never_stored": sum(c["never_stored"] for c in conversations),
            "turns": sum(c["turns"] for c in conversations),
            "conversations": conversations}  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--out", default=None)
    parser.add_argument("--consolidation", choices=sorted(RESULTS), default="mechanical")
    parser.add_argument("--conversations", default=None,
                        help="the first N conversations, or a 1-based range A-B (e.g. 4-5)")
    parser.add_argument("--sessions", type=int, default=None,
                        help="only the first N sessions of each (a smoke run)")
    args = parser.parse_args(argv)
    try:
        if args.conversations is not None:
            args.conversations = conversation_range(args.conversations)
    except ValueError as error:
        parser.error(f"--conversations: {error}")
    if args.sessions is not None and args.sessions < 1:
        parser.error("--sessions must be at least 1")
    if not Path(args.data).is_file():
        parser.error(f"no data file at {args.data}")
    document = run(args, log=lambda line: print(line, file=sys.stderr, flush=True))
    out = Path(args.out or RESULTS[args.consolidation])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps({key: document[key] for key in ("never_stored", "turns")}))
    return document


if __name__ == "__main__":
    main()
