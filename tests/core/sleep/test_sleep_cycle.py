"""
Whole sleep cycles, end to end (issue 6's acceptance test).

Each test drives the real code: awake ticks with the real ReAct loop, then `enter_sleep` and
repeated `cycle.run_sleep_tick`, with the real `openai` client (`LLMClient`, synchronous runner)
talking to the scripted server, the real embedded mem0 store in a temporary folder, and
`MemoryState` + `FixedClock` ports - the core level, no Evennia database.

One `Responder` answers every prompt the cycle sends, recognising each kind by its content:
conversation and pre-compaction ReAct turns (by the tools offered), importance scoring with
per-entry facts, consolidation's batched fact extraction, reflection questions and insights,
entity consolidation and the compaction summary. (The memory patrol has nothing to do here, no
scene notes; mem0 makes no LLM call, consolidation stores with infer=False.) A prompt it does
not recognise is recorded, and every test asserts there was none, so a new LLM step in the
cycle cannot go unnoticed here.
"""

import collections
import copy
import json
import re
from datetime import timedelta

import pytest
import support
from scripted_llm import FakeWorld, Reply, sync_runner
from twisted.internet import task
from twisted.python.failure import Failure

from ai_assistant.agent import awake, perception
from ai_assistant.agent.react import run_react_cycle
from ai_assistant.memory import entities, journal
from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.mem0_store import make_semantic_store
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.memory.reflection_state import ReflectionState
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.ports import MemoryState, iso, parse_iso
from ai_assistant.plumbing.settings import DEFAULTS, Settings, deep_merge
from ai_assistant.sleep import (
    compaction,
    consolidation,
    cycle,
    entity_consolidation,
    facts,
    modes,
    reflection,
    scoring,
)

KEY = "ada"
NAME = "Ada"
PLAYERS = {"Alice": "#3", "Bob": "#2", "Carol": "#4"}

# What each player tells Ada, with the facts an LLM would extract from it. Every line has its
# own facts (so every consolidated entry leaves memories behind); the two tea facts are near
# duplicates, so dreaming must link them.
LINES = {
    "Ada, I prefer tea over coffee, always have.": ["Alice prefers tea over coffee."],
    "Ada, the mill by the river needs a new millstone.": [
        "The mill by the river needs a new millstone."],
    "Ada, the wizard Merrin is selling healing potions.": [
        "The wizard Merrin sells healing potions."],
    "Ada, my brother Tom is the blacksmith in Eastwick.": [
        "Alice's brother Tom is the blacksmith in Eastwick."],
    "Ada, I will guard the east gate tonight.": ["Bob guards the east gate at night."],
    "Ada, I heard wolves howling near the old quarry.": [
        "Wolves were heard howling near the old quarry."],
    "Ada, I am looking for the lost map of the old quarry.": [
        "Alice is searching for the lost map of the old quarry."],
    "Ada, in the mornings I drink tea and never coffee.": [
        "Alice drinks tea and never coffee in the mornings."],
    "Ada, the northern bridge collapsed in last night's storm!": [
        "The northern bridge collapsed in a storm."],
}
TEA_FACTS = ("Alice prefers tea over coffee.", "Alice drinks tea and never coffee in the mornings.")
# The awake ticks: who says what in each (Alice speaks five times: her profile is consolidated).
CONVERSATION = [
    [("Alice", 0), ("Bob", 1), ("Carol", 2)],
    [("Alice", 3), ("Bob", 4), ("Carol", 5)],
    [("Alice", 6)],
    [("Alice", 7)],
    [("Alice", 8)],
]
REPLY = "Thank you, {name}. I will keep that in mind and tell the others who ask me about it."
LLM_SCORE = 8
PLAYER_CAP = 7  # provenance.PLAYER_IMPORTANCE_SHARE of 10: what a player's line may score
ALICE_ATTRIBUTES = {"preference": "Prefers tea over coffee",
                    "goal": "Searching for the lost map of the old quarry"}
