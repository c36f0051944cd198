"""
Recall as the game plays it: is the evidence for a question in the request the LLM receives?

    .venv/bin/python -m bench.game_recall [--data PATH] [--out PATH]
        [--consolidation mechanical|llm] [--conversations N|A-B] [--splits A-B,C-D]
        [--sessions N] [--questions N] [--store embedded|postgres]

For each LoCoMo conversation (`../shared/bench/locomo/locomo_dev.json` by default; the format
is described in that folder's README and in `bench/locomo.py`), in the real Evennia shell
booted in-process by `bench/scale.py`'s helpers (Django + Evennia on a throwaway SQLite file,
the semantic tier's data folder in the same temporary folder):

- **Setup.** One assistant (`AssistantCharacter`) in a room of its own, at the game's defaults
  (no `config_overrides`): no LLM endpoint is configured, so it runs in mechanical mode, with
  the embedded mem0 store (local WordLlama embedder, local qdrant). Its clock is a
  `FixedClock` set to each session's date. The conversation's two speakers are two characters
  in the room (distinct stable ids); the assistant is the listener they talk to.
- **Listening.** Each turn goes through the path of a player's `talk`:
  `npc.assistant.hear(player, text, "talk")`, then the awake tick (`run_tick("awake")`).
- **Consolidation path.** `--consolidation mechanical` (the default, the game with no model
  configured): no LLM while listening and sleeping, so memories are the journal entries word
  for word. `--consolidation llm` (the path a live game runs): the assistant's LLM port is
  `bench/paraphrasing_model.py`'s `ParaphrasingModel` from the first line on, so each line
  heard is answered by the ReAct loop (a short neutral `say`; the delayed calls the turn
  schedules, the speaker's cooldown, run before the next line, 30 s later), and sleep scores
  importance and extracts facts with it: memories are then the model's paraphrased facts, one
  per sentence that says something, not the turn's words.
- **Sleep.** After every session: `enter_sleep` as `@assistant/sleep` does, sleep ticks
  (`run_tick("sleep")`) until the consolidation is complete and the dreaming phase's link
  generation has nothing left, then `request_wake` as `@assistant/wake`.
- **Questions** (categories 1-4, as `bench/locomo.py` selects them) are asked by the
  conversation's first speaker through the awake tick, an hour after the last session. Only
  now the assistant gets an LLM port: `CapturingLLM` (`bench/prompt_size.py`), which keeps the
  request the ReAct loop sends (the messages and the tool specs, what would go over the wire)
  and answers with a plain `say`, so the turn ends after one request. Every question starts
  from the same memory: the state documents are put back as they were after the last sleep,
  so the questions asked before (journaled and remembered like any line) do not crowd the
  journal or the conversation history of the next.

What is recorded per question:

- `evidence_in_prompt` (the headline, lenient): the share of its evidence turns present in the
  request: the turn's own words (whitespace and punctuation normalised; a prefix of at most
  `KEY_CHARS` characters, so a line cut short still counts), or the same prefix of a mem0
  memory made from the turn's journal entry. Entries and memories map back to `dia_id`s
  outside the assistant: an entry is the journal entry the turn's awake tick wrote; a memory
  is made from an entry when its metadata `entry_id`, or its record's `journal_ids` in the
  memory links, name it.
- `evidence_in_prompt_strict`: the same share, but a turn counts only when its WHOLE
  normalised text is in the request, or the whole normalised text of a memory made from it.
  A line cut short, or half a turn, does not count.
- `tools_at_10`: the share of its evidence turns found in the union of what the two lookup
  tools of a conversation return at their top 10, `search_journal` and `recall_scenes`, each
  run through `execute_tool` with the question as query, with the ports the ReAct cycle was
  given for the asking player (so whatever the cycle knows of its interlocutor, the tools
  know too). A hit matches by entry id, by a memory made from the entry, or by the text.
- the request's tokens (cl100k, `plumbing.tokens`: messages with their chat overhead plus the
  tool specs as JSON), and per section of the system message.
- for missed evidence, where it was at question time: still in the `journal`, only in `mem0`,
  or `nowhere`.

Overall and per category the results give each share as a mean over questions (the figures
above) and pooled over evidence turns (`evidence_in_prompt_pooled`,
`evidence_in_prompt_strict_pooled`: found evidence turns / all evidence turns, so a question
with five evidence turns weighs five times one with one). `never_stored` counts the distinct
evidence turns that were, at question time, in neither the journal nor any memory.
`--conversations` takes the first N conversations or a 1-based range `A-B`; `--splits` adds
the same figures for ranges of the conversations run (e.g. `1-3,4-5`: a tuning split and a
held-out one), by their number in the data file.

The bench never reimplements recall: whatever code builds the prompt and answers the tools at
run time is what it measures. Results go to `--out` and to `bench/results/game_recall.json`.
"""