SUMMARY = ("Alice, Bob and Carol told Ada about Alice's taste for tea, the mill's millstone, "
           "Merrin's potions, the east gate watch, wolves at the quarry and the fallen bridge.")
INSIGHTS = [
    {"insight": "Alice holds a steady preference for tea over coffee.", "evidence": [1, 2]},
    {"insight": "Travel near the old quarry and the north has become dangerous.",
     "evidence": [1]},
]
EXTRACTED = "Bob promised to keep watch over the east gate tonight."
OLD_NOTES = ["Swept the tavern floor.", "A cart rolled past the window.", "It drizzled."]

# an entry in the scoring and fact extraction prompts: "[12]" or "[12] (score only)", then the
# entry quoted as data
ENTRY_LINE = re.compile(r"^\[([^\]\s]+)\](?: \(score only\))?\n<<<BEGIN [^>\n]+>>>\n(.*?)\n<<<END ",
                        re.MULTILINE | re.DOTALL)


def facts_in(text):
    """The facts of every known line quoted in `text`."""
    return [fact for line, facts in LINES.items() if line in text for fact in facts]


class Responder:
    """
    Answers every prompt of the cycle by what it asks for; `kinds` counts them, `unrecognised`
    keeps the ones it could not place.
    """

    def __init__(self):
        self.kinds = collections.Counter()
        self.unrecognised = []

    def __call__(self, request):
        messages = request.get("messages") or []
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        user = next((m.get("content") or "" for m in reversed(messages)
                     if m.get("role") == "user"), "")
        tools = {tool["function"]["name"] for tool in request.get("tools") or ()}
        if tools:
            return self._react(messages, tools)
        if system == reflection.QUESTIONS_SYSTEM_PROMPT:
            self.kinds["reflection_questions"] += 1
            return Reply.text(json.dumps({"questions": [
                "What do the people of the town prefer?", "What dangers threaten travellers?"]}))
        if system == reflection.INSIGHTS_SYSTEM_PROMPT:
            self.kinds["reflection_insights"] += 1
            return Reply.text(json.dumps({"insights": INSIGHTS}))
        if system == entity_consolidation.CONSOLIDATION_SYSTEM:
            self.kinds["entity_consolidation"] += 1
            attributes = ALICE_ATTRIBUTES if "Character: Alice" in user else {}
            return Reply.text(json.dumps({"attributes": attributes}))
        if system == compaction.SUMMARY_SYSTEM:
            self.kinds["compaction_summary"] += 1
            return Reply.text(SUMMARY)
        if system == facts.EXTRACTION_SYSTEM_PROMPT:
            # consolidation's batched extraction, for entries the scoring call gave no facts
            self.kinds["fact_extraction"] += 1
            return Reply.text(json.dumps({"entries": self._entry_items(user, score=False)}))
        if system == scoring.SCORING_SYSTEM_PROMPT:
            self.kinds["scoring"] += 1
            return Reply.text(json.dumps({"scores": self._entry_items(user, score=True)}))
        self.unrecognised.append(request)
        return Reply.text("I do not understand.")

    @staticmethod
    def _entry_items(prompt, score):
        """One item per `[id] content` line of the prompt: its facts, and a score if asked."""
        items = []
        for entry_id, content in ENTRY_LINE.findall(prompt):
            item = {"id": int(entry_id) if entry_id.isdigit() else entry_id,
                    "facts": facts_in(content)}
            if score:
                item["score"] = LLM_SCORE
            items.append(item)
        return items

    def _react(self, messages, tools):
        if tools <= set(compaction.EXTRACTION_TOOLS):
            # the pre-compaction pass: journal one fact, then say it is done
            self.kinds["pre_compaction"] += 1
            if any(message.get("role") == "tool" for message in messages):
                return Reply.tool("noop", {})
            return Reply.tool("add_journal_entry", {
                "content": EXTRACTED, "source_entity": "Bob", "source_type": "direct"})
        if "say" in tools:
            self.kinds["conversation"] += 1
            prompt = json.dumps(messages)
            name = next((player for player in PLAYERS
                         if f"You are talking with {player}." in prompt), "friend")
            return Reply.tool("say", {"message": REPLY.format(name=name)})
        self.unrecognised.append({"tools": sorted(tools)})
        return Reply.tool("noop", {})


class Transitions:
    """The shell's `transition(target, reason)`: records the call and switches the mode."""

    def __init__(self, state):
        self.state = state
        self.calls = []

    def __call__(self, target, reason):
        self.calls.append((target, reason))
        self.state.set("operating_mode", target)


class FailingStore:
    """
    A real store whose `add` number `fail_on` (1-based) stores, then reports a failure - the
    worst case: the memory exists but consolidation never heard of it.
    """

    def __init__(self, store, fail_on):
        self.store = store
        self.fail_on = fail_on
        self.adds = 0

    def add(self, text, *, metadata=None, infer=False):
        self.adds += 1
        deferred = self.store.add(text, metadata=metadata, infer=infer)
        if self.adds == self.fail_on:
            deferred.addCallback(lambda _: Failure(ConnectionError("store connection lost")))
        return deferred

    def __getattr__(self, name):
        return getattr(self.store, name)


def result_of(deferred):
    results = []
    deferred.addBoth(results.append)
    assert results, "the Deferred did not fire synchronously"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


@pytest.fixture
def responder(llm_server):
    llm_server.responder = Responder()
    yield llm_server.responder
    assert llm_server.responder.unrecognised == [], "the cycle sent a prompt nobody expected"


@pytest.fixture
def make_ports(tmp_path, llm_config):
    """
    `make_ports(overrides, state=None, mechanical=False, wrap=None)`: ports over the data
    folder of this test; stores are closed at the end (and may be closed earlier: reload).
    """
    opened = []

    def _make(overrides=None, state=None, mechanical=False, wrap=None, clock=None):
        partial = {} if mechanical else {"llm": llm_config}
        settings = Settings(deep_merge(DEFAULTS, partial), overrides)  # the store needs them first
        state = state if state is not None else MemoryState()
        logs = support.Log()
        store = make_semantic_store(settings, str(tmp_path / "data"), KEY, runner=sync_runner)
        opened.append(store)
        llm = None
        if not mechanical:
            llm = LLMClient(deep_merge(DEFAULTS, partial)["llm"], npc_key=KEY, npc_name=NAME,
                            state=state,
                            log=logs, runner=sync_runner, clock=task.Clock())
        ports = support.make_ports(
            partial, overrides=overrides, key=KEY, name=NAME, state=state, clock=clock,
            llm=llm, semantic=wrap(store) if wrap else store,
            world=FakeWorld([{"id": i, "name": n, "is_player": True}
                             for n, i in PLAYERS.items()]),
            log=logs,
        )  # fmt: skip
        ports.logs, ports.store = logs, store
        return ports

    yield _make
    for store in opened:
        store.close()


def heard(ports, sender, text, kind="say"):
    """An event as perception would queue it."""
    classification = perception.classify(kind, text, names=[NAME])
    return perception.make_event(kind=kind, text=text, sender=sender, sender_id=PLAYERS[sender],
                                 classification=classification, time=iso(ports.clock.now()))


def converse(ports, run_cycle=run_react_cycle):
    """Run the awake ticks of CONVERSATION, a minute apart."""
    lines = list(LINES)
    for turn in CONVERSATION:
        for sender, number in turn:
            PerceptionQueue(ports).add(heard(ports, sender, lines[number]))
        report = result_of(awake.run_awake_tick(ports, run_cycle=run_cycle))
        assert report["events"] == len(turn)
        ports.clock.advance(minutes=1)


def add_old_notes(ports):
    """Trivial notes written 40 days ago; returns their ids."""
    now = ports.clock.now()
    ports.clock.current = now - timedelta(days=40)
    ids = [Journal(ports).add(note, importance=2)["id"] for note in OLD_NOTES]
    ports.clock.current = now
    return ids