import argparse
import copy
import json
import pickle
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.inline import inline_threads
from bench.locomo import (
    CATEGORIES,
    DEFAULT_DATA,
    conversation_range,
    parse_session_date,
    questions,
    selected_conversations,
)
from bench.paraphrasing_model import ParaphrasingModel
from bench.percentiles import percentile
from bench.prompt_size import CapturingLLM, request_tokens
from bench.scale import boot

REPO = Path(__file__).resolve().parent.parent
# one conversation's saved state, for `bench.recall_replay` (`--save-states`)
STATE_FILE = "conversation_{number}.pickle"
RESULTS = {"mechanical": REPO / "bench" / "results" / "game_recall.json",
           "llm": REPO / "bench" / "results" / "game_recall_llm.json"}
KEY_CHARS = 60  # the normalised prefix of a turn or memory looked for in a request
TURN_SPACING = timedelta(seconds=30)  # between two turns of a session
SLEEP_TICKS_MAX = 400  # a sleep that has not finished by then is reported, not waited for
TOOLS = ("search_journal", "recall_scenes")
TOP_K = 10
SETTLE_SECONDS = 120
SHARES = ("evidence_in_prompt", "evidence_in_prompt_strict", "tools_at_10")
PER_QUESTION = ("conversation", "number", "question", "category", "evidence", *SHARES,
                "found_via", "found_via_strict", "missed_where", "tokens", "sections")


def settle(deferred):
    """
    The result of a Deferred: inline when the thread pools run inline (`inline_threads`),
    otherwise by turning the reactor until it fires (work a module sent to a pool it imported
    before the bench could make it inline).
    """
    from twisted.python.failure import Failure

    if deferred is None or not hasattr(deferred, "addBoth"):
        return deferred
    results = []
    deferred.addBoth(results.append)
    if not results:
        from twisted.internet import reactor

        deadline = time.monotonic() + SETTLE_SECONDS
        while not results and time.monotonic() < deadline:
            reactor.iterate(0.001)
    if not results:
        raise RuntimeError(f"a Deferred did not fire within {SETTLE_SECONDS} s")
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


def normalise(text):
    """Lower case, every run of punctuation or whitespace one space: how text is compared."""
    return " ".join(re.sub(r"[\W_]+", " ", str(text).lower()).split())


def text_key(text):
    """The normalised prefix of `text` looked for in a request (whole words only)."""
    words, key = normalise(text).split(), ""
    for word in words:
        if key and len(key) + 1 + len(word) > KEY_CHARS:
            break
        key = f"{key} {word}" if key else word
    return key


def turn_sessions(sample):
    """
    Args:
        sample (dict): One LoCoMo conversation.

    Returns:
        list: `(datetime, [(speaker, text, dia_id), ...])` per session, in order; a shared
        picture is told as `bench/locomo.py` tells it (`[shares a photo: <caption>]`).
    """
    conversation = sample["conversation"]
    numbers = sorted(int(key.split("_")[1]) for key, value in conversation.items()
                     if key.startswith("session_") and isinstance(value, list))  # fmt: skip
    sessions = []
    for number in numbers:
        turns = []
        for turn in conversation[f"session_{number}"]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]"
            turns.append((turn["speaker"], text, turn["dia_id"]))
        moment = parse_session_date(conversation[f"session_{number}_date_time"])
        sessions.append((moment, turns))
    return sessions


class RecordingCycle:
    """The ReAct cycle, recording the ports and situation the awake tick hands it."""

    def __init__(self):
        self.calls = []

    def __call__(self, ports, situation, **kwargs):
        from ai_assistant.agent.react import run_react_cycle

        self.calls.append((ports, situation))
        return run_react_cycle(ports, situation, **kwargs)