def memories_by_entry(ports):
    """`{entry_id: [memories]}` for every memory in the store."""
    grouped = collections.defaultdict(list)
    for memory in result_of(ports.store.list(limit=500)):
        grouped[memory["metadata"].get("entry_id")].append(memory)
    return grouped


def tick(ports, transition):
    ports.clock.advance(minutes=1)
    return result_of(cycle.run_sleep_tick(ports, transition, run_cycle=run_react_cycle))


def tick_until_dreaming(ports, transition, max_ticks=10):
    reports = []
    while ports.state.get("sleep_phase") == modes.COMPACTING:
        assert len(reports) < max_ticks, f"compacting never completed: {reports[-1]}"
        reports.append(tick(ports, transition))
    return reports


# ----------------------------------------------------------------------------------------------
# 1. awake -> sleep -> compacting -> dreaming -> scheduled wake


FULL_CYCLE = {
    "llm.context_limit": 500,
    # this test compacts in sleep (70%), not as an awake emergency
    "compaction.emergency_threshold": 10.0,
    "reflection.threshold": 60,
    "sleep.enabled": True,
    "sleep.sleep_start_hour": 12,  # the FixedClock starts at 12:00
    "sleep.sleep_duration_hours": 2,
}


def test_full_cycle_from_conversation_to_scheduled_wake(make_ports, responder, llm_server):
    ports = make_ports(FULL_CYCLE)
    transition = Transitions(ports.state)
    old_ids = add_old_notes(ports)
    converse(ports)

    # --- awake: what the conversation left behind
    assert responder.kinds["conversation"] == 9
    assert ports.world.said.count(REPLY.format(name="Alice")) == 5
    entries = Journal(ports).entries()
    heard_entries = [e for e in entries if "heard" in e["tags"]]
    assert len(heard_entries) == 9
    assert all(e["importance_method"] == "heuristic" for e in heard_entries)
    alice = entities.get_profiles(ports)["#3"]
    assert len(alice["observations"]) == 5 and alice["attributes"] == {}
    assert ReflectionState(ports).due()
    assert Conversation(ports).usage() >= 0.70
    assert ports.state.get("operating_mode", "awake") == "awake"

    # --- compacting
    assert modes.enter_sleep(ports, "tired", transition) is True
    compacting = tick_until_dreaming(ports, transition)
    assert all(report["phase"] == "compacting" and report["woke"] is None
               for report in compacting)
    scoring = compacting[0]["steps"]["importance_scoring"]
    assert sorted(scoring["scored"]) == sorted(e["id"] for e in heard_entries)
    entries = {e["id"]: e for e in Journal(ports).entries()}
    for entry in heard_entries:
        assert entries[entry["id"]]["importance_method"] == "llm"
        # a player's line: the LLM's 8 is capped like a player's own importance argument
        assert entries[entry["id"]]["importance"] == PLAYER_CAP
        assert entries[entry["id"]]["importance_capped_from"] == LLM_SCORE
        assert entries[entry["id"]]["facts"] == facts_in(entry["content"])
    assert responder.kinds["scoring"] == 1  # one batched call scored all nine
    # every heard entry went to mem0 exactly once, with the seed's metadata; old notes did not
    consolidated = journal.get_journal(ports)["consolidated_entry_ids"]
    assert sorted(consolidated) == sorted(e["id"] for e in heard_entries)
    stored = memories_by_entry(ports)
    for entry in heard_entries:
        memories = stored[entry["id"]]
        assert sorted(m["memory"] for m in memories) == sorted(facts_in(entry["content"]))
        assert all(m["metadata"]["source_trust"] == 0.9 for m in memories)
        assert all(m["metadata"]["importance_method"] == "llm" for m in memories)
        assert MemoryLinks(ports).memory_ids_for_entry(entry["id"]) == [
            m["id"] for m in memories]
    assert not set(old_ids) & set(stored)
    assert ports.state.get("sleep_phase") == modes.DREAMING

    # --- dreaming: every tick until nothing is left to link
    dreams = [tick(ports, transition)]
    while dreams[-1]["steps"]["memory_links"]["remaining"]:
        assert len(dreams) < 6, "link generation never finished"
        dreams.append(tick(ports, transition))
    first = dreams[0]["steps"]
    assert all(report["phase"] == "dreaming" and report["woke"] is None for report in dreams)

    links = MemoryLinks(ports).records()
    by_text = {m["memory"]: m["id"] for group in stored.values() for m in group}
    tea, mornings = (by_text[fact] for fact in TEA_FACTS)
    assert mornings in [link["id"] for link in links[tea]["linked_to"]]
    assert tea in [link["id"] for link in links[mornings]["linked_to"]]

    alice = entities.get_profiles(ports)["#3"]
    assert first["entity_consolidation"]["consolidated"] == ["#3"]
    assert alice["attributes"] == ALICE_ATTRIBUTES
    assert alice["observations"] == []

    assert first["reflection"]["ran"] is True
    synthesis = Journal(ports).entry(first["reflection"]["entry_id"])
    assert synthesis["content"].startswith("[SYNTHESIS] " + INSIGHTS[0]["insight"])
    assert synthesis["evidence"] and all(str(i).startswith("mem:") for i in synthesis["evidence"])
    # the window starts again; only what was journaled after the reflection counts
    extracted = [e for e in Journal(ports).entries() if e["content"] == EXTRACTED]
    assert len(extracted) == 1  # the pre-compaction pass, later in the same tick
    state = ReflectionState(ports).current()
    assert state["reflection_count"] == 1
    assert state["entries_since_reflection"] == [extracted[0]["id"]]
    assert state["cumulative_importance"] == extracted[0]["importance"]
    assert not ReflectionState(ports).due()

    assert sorted(first["episodic_pruning"]["pruned"]) == sorted(old_ids)
    assert all(Journal(ports).entry(i) is None for i in old_ids)

    assert first["pre_compaction"]["ran"] is True
    assert first["pre_compaction"]["tools"] == ["add_journal_entry", "noop"]
    assert first["context_compaction"]["compacted"] is True
    history = Conversation(ports).history()
    assert history[0]["summary"] and history[0]["content"].endswith(SUMMARY)
    assert Conversation(ports).usage() < 0.70
    summary_entry = Journal(ports).entry(first["context_compaction"]["entry_id"])
    assert summary_entry["content"] == f"{compaction.SYNTHESIS_LABEL} {SUMMARY}"
    assert first["patrol"] == {"skipped": "nothing to patrol"}
    assert "error" not in json.dumps(first)  # no step failed
    assert responder.kinds["reflection_questions"] == responder.kinds["reflection_insights"] == 1
    assert responder.kinds["compaction_summary"] == 1

    # --- the schedule: still inside the window, then past it
    assert ports.state.get("operating_mode") == "sleep"
    ports.clock.current = ports.clock.now().replace(hour=14, minute=30)
    woke = tick(ports, transition)
    assert woke["woke"] == "scheduled wake time reached"
    assert transition.calls == [("sleep", "tired"), ("awake", "scheduled wake time reached")]
    assert ports.state.get("operating_mode") == "awake"
    assert ports.state.get("sleep_phase") is None
    cooldown = ports.state.get("awake_state")
    assert cooldown["awake_ticks"] == 0
    assert parse_iso(cooldown["auto_sleep_blocked_until"]) == ports.clock.now() + timedelta(
        minutes=DEFAULTS["sleep"]["wake_cooldown_minutes"])
    assert ports.state.get("last_sleep_tick") == woke


# ----------------------------------------------------------------------------------------------
# 2. an urgent message wakes a light sleeper, but not in the middle of compacting


def talk(ports, sender, text):
    PerceptionQueue(ports).add(heard(ports, sender, text, kind="talk"))


def test_urgent_message_wakes_from_dreaming(make_ports, responder):
    ports = make_ports()
    transition = Transitions(ports.state)
    modes.enter_sleep(ports, "night", transition)
    tick_until_dreaming(ports, transition)  # nothing to consolidate: one tick
    assert tick(ports, transition)["woke"] is None

    talk(ports, "Bob", "Ada, wake up, the mill is on fire!")
    report = tick(ports, transition)
    assert report["woke"] == "urgent event from Bob"
    assert transition.calls[-1] == ("awake", "urgent event from Bob")
    assert ports.state.get("operating_mode") == "awake"
    # the message itself waits for the first awake tick
    assert [e["text"] for e in ports.state.get(documents.PENDING_EVENTS)] == [
        "Ada, wake up, the mill is on fire!"]


def test_urgent_message_while_compacting_waits_for_consolidation(make_ports, responder):
    ports = make_ports({"memory.consolidation_per_tick": 5})
    transition = Transitions(ports.state)
    for line in LINES:  # importance given by hand: consolidation extracts the facts itself
        Journal(ports).add(f'Alice said to me: "{line}"', importance=6)
    modes.enter_sleep(ports, "night", transition)
    talk(ports, "Carol", "Ada, are you there?")

    first = tick(ports, transition)
    assert first["phase"] == "compacting" and first["woke"] is None
    assert first["wake_deferred"] == "urgent event from Carol"
    assert len(first["steps"]["consolidation"]["consolidated"]) == 5
    assert ports.state.get("operating_mode") == "sleep"

    second = tick(ports, transition)
    assert second["steps"]["consolidation"]["completed"] is True
    assert second["woke"] == "urgent event from Carol" and "wake_deferred" not in second
    assert ports.state.get("operating_mode") == "awake"
    assert len(journal.get_journal(ports)["consolidated_entry_ids"]) == len(LINES)
    assert responder.kinds["fact_extraction"] == 2 and responder.kinds["scoring"] == 0
    assert sorted(m["memory"] for m in result_of(ports.store.list(limit=50))) == sorted(
        fact for facts in LINES.values() for fact in facts)