class Game:
    """One conversation's assistant, its room and its two players, in the real shell."""

    def __init__(self, sample, index):
        from evennia.utils import create

        from ai_assistant.plumbing.ports import FixedClock
        from ai_assistant.typeclasses import AssistantCharacter
        from bench.game_player import BenchPlayer

        conversation = sample["conversation"]
        self.room = create.create_object("evennia.objects.objects.DefaultRoom",
                                         key=f"Parlour {index}")  # fmt: skip
        self.npc = create.create_object(AssistantCharacter, key="Ada", location=self.room,
                                        home=self.room)  # fmt: skip
        self.npc.assistant.script.unsubscribe()  # the bench drives the ticks
        self.players = {}
        for name in (conversation["speaker_a"], conversation["speaker_b"]):
            self.players[name] = create.create_object(BenchPlayer, key=name,
                                                      location=self.room, home=self.room)
        self.first_speaker = self.players[conversation["speaker_a"]]
        self.clock = FixedClock(datetime(2020, 1, 1, tzinfo=UTC))
        self.ports.clock = self.clock
        self.entry_dia = {}  # journal entry id -> dia_id

    @property
    def ports(self):
        return self.npc.assistant.ports()

    def journal_entries(self):
        from ai_assistant.memory.journal import Journal

        return Journal(self.ports).entries()

    def listen(self, moment, turns):
        """Each turn said to the assistant (`talk`), an awake tick after each."""
        from twisted.internet import reactor

        known = {entry["id"] for entry in self.journal_entries()}
        for number, (speaker, text, dia_id) in enumerate(turns):
            self.clock.current = moment + number * TURN_SPACING
            self.npc.assistant.hear(self.players[speaker], text, "talk")
            if self.ports.llm is None:
                settle(self.npc.assistant.run_tick("awake"))
            else:
                scheduled = set(reactor.getDelayedCalls())
                settle(self.npc.assistant.run_tick("awake"))
                fast_forward(reactor, scheduled)  # the next line comes 30 s later
            for entry in self.journal_entries():
                if entry["id"] not in known:
                    known.add(entry["id"])
                    self.entry_dia.setdefault(entry["id"], dia_id)

    def sleep(self):
        """
        A full sleep as `@assistant/sleep` then `@assistant/wake`: ticks until consolidation
        is complete and link generation has nothing left.

        Returns:
            dict: `{"ticks", "finished"}`.
        """
        from ai_assistant.sleep import modes

        assistant = self.npc.assistant
        modes.enter_sleep(self.ports, "bench: after the session", assistant.set_mode)
        ticks, finished = 0, False
        while ticks < SLEEP_TICKS_MAX and assistant.operating_mode == "sleep":
            ticks += 1
            self.clock.advance(minutes=1)
            report = settle(assistant.run_tick("sleep")) or {}
            if report.get("phase") == modes.DREAMING:
                links = (report.get("steps") or {}).get("memory_links") or {}
                if not links.get("remaining"):
                    finished = True
                    break
        if assistant.operating_mode == "sleep":
            modes.request_wake(self.ports, "bench: the next session", assistant.set_mode)
        assistant.script.unsubscribe()  # set_mode subscribed it: no real ticker may fire
        if assistant.operating_mode != "awake":
            raise RuntimeError("the assistant did not wake")
        return {"ticks": ticks, "finished": finished}

    def memories(self):
        """
        `{memory id: ([entry ids], text)}` of every memory in the assistant's mem0 store: the
        entries it was made from, by its metadata `entry_id` and its links' `journal_ids`.
        """
        from ai_assistant.memory.longterm.links import MemoryLinks
        from ai_assistant.memory.longterm.memories import Memories

        memories = Memories(self.ports)
        if not memories.available:
            return {}
        found = settle(memories.list(limit=1_000_000)) or []
        records = MemoryLinks(self.ports).records()
        made = {}
        for item in found:
            entries = entry_ids_of((item.get("metadata") or {}).get("entry_id"))
            entries += entry_ids_of((records.get(item["id"]) or {}).get("journal_ids"))
            made[item["id"]] = (list(dict.fromkeys(entries)), item.get("memory"))
        return made


def snapshot(ports):
    """Every state document as it is now (deep copies)."""
    from ai_assistant.plumbing import documents

    return {name: copy.deepcopy(ports.state.get(name, None)) for name in documents.REGISTRY}


def restore(ports, saved):
    """Put every state document back as `snapshot` found it."""
    for name, value in saved.items():
        ports.state.set(name, copy.deepcopy(value))


def request_text(request):
    """The normalised text of a request's messages (what a line must be found in)."""
    parts = []
    for message in request["messages"]:
        content = message.get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content or ""))
    return normalise("\n".join(parts))


def section_tokens(request):
    """
    `{heading: tokens}` of a request's sections: the text under each `## ` heading of every
    message (what comes before a message's first heading counts as its role's), and the tool
    specs.
    """
    from ai_assistant.plumbing.tokens import count_tokens

    sections = {}
    for message in request["messages"]:
        heading, lines = f"({message.get('role')})", []
        for line in str(message.get("content") or "").splitlines() + ["## (end)"]:
            if line.startswith("## "):
                if any(part.strip() for part in lines):
                    sections[heading] = (sections.get(heading, 0)
                                         + count_tokens("\n".join(lines)))  # fmt: skip
                heading, lines = line[3:].strip(), []
            else:
                lines.append(line)
    if request.get("tools"):
        sections["(tool specs)"] = count_tokens(json.dumps(request["tools"]))
    return sections


def hit_items(result):
    """
    What a tool returned, as `(items, loose)`: the first `TOP_K` dicts of every list of hits
    in its result, and its other text (a tool that answers in prose, not in a list).
    """
    items, loose = [], []
    for key, value in (result or {}).items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            items.extend(value[:TOP_K])
        elif isinstance(value, str) and key not in ("query", "mode", "note"):
            loose.append(value)
    return items, loose