# ----------------------------------------------------------------------------------------------
# 3. a reload in the middle of compacting stores nothing twice


def test_reload_in_the_middle_of_compacting(make_ports, responder):
    overrides = {"memory.consolidation_per_tick": 4}
    ports = make_ports(overrides, wrap=lambda store: FailingStore(store, fail_on=3))
    transition = Transitions(ports.state)
    for line in LINES:
        Journal(ports).add(f'Bob said to me: "{line}"', source_type="direct")
    Journal(ports).add("Nothing happened.", importance=1)  # below memory.min_importance
    eligible = [e["id"] for e in consolidation.pending_entries(ports)]
    assert len(eligible) == len(LINES)
    modes.enter_sleep(ports, "night", transition)

    report = tick(ports, transition)
    step = report["steps"]["consolidation"]
    assert step["success"] is False and "store connection lost" in step["error"]
    assert step["consolidated"] == eligible[:2]
    assert ports.state.get("sleep_phase") == modes.COMPACTING
    # the third entry's memory is in the store, but the journal does not know it
    assert eligible[2] in memories_by_entry(ports)
    assert eligible[2] not in journal.get_journal(ports)["consolidated_entry_ids"]

    # reload: the persisted state, a new store over the same folder, a new LLM client
    persisted = copy.deepcopy(ports.state.data)
    clock = ports.clock
    ports.store.close()
    ports = make_ports(overrides, state=MemoryState(persisted), clock=clock)
    transition = Transitions(ports.state)
    reports = tick_until_dreaming(ports, transition)
    assert sum(r["steps"]["consolidation"]["reused"] for r in reports) == 1

    consolidated = journal.get_journal(ports)["consolidated_entry_ids"]
    assert sorted(consolidated) == sorted(eligible)  # each once, none missing
    stored = memories_by_entry(ports)
    assert set(stored) == set(eligible)
    for entry_id in eligible:
        assert len(stored[entry_id]) == 1, f"entry {entry_id} stored {len(stored[entry_id])}x"
        assert MemoryLinks(ports).memory_ids_for_entry(entry_id) == [stored[entry_id][0]["id"]]
    assert ports.state.get("memory_consolidation")["in_flight"] == {}


# ----------------------------------------------------------------------------------------------
# 4. mechanical mode: no LLM, the cycle still runs


MECHANICAL_SKIPS = ("importance scoring skipped", "entity consolidation skipped",
                    "reflection skipped", "pre-compaction extraction skipped")


def test_mechanical_mode_full_cycle(make_ports, llm_server):
    ports = make_ports({"llm.context_limit": 220, "compaction.emergency_threshold": 10.0,
                        "compaction.preserve_messages": 4, "reflection.threshold": 40},
                       mechanical=True)  # fmt: skip
    assert ports.mechanical
    transition = Transitions(ports.state)
    old_ids = add_old_notes(ports)
    converse(ports, run_cycle=None)
    assert all("mechanical mode" in text for text in ports.world.emotes)
    heard_ids = [e["id"] for e in Journal(ports).entries() if "heard" in e["tags"]]
    assert len(heard_ids) == 9
    assert Conversation(ports).usage() >= 0.70  # a compaction is due...
    history_before = copy.deepcopy(Conversation(ports).history())

    modes.enter_sleep(ports, "night", transition)
    compacting = tick_until_dreaming(ports, transition)
    assert len(compacting) == 2  # 9 entries, 5 per tick
    stored = memories_by_entry(ports)
    assert set(stored) == set(heard_ids)
    for entry_id in heard_ids:
        entry = Journal(ports).entry(entry_id)
        # without an LLM the text is stored as it is, with its heuristic score
        assert [m["memory"] for m in stored[entry_id]] == [entry["content"]]
        assert stored[entry_id][0]["metadata"]["importance_method"] == "heuristic"

    assert compacting[0]["steps"]["importance_scoring"]["mechanical"] is True
    dreaming = tick(ports, transition)["steps"]
    assert dreaming["pre_compaction"] == {"ran": False, "reason": "mechanical mode"}
    trimmed = dreaming["context_compaction"]
    # no LLM to summarise: the history is trimmed all the same; what was heard is journaled
    assert trimmed["compacted"] is True and trimmed["mechanical"] is True
    assert trimmed["archived"] == 0 and trimmed["entry_ids"] == []
    assert dreaming["entity_consolidation"] == {"skipped": "mechanical mode", "pending": 1}
    assert dreaming["reflection"]["ran"] is False
    assert dreaming["reflection"]["reason"] == "mechanical mode"
    assert sorted(dreaming["episodic_pruning"]["pruned"]) == sorted(old_ids)
    assert dreaming["memory_links"]["processed"]  # linking needs no LLM
    history = Conversation(ports).history()
    preserve = ports.settings.get("compaction.preserve_messages")
    assert history[1:] == history_before[-preserve:]
    assert history[0]["summary"] and "in the journal" in history[0]["content"]
    assert trimmed["messages"] == len(history_before) - preserve
    assert Conversation(ports).usage() < 0.70
    assert sum("trimmed" in line for line in ports.logs) == 1
    assert ports.state.get("operating_mode") == "sleep"

    # one line per skipped step and tick: two compacting ticks, one dreaming tick
    expected = {skip: 2 if skip.startswith("importance") else 1 for skip in MECHANICAL_SKIPS}
    assert {skip: sum(skip in line for line in ports.logs) for skip in MECHANICAL_SKIPS} == (
        expected)
    assert all("mechanical mode" in line for line in ports.logs if "skipped" in line)
    assert llm_server.requests == []  # not one call
    assert modes.request_wake(ports, "admin", transition) == "awake"


# ----------------------------------------------------------------------------------------------
# 5. a model whose replies never parse: the sleep still ends, nothing is lost


THINGS = ("a wolf howled", "the bell rang", "a ship sank", "the mill burned")
PLACES = ("harbour", "old quarry", "east gate", "river", "chapel", "market", "forge", "tower")
GARBAGE = "I'm sorry, as a language model I find these events deeply moving. Shall I go on?"