def strings_of(value):
    """Every string inside a JSON-like value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_of(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings_of(item)


def entry_ids_of(value):
    """The journal entry ids a memory names: one id, or a list of them, or none."""
    if value is None:
        return []
    if isinstance(value, list | tuple | set | frozenset):
        return [item for item in value if item is not None]
    return [value]


class Evidence:
    """Where each turn of a conversation can be recognised: its text, its entry, its memories."""

    def __init__(self, sessions, entry_dia, memories, journal_ids):
        """
        Args:
            sessions (list): `turn_sessions`' sessions.
            entry_dia (dict): journal entry id -> dia_id.
            memories (dict): `{memory id: (entry id or ids, text)}`: the entries a memory was
                made from (metadata `entry_id`, links' `journal_ids`).
            journal_ids (list): Ids of the entries still in the journal.
        """
        turns = [(dia, text) for _, said in sessions for _, text, dia in said]
        self.keys = {dia: text_key(text) for dia, text in turns}
        self.texts = {dia: normalise(text) for dia, text in turns}
        self.entry_dia = entry_dia
        self.journal_dia = {entry_dia[i] for i in journal_ids if i in entry_dia}
        self.memory_dia, self.memory_keys, self.memory_texts = {}, {}, {}
        for memory_id, (entry_ids, text) in memories.items():
            dias = dict.fromkeys(entry_dia[i] for i in entry_ids_of(entry_ids) if i in entry_dia)
            for dia in dias:
                self.memory_dia.setdefault(memory_id, dia)
                self.memory_keys.setdefault(dia, []).append(text_key(text))
                self.memory_texts.setdefault(dia, []).append(normalise(text))

    def in_text(self, dia, text):
        """`"text"`, `"memory"` or None: how turn `dia` shows in normalised `text` (a prefix)."""
        key = self.keys.get(dia)
        if key and key in text:
            return "text"
        if any(key and key in text for key in self.memory_keys.get(dia, ())):
            return "memory"
        return None

    def in_text_strict(self, dia, text):
        """
        `"text"`, `"memory"` or None: turn `dia`'s whole normalised text in normalised `text`,
        or the whole text of a memory made from it.
        """
        whole = self.texts.get(dia)
        if whole and whole in text:
            return "text"
        if any(memory and memory in text for memory in self.memory_texts.get(dia, ())):
            return "memory"
        return None

    def where(self, dia):
        """Where a turn's memory was at question time: journal, mem0, nowhere or not a turn."""
        if dia not in self.keys:
            return "not_a_turn"
        if dia in self.journal_dia:
            return "journal"
        return "mem0" if dia in self.memory_keys else "nowhere"

    def never_stored(self, dias):
        """The turns among `dias` that are in neither the journal nor any memory."""
        return sorted({dia for dia in dias if self.where(dia) == "nowhere"})

    def in_tool_result(self, result):
        """The dia_ids a tool's result (its top `TOP_K`) holds, by id or by text."""
        items, loose = hit_items(result)
        found, texts = set(), list(loose)
        for item in items:
            strings = list(strings_of(item))
            for value in strings:
                found.update(d for d in (self.entry_dia.get(value), self.memory_dia.get(value))
                             if d is not None)  # fmt: skip
            texts.append(" ".join(strings))
        text = normalise("\n".join(texts))
        found.update(dia for dia in self.keys if self.in_text(dia, text))
        return found


def fast_forward(reactor, scheduled):
    """
    Make now every call the reactor was asked to make later since `scheduled` (the delayed
    calls then): the time between two questions passes at once. A player asks the next
    question after the answer to the last, so a pacing delay the turn started (a speaker's
    cooldown) is over by then.
    """
    for call in reactor.getDelayedCalls():
        if call not in scheduled and call.active():
            func, args, kw = call.func, call.args, call.kw  # cancel() forgets them
            call.cancel()
            func(*args, **kw)


def ask(game, question, capture, evidence, kept=None):
    """
    One question asked by the first speaker through the awake tick; the lookup tools run as
    the model would call them, with the ports the cycle was given. With `kept` (a list), the
    prompt's recall query and the request are appended to it (`--save-states`).

    Returns:
        dict: The question's figures.
    """
    from twisted.internet import reactor

    from ai_assistant.tools.registry import execute_tool

    cycle = RecordingCycle()
    capture.requests.clear()
    scheduled = set(reactor.getDelayedCalls())
    game.npc.assistant.hear(game.first_speaker, question["question"], "talk")
    settle(game.npc.assistant._awake_tick(game.ports, cycle))  # run_tick("awake")'s body
    fast_forward(reactor, scheduled)
    if not capture.requests or not cycle.calls:
        raise RuntimeError(f"no request was made for {question['question']!r}")
    request = capture.requests[0]
    if kept is not None:
        from ai_assistant.agent.blocks.remembered import recall_query

        kept["questions"].append({
            "question": question["question"], "category": CATEGORIES[question["category"]],
            "evidence": list(dict.fromkeys(str(dia) for dia in question["evidence"])),
            "query": recall_query(*cycle.calls[0]), "request": copy.deepcopy(request),
            # the lines the journal gained since the last sleep (the question's own): the
            # corpus the prompt's recall ranked held them too
            "journal_added": [copy.deepcopy(entry) for entry in game.journal_entries()
                              if entry["id"] not in kept["journal_ids"]]})  # fmt: skip
    text = request_text(request)
    wanted = list(dict.fromkeys(str(dia) for dia in question["evidence"]))
    shown = {dia: evidence.in_text(dia, text) for dia in wanted}
    strict = {dia: evidence.in_text_strict(dia, text) for dia in wanted}
    tool_found = set()
    for name in TOOLS:
        result = settle(execute_tool(name, cycle.calls[0][0], {"query": question["question"]}))
        tool_found |= evidence.in_tool_result(result)
    return {
        "question": question["question"],
        "category": CATEGORIES[question["category"]],
        "evidence": wanted,
        "evidence_in_prompt": sum(1 for dia in wanted if shown[dia]) / len(wanted),
        "evidence_in_prompt_strict": sum(1 for dia in wanted if strict[dia]) / len(wanted),
        "tools_at_10": sum(1 for dia in wanted if dia in tool_found) / len(wanted),
        "found_via": {dia: how for dia, how in shown.items() if how},
        "found_via_strict": {dia: how for dia, how in strict.items() if how},
        "tools_found": [dia for dia in wanted if dia in tool_found],
        "missed_where": {dia: evidence.where(dia) for dia in wanted if not shown[dia]},
        "tokens": request_tokens(request),
        "sections": section_tokens(request),
    }


def run_conversation(sample, number, limits, log):
    """
    Listen to every session (a sleep after each), then ask the questions.

    Args:
        number (int): The conversation's 1-based number in the data file.

    Returns:
        tuple: `(per-question figures, conversation summary)`.
    """
    timings = {"listen_seconds": 0.0, "sleep_seconds": 0.0, "question_seconds": 0.0}
    game = Game(sample, number)
    model = None
    if limits.consolidation == "llm":
        model = ParaphrasingModel(max_facts=game.ports.settings.get("memory.max_facts_per_entry"))
        game.ports.llm = model  # listening and sleep, as a game with a model configured
    sessions = turn_sessions(sample)[: limits.sessions or None]
    sleeps = []
    for moment, turns in sessions:
        started = time.perf_counter()
        game.listen(moment, turns)
        timings["listen_seconds"] += time.perf_counter() - started
        started = time.perf_counter()
        sleeps.append(game.sleep())
        timings["sleep_seconds"] += time.perf_counter() - started
    started = time.perf_counter()
    game.clock.current = sessions[-1][0] + timedelta(hours=1)
    saved = snapshot(game.ports)
    evidence = Evidence(sessions, game.entry_dia, game.memories(),
                        [entry["id"] for entry in game.journal_entries()])
    capture = CapturingLLM(reply_text="Let me think.")
    game.ports.llm = capture  # the questions' requests are recorded, whatever the path
    figures = []
    said = set(evidence.keys)
    # a slice of the sessions asks only the questions about what was said
    asked = [q for q in questions(sample) if set(map(str, q["evidence"])) <= said
             or not limits.sessions][: limits.questions or None]  # fmt: skip
    kept = None
    if getattr(limits, "save_states", None):
        kept = {"journal_ids": {entry["id"] for entry in game.journal_entries()},
                "questions": []}  # fmt: skip
    for question in asked:
        restore(game.ports, saved)
        figures.append({"conversation": sample.get("sample_id"), "number": number,
                        **ask(game, question, capture, evidence, kept)})
    if kept is not None:
        save_recall_state(limits.save_states, game, number, evidence, kept, saved)
    game.ports.llm = None
    timings["question_seconds"] = time.perf_counter() - started
    evidence_turns = {dia for figure in figures for dia in figure["evidence"]}
    summary = {
        "sample_id": sample.get("sample_id"), "number": number, "sessions": len(sessions),
        "turns": sum(len(turns) for _, turns in sessions), "questions": len(figures),
        "journal_entries_at_questions": len(evidence.journal_dia),
        "memories_at_questions": len(evidence.memory_dia),
        # turns said that are, at question time, in neither the journal nor any memory
        "turns_never_stored": len(evidence.never_stored(evidence.keys)),
        "never_stored": evidence.never_stored(evidence_turns),
        "sleeps_unfinished": sum(1 for s in sleeps if not s["finished"]),
        "sleep_ticks_mean": round(statistics.fmean(s["ticks"] for s in sleeps), 1),
        **shares(figures), **{k: round(v, 1) for k, v in timings.items()},
    }  # fmt: skip
    if model is not None:
        summary["model"] = {**model.report(), "sleeps": len(sleeps)}
        summary["model"]["sleep_calls_per_sleep"] = sleep_calls_per_sleep(summary["model"])
    log(f"{summary['sample_id']}: {summary['turns']} turns, {len(figures)} questions, "
        f"evidence in prompt {summary.get('evidence_in_prompt')} "
        f"(strict {summary.get('evidence_in_prompt_strict')}), "
        f"tools@10 {summary.get('tools_at_10')}")
    return figures, summary


def save_recall_state(folder, game, number, evidence, kept, saved):
    """
    Save what recall ranked at question time, for `bench.recall_replay`: the corpus as the
    pipeline builds it from the state after the last sleep (`saved`), the settings, the clock,
    the evidence's texts and each question's recall query and request.
    """
    from ai_assistant.memory.entities import get_profiles
    from ai_assistant.memory.journal import get_journal
    from ai_assistant.memory.nodes import load_nodes
    from ai_assistant.memory.recall.pipeline import _hidden, build_corpus, loaded_mirror
    from ai_assistant.memory.recall.tiers import tier_items

    ports = game.ports
    restore(ports, saved)
    mirror = settle(loaded_mirror(ports))
    others = tier_items(load_nodes(ports), get_profiles(ports))
    corpus = build_corpus(get_journal(ports)["entries"], mirror)
    save_state(folder, {"number": number, "now": ports.clock.now(),
                        "settings": ports.settings, "corpus": copy.deepcopy(corpus),
                        "others": copy.deepcopy(tuple(others)),
                        "hidden": _hidden(corpus + tuple(others)),
                        "evidence": {"texts": evidence.texts,
                                     "memory_texts": evidence.memory_texts},
                        "questions": kept["questions"]})  # fmt: skip


# what the model is asked while listening, not sleeping (one ReAct turn per line heard)
AWAKE_PURPOSES = ("conversation",)


def sleep_calls_per_sleep(model):
    """
    `{purpose: calls per sleep}` of a model report's sleep-time requests (every purpose but
    the awake turns'), with their `total`; None without sleeps.
    """
    sleeps = model.get("sleeps") or 0
    if not sleeps:
        return None
    asleep = {purpose: count for purpose, count in (model.get("calls") or {}).items()
              if purpose not in AWAKE_PURPOSES}  # fmt: skip
    per_sleep = {purpose: round(count / sleeps, 2) for purpose, count in sorted(asleep.items())}
    per_sleep["total"] = round(sum(asleep.values()) / sleeps, 2)
    return per_sleep


def shares(figures):
    """
    The shares of a set of questions: each of `SHARES` as a mean over questions (each its
    share of its evidence turns), and `evidence_in_prompt` lenient and strict pooled over
    evidence turns (found / all, so a question weighs by its number of evidence turns).
    """
    turns = sum(len(f["evidence"]) for f in figures)
    if not figures:
        return {**dict.fromkeys(SHARES), "evidence_turns": 0,
                "evidence_in_prompt_pooled": None, "evidence_in_prompt_strict_pooled": None}
    return {**{name: round(statistics.fmean(f[name] for f in figures), 4) for name in SHARES},
            "evidence_turns": turns,
            "evidence_in_prompt_pooled": round(
                sum(len(f["found_via"]) for f in figures) / turns, 4),
            "evidence_in_prompt_strict_pooled": round(
                sum(len(f["found_via_strict"]) for f in figures) / turns, 4)}  # fmt: skip


def by_category(figures):
    """`shares` per LoCoMo category present in `figures`."""
    found = {}
    for name in CATEGORIES.values():
        chosen = [f for f in figures if f["category"] == name]
        if chosen:
            found[name] = {"questions": len(chosen), **shares(chosen)}
    return found


def save_state(folder, state):
    """Write one conversation's saved state (`state["number"]` names the file)."""
    path = Path(folder) / STATE_FILE.format(number=state["number"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(state))
    return path


def load_states(folder):
    """The saved states of a folder, by conversation number."""
    paths = Path(folder).glob(STATE_FILE.format(number="*"))
    states = [pickle.loads(path.read_bytes()) for path in paths]
    if not states:
        raise ValueError(f"no saved states in {folder}")
    return sorted(states, key=lambda state: state["number"])


def summarise(figures, conversations, seconds, splits=()):
    """
    The results document from every question's figures; `splits` are `(first, last)` ranges
    of conversation numbers summarised apart.
    """
    misses, via = {}, {}
    for figure in figures:
        for where in figure["missed_where"].values():
            misses[where] = misses.get(where, 0) + 1
        for how in figure["found_via"].values():
            via[how] = via.get(how, 0) + 1
    missed = sum(misses.values()) or 1
    tokens = [f["tokens"] for f in figures] or [0]
    sections = {}
    for figure in figures:
        for name, count in figure["sections"].items():
            sections[name] = sections.get(name, 0) + count
    split_figures = {}
    for first, last in splits:
        chosen = [f for f in figures if first <= f["number"] <= last]
        split_figures[f"{first}-{last}"] = {
            "conversations": [c["sample_id"] for c in conversations
                              if first <= c["number"] <= last],
            "questions": len(chosen), "overall": shares(chosen),
            "per_category": by_category(chosen)}  # fmt: skip
    models = [c["model"] for c in conversations if c.get("model")]
    model = {}
    for report in models:
        for key, value in report.items():
            if key == "sleep_calls_per_sleep" or value is None:
                continue  # a ratio: worked out again from the sums below
            if isinstance(value, dict):
                into = model.setdefault(key, {})
                for name, count in value.items():
                    into[name] = into.get(name, 0) + count
            else:
                model[key] = model.get(key, 0) + value
    if model.get("sleeps"):
        model["sleep_calls_per_sleep"] = sleep_calls_per_sleep(model)
    return {
        "benchmark": "game_recall",
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "overall": shares(figures),
        "per_category": by_category(figures),
        "never_stored": sum(len(c["never_stored"]) for c in conversations),
        "turns_never_stored": sum(c["turns_never_stored"] for c in conversations),
        "splits": split_figures,
        **({"model": model} if models else {}),
        "request_tokens": {"mean": round(statistics.fmean(tokens), 1),
                           "p95": percentile(tokens, 0.95), "max": max(tokens)},
        "tokens_by_section_mean": {name: round(count / max(1, len(figures)), 1)
                                   for name, count in sorted(sections.items(),
                                                             key=lambda item: -item[1])},
        "missed_evidence": {"turns": dict(sorted(misses.items())),
                            "share": {k: round(v / missed, 3) for k, v in sorted(misses.items())}},
        "evidence_found_via": dict(sorted(via.items())),
        "questions": len(figures),
        "seconds": round(seconds, 1),
        "per_conversation": conversations,
        "per_question": [{key: figure[key] for key in PER_QUESTION} for figure in figures],
    }  # fmt: skip


def run(args, log=print):
    """Boot the shell, play every conversation, return the results document."""
    numbered, in_data = selected_conversations(args.data, args.conversations)
    started = time.perf_counter()
    figures, conversations = [], []
    with tempfile.TemporaryDirectory(prefix="ai_assistant_game_recall_") as folder:
        boot(folder, "sqlite")
        inline_threads()
        memory_cluster, in_postgres = None, None
        try:
            from django.conf import settings

            if args.store == "postgres":  # the game's setting, as a game's settings.py says it
                from bench.scale import memory_database_cluster

                memory_cluster = memory_database_cluster()
                memory = {"store": "postgres",
                          "postgres_url": memory_cluster.url("ai_assistant_memory")}
                from ai_assistant.plumbing.settings import deep_merge

                settings.AI_ASSISTANT = deep_merge(getattr(settings, "AI_ASSISTANT", None) or {},
                                                   {"memory": memory})

            for number, sample in numbered:
                # each assistant's semantic tier in a folder of its own (a local qdrant scans
                # every point of its folder: a shared one would slow each conversation by the
                # memories of the ones before it, whose assistants are gone)
                settings.GAME_DIR = str(Path(folder) / f"conversation_{number}")
                found, summary = run_conversation(sample, number, args, log)
                figures.extend(found)
                conversations.append(summary)
        finally:
            from ai_assistant.memory.longterm.mem0_store import close_all_stores

            close_all_stores()
            if memory_cluster is not None:
                from bench.scale import memories_stored

                in_postgres = memories_stored(memory_cluster.url("ai_assistant_memory"))
                memory_cluster.stop()
    document = summarise(figures, conversations, time.perf_counter() - started,
                         args.splits or ())  # fmt: skip
    if in_postgres is not None:
        document["memories_in_postgres"] = in_postgres
    document["what"] = {
        "data": str(args.data), "conversations": len(numbered),
        "conversations_in_data": in_data,
        "conversations_run": [{"number": number, "sample_id": sample.get("sample_id")}
                              for number, sample in numbered],  # fmt: skip
        "sessions_per_conversation": args.sessions or "all",
        "questions_per_conversation": args.questions or "all (categories 1-4)",
        "consolidation": args.consolidation,
        "settings": (f"the game's defaults (no overrides), mem0 with the {args.store} memory "
                     "store; "
                     + ("mechanical mode (no LLM)" if args.consolidation == "mechanical" else
                        "listening and sleep with bench/paraphrasing_model.py's scripted model")),
        "evidence_match": f"headline: normalised prefix of at most {KEY_CHARS} characters "
                          "of the turn or of a memory made from its journal entry; strict: "
                          "the whole normalised turn, or the whole text of such a memory",
        "tools": f"union of {', '.join(TOOLS)} at their top {TOP_K}",
    }  # fmt: skip
    return document


def combine(documents):
    """
    One results document from runs over different conversations of the same data file and
    path (e.g. `--conversations 1-3` and `4-5` run side by side): every figure is summarised
    again from the questions' own, the splits are the union of theirs.

    Raises:
        ValueError: The runs are of different data or paths, or share a conversation.
    """
    whats = [document["what"] for document in documents]
    for key in ("data", "consolidation", "sessions_per_conversation",
                "questions_per_conversation"):
        if len({json.dumps(what.get(key)) for what in whats}) > 1:
            raise ValueError(f"the runs differ in {key}: cannot combine them")
    numbers = [c["number"] for document in documents for c in document["per_conversation"]]
    if len(numbers) != len(set(numbers)):
        raise ValueError("the runs share a conversation: cannot combine them")
    ordered = sorted(documents, key=lambda d: d["per_conversation"][0]["number"])
    figures = [figure for document in ordered for figure in document["per_question"]]
    conversations = [c for document in ordered for c in document["per_conversation"]]
    splits = sorted({conversation_range(name) for document in ordered
                     for name in document.get("splits") or {}})  # fmt: skip
    combined = summarise(figures, conversations,
                         sum(document["seconds"] for document in ordered), splits)  # fmt: skip
    combined["what"] = {**whats[0],
                        "conversations": len(conversations),
                        "conversations_run": [run for document in ordered
                                              for run in document["what"]["conversations_run"]],
                        "combined_from": len(documents)}  # fmt: skip
    return combined


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--out", default=None,
                        help="where to write the results (default bench/results/"
                             "game_recall.json, or game_recall_llm.json with --consolidation llm)")
    parser.add_argument("--consolidation", choices=sorted(RESULTS), default="mechanical",
                        help="mechanical: no model while listening and sleeping (memories word "
                             "for word); llm: a scripted model that paraphrases each fact")
    parser.add_argument("--conversations", default=None,
                        help="the first N conversations, or a 1-based range A-B (e.g. 4-5)")
    parser.add_argument("--splits", default=None,
                        help="ranges of conversation numbers also summarised apart, e.g. "
                             "1-3,4-5 (a tuning split and a held-out one)")
    parser.add_argument("--sessions", type=int, default=None,
                        help="only the first N sessions of each (a smoke run; questions are "
                             "then those whose evidence was said)")
    parser.add_argument("--store", choices=("embedded", "postgres"), default="embedded",
                        help="where the long-term memories live (memory.store); postgres "
                             "starts a throwaway PostgreSQL with pgvector for them")
    parser.add_argument("--questions", type=int, default=None,
                        help="only the first N questions of each conversation")
    parser.add_argument("--save-states", default=None, metavar="DIR",
                        help="also save what recall ranked at each question, for "
                             "bench.recall_replay (one file per conversation in DIR)")
    parser.add_argument("--combine", nargs="+", default=None, metavar="RESULTS",
                        help="join results files of the same data and path run over different "
                             "conversations into one (written to --out, or to the latest "
                             "results when they cover the whole data file)")
    args = parser.parse_args(argv)
    if args.combine:
        try:
            document = combine([json.loads(Path(path).read_text()) for path in args.combine])
        except (OSError, ValueError, KeyError) as error:
            parser.error(f"--combine: {error}")
        return write_results(args, document)
    try:
        if args.conversations is not None:
            args.conversations = conversation_range(args.conversations)
        if args.splits is not None:
            args.splits = [conversation_range(part) if "-" in part else
                           (int(part), int(part)) for part in args.splits.split(",")]
    except ValueError as error:
        parser.error(f"--conversations/--splits: {error}")
    for name in ("sessions", "questions"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if not Path(args.data).is_file():
        parser.error(f"no data file at {args.data}")
    document = run(args, log=lambda line: print(line, file=sys.stderr, flush=True))
    return write_results(args, document)


def write_results(args, document):
    """Write `document` to --out and, unless it is a slice, to the latest results."""
    text = json.dumps(document, indent=2) + "\n"
    # a slice (--sessions, --questions, a range of the conversations) leaves the latest
    # results alone: they are the whole data file's (`--combine` joins ranges run apart)
    sliced = (args.sessions is not None or args.questions is not None
              or document["what"]["conversations"] != document["what"]["conversations_in_data"]
              or getattr(args, "store", "embedded") != "embedded")  # the default store's
    latest = RESULTS[document["what"].get("consolidation", args.consolidation)]
    for path in {Path(args.out or latest)} | (set() if sliced else {latest}):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(json.dumps({k: v for k, v in document.items()
                      if k not in ("per_conversation", "per_question")}, indent=2))
    return document


if __name__ == "__main__":
    main()