def test_unparsable_replies_through_a_whole_sleep(make_ports, llm_server):
    """Scoring and extraction give up per entry; the entries are stored verbatim, marked."""
    llm_server.responder = lambda request: Reply.text(GARBAGE)
    ports = make_ports({"memory.consolidation_per_tick": 5})
    transition = Transitions(ports.state)
    # more entries than one scoring batch holds (journal.scoring_batch_size, 25)
    ids = [Journal(ports).add(f'Bob said to me: "Ada, {thing} by the {place}!"',
                             source_type="direct")["id"]
           for thing in THINGS for place in PLACES]
    modes.enter_sleep(ports, "night", transition)
    reports = tick_until_dreaming(ports, transition, max_ticks=40)

    entries = {entry["id"]: entry for entry in Journal(ports).entries()}
    assert sorted(journal.get_journal(ports)["consolidated_entry_ids"]) == sorted(ids)
    stored = memories_by_entry(ports)
    for entry_id in ids:
        # nothing lost: the text itself, once, and the entry says so
        assert [m["memory"] for m in stored[entry_id]] == [entries[entry_id]["content"]]
        assert entries[entry_id]["consolidated_verbatim"] is True
        assert stored[entry_id][0]["metadata"]["verbatim"] is True
    scoring_limit = ports.settings.get("journal.scoring_max_attempts")
    extraction_limit = ports.settings.get("memory.extraction_max_attempts")
    # each entry was asked about a bounded number of times
    asked = collections.Counter()
    for request in llm_server.requests:
        user = request["messages"][-1]["content"]
        asked.update(int(i) for i, _ in ENTRY_LINE.findall(user))
    assert max(asked.values()) <= scoring_limit + extraction_limit
    assert len(reports) <= 40
    # once dreaming, scoring asks no more about entries it gave up on
    before = len(llm_server.requests)
    tick(ports, transition)
    assert not any(ENTRY_LINE.findall(r["messages"][-1]["content"])
                   for r in llm_server.requests[before:])


class WakingStore:
    """A real store; its `add` number `wake_on` stores, then an admin forces a wake."""

    def __init__(self, store, wake_on, wake):
        self.store, self.wake_on, self.wake, self.adds = store, wake_on, wake, 0

    def add(self, text, *, metadata=None, infer=False):
        self.adds += 1
        deferred = self.store.add(text, metadata=metadata, infer=infer)
        if self.adds == self.wake_on:
            deferred.addCallback(lambda stored: (self.wake(), stored)[1])
        return deferred

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_forced_wake_mid_compacting_resumes_on_the_next_sleep_storing_nothing_twice(
        make_ports, responder):
    holder = {}
    ports = make_ports({"memory.consolidation_per_tick": 5},
                       wrap=lambda store: WakingStore(store, 2, lambda: holder["wake"]()))
    transition = Transitions(ports.state)
    holder["wake"] = lambda: modes.force_wake(ports, "admin", transition)
    for line in LINES:  # scored by hand: consolidation extracts the facts itself
        Journal(ports).add(f'Alice said to me: "{line}"', importance=6)
    modes.enter_sleep(ports, "night", transition)

    report = tick(ports, transition)
    step = report["steps"]["consolidation"]
    # woken after the second entry's memory was stored: the batch stops there
    assert step["interrupted"] == "woken" and len(step["consolidated"]) == 2
    assert ports.state.get("operating_mode") == "awake"
    assert ports.state.get("sleep_phase") is None

    modes.enter_sleep(ports, "night again", transition)
    tick_until_dreaming(ports, transition)
    consolidated = journal.get_journal(ports)["consolidated_entry_ids"]
    assert len(consolidated) == len(LINES) == len(set(consolidated))
    stored = memories_by_entry(ports)
    assert sorted(stored) == sorted(consolidated)
    assert all(len(memories) == 1 for memories in stored.values())  # none stored twice
