"""
The awake tick: turn what the assistant perceived into conversation and action.

Each awake tick drains the perception queue, hands every event to the perception listeners
(`PERCEPTION_LISTENERS`: the journal of what was heard, the entity profiles), records each line
of speech once in the conversation (`memory.conversation`: the speaker's working memory and the
shared history), and runs one ReAct cycle per interlocutor who addressed the assistant. An idle
tick (nothing queued) does no work at all. When the shared history reaches
`compaction.emergency_threshold`, the tick ends with the emergency compaction it was handed
(`compact`: the agent never imports the sleep layer).

During a cycle the world port is wrapped in `ConversationWorld`, which records what the NPC says
in the conversation and keeps it from talking to an empty room: if the person it answers has left
by the time the LLM replies, the reply is dropped. Someone who whispered gets the answer as a
whisper: what they said is journaled as private, and nobody else hears the reply.

Never silent: when someone addressed the assistant and its cycle ends without a turn-ending
action (errors, the iteration limit, the LLM down), that person hears the assistant's
`react.fallback_line` (in character, configurable per assistant), and the reason is logged and
kept for `@assistant <npc>` (`LoopState.record_unanswered`). Nor kept waiting: one reply has one
deadline (`react.reply_deadline`) for every LLM call of it, and the fallback line is said when
it passes. Nor held for good: a turn still waiting on its recall or its model at
`ABANDON_AFTER` times the deadline is abandoned (logged with what it waited on), so the
assistant takes its next line; whatever that turn would still have said is dropped. A speaker
who floods is answered at most once per `perception.speaker_cooldown`
seconds, everything they said meanwhile in one turn (`perception.hold`).
"""

import dataclasses

from twisted.internet import defer

from ai_assistant.agent import perception
from ai_assistant.agent.blocks.remembered import recall_lines
from ai_assistant.memory import provenance
from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing import reply_priority
from ai_assistant.plumbing.llm_resilience import with_deadline
from ai_assistant.workspace.loop_state import LoopState

SPEECH_KINDS = ("talk", "say", "whisper", "page", "pose")
ANSWERED = ("direct_message", "direct_addressing")

# Mechanical mode's notice goes to the speaker alone (`_mechanical_notice`), never to the room:
# a whisper stays private, and no other assistant hears it and journals it.
MECHANICAL_NOTICE = (
    "{name} gives you a polite but vacant look; no thoughts stir behind those eyes. "
    "(This assistant is in mechanical mode: no LLM is configured.)"
)
PRIVATE_KINDS = ("whisper", "page")
# A turn's model calls end at its deadline (their HTTP timeouts are cut to it), so one still
# waiting at twice the deadline waits on something that may never answer (a worker that never
# returns, a Deferred that never fires): it is abandoned instead of holding the assistant.
ABANDON_AFTER = 2.0

class ConversationWorld:
    """
    A `WorldPort` wrapper for one conversation.

    Args:
        world (WorldPort): The NPC's body.
        ports (AssistantPorts): The assistant (for its conversation).
        interlocutor (dict): `{"id", "name"}` of the character being answered.
    """

    def __init__(self, world, ports, interlocutor, private=False):
        self._world = world
        self._ports = ports
        self._interlocutor = interlocutor
        self.private = private  # they whispered: the answer goes back as a whisper
        self.suppressed = []
        self.compaction_due = False
        self.spoke = False
        self.abandoned = False  # the turn was given up: nothing more is said in it

    def __getattr__(self, name):
        return getattr(self._world, name)

    @property
    def interlocutor_id(self):
        """Whom this conversation answers: recall shows them public items and their own."""
        return self._interlocutor["id"]

    @property
    def audience(self):
        """Who may hear what this conversation makes: the speaker when they whispered."""
        return self._interlocutor["id"] if self.private else None

    def _audience_present(self):
        return any(person["id"] == self._interlocutor["id"] for person in self._world.present())

    def _speak(self, verb, text):
        if self.abandoned:
            self.suppressed.append(text)
            return
        if not self._audience_present():
            self.suppressed.append(text)
            who = self._interlocutor["name"]
            self._ports.log(f"{self._ports.name}: {who} left; not answering an empty room")
            return
        content = text if verb == "say" else f"*{self._ports.name} {text}*"
        if self.private:
            reason = self._world.whisper(self._interlocutor["name"], content)
            if reason:
                self.suppressed.append(text)
                self._ports.log(f"{self._ports.name}: could not whisper back: {reason}")
                return
            content = f"(whispered) {content}"
        else:
            getattr(self._world, verb)(text)
        self.spoke = True
        # a whispered answer stays in the whisperer's own working memory (and the journal,
        # with its audience): the shared history is summarised for everyone
        Conversation(self._ports).append("assistant", self._ports.name, content,
                                         interlocutor=self._interlocutor, private=self.private)
        if not self.private and _history_full(self._ports):
            self.compaction_due = True

    def notice(self, text):
        """An out-of-character notice (no LLM, LLM down): shown, never remembered as said."""
        if not self.abandoned and self._audience_present():
            self._world.emote(text)

    def say(self, text):
        self._speak("say", text)

    def whisper(self, target, text):
        if self.abandoned:
            self.suppressed.append(text)
            return "the turn was abandoned"
        reason = self._world.whisper(target, text)
        if not reason and str(target).strip().lower() == str(self._interlocutor["name"]).lower():
            self.spoke = True
        return reason

    def emote(self, text):
        self._speak("emote", text)


# How what the assistant hears becomes journal entries (the journal's source types): what is
# said to it is told directly; chatter it overhears is environmental; a pose it sees is observed.
HEARD_SOURCE = {
    "direct_message": ("direct", 'said to me: "{text}"'),
    "direct_addressing": ("direct", 'said to me: "{text}"'),
    "room_chatter": ("environmental", 'said: "{text}"'),
}
PRIVATE_HEARD = ("direct", 'whispered to me (private): "{text}"')


def journal_heard_events(ports, events):
    """
    Perception listener: journal what the assistant heard, one entry per utterance.

    Arrivals and departures are not journaled (entity profiles keep who was seen); poses are
    observations. Importance is scored by the heuristic now and by the LLM during sleep. Each
    entry records its speaker's stable id and how it was heard (`provenance.heard`).
    """
    if not ports.settings.get("journal.record_heard"):
        return
    for event in events:
        if event["kind"] not in SPEECH_KINDS or not str(event.get("text", "")).strip():
            continue
        tags = ["heard", event["classification"]]
        if event["kind"] == "pose":
            source_type, content = "observation", event["text"]
        else:
            source_type, template = HEARD_SOURCE.get(
                event["classification"], ("environmental", 'said: "{text}"'))
            if event["kind"] in PRIVATE_KINDS:
                (source_type, template), tags = PRIVATE_HEARD, [*tags, "private"]
            content = f"{event['sender']} " + template.format(text=event["text"])
        try:
            entry = Journal(ports).add(
                content[: ports.settings.get("journal.max_content_chars")],
                source_type=source_type,
                source_entity=event["sender"],
                tags=tags,
                # a whisper or a page is for the assistant alone: its audience is the speaker
                audience=event.get("sender_id") if event["kind"] in PRIVATE_KINDS else None,
                provenance=provenance.heard(event),
            )
            # the prompt shows this utterance once, as a new event, not again as a memory
            event["journal_id"] = entry["id"]
        except ValueError as err:
            ports.log(f"{ports.name}: could not journal what {event['sender']} said: {err}")


def people_heard_events(ports, events):
    """Perception listener: who spoke and who came and went, into their profiles."""
    People(ports).observe_events(events)


# `listener(ports, events)`, called on the reactor thread with every drained batch, in order.
# Listeners must be fast and synchronous (they update state; slow work belongs in sleep). A
# listener that raises is logged and skipped; it never stops the tick.
PERCEPTION_LISTENERS = (journal_heard_events, people_heard_events)


def _notify_listeners(ports, events):
    for listener in PERCEPTION_LISTENERS:
        try:
            listener(ports, events)
        except Exception as err:  # a broken listener must not stop the tick
            ports.log(f"{ports.name}: perception listener {listener.__name__} failed: {err}")


def _interlocutors(events):
    """Senders who addressed the assistant, most urgent first, each once."""
    seen, ordered = set(), []
    for event in events:
        if event["classification"] in ANSWERED and event["sender_id"] not in seen:
            seen.add(event["sender_id"])
            ordered.append({"id": event["sender_id"], "name": event["sender"]})
    return ordered


def _relevant_memories(ports, situation):
    """
    Deferred[list[str] | None]: what the assistant remembers that bears on the situation,
    from every tier (the recall pipeline, run off the reactor); None if it failed.
    """
    return recall_lines(ports, situation)


@defer.inlineCallbacks
def run_awake_tick(ports, *, run_cycle, call_later=None, cache=None, compact=None):
    """
    One awake tick.

    Args:
        ports (AssistantPorts): The assistant.
        run_cycle (callable): `run_cycle(ports, situation, cache=...) -> Deferred[dict]`,
            normally `react.run_react_cycle` (also used for the emergency compaction's
            extraction pass).
        call_later (callable, optional): `call_later(seconds, func)` returning a cancellable
            call, for the "thinking" emote; none is shown when omitted.
        cache (ToolCache, optional): The assistant's tool cache.
        compact (callable, optional): `compact(ports, run_cycle=...) -> Deferred[dict]`, the
            emergency compaction run when the shared history reaches
            `compaction.emergency_threshold` (the shell hands in
            `sleep.compaction.compact_if_emergency`); without it the history waits for sleep.

    Returns:
        Deferred[dict]: What the tick did: `{"events", "answered", "cycles": [...]}`, and
        `"compaction"` when it compacted.
    """
    events = PerceptionQueue(ports).take_all()
    report = {"events": len(events), "answered": 0, "cycles": []}
    if not events:
        return report
    # events held through a speaker's cooldown were journaled and recorded when first heard
    fresh = [event for event in events if not event.get("held")]
    _notify_listeners(ports, fresh)
    compaction_due = _record_speech(ports, fresh)
    for interlocutor in _interlocutors(events):
        world = ConversationWorld(ports.world, ports, interlocutor) if ports.world else None
        if ports.mechanical:
            told = _mechanical_notice(ports, interlocutor)
            report["cycles"].append({"interlocutor": interlocutor["id"], "mechanical": True,
                                     **({"notice": True} if told else {})})
            continue
        if perception.cooling_down(ports, interlocutor["id"]):
            # a flood: answered together when their cooldown ends (`perception.hold`)
            perception.hold(ports, interlocutor["id"],
                            [e for e in events if e["sender_id"] == interlocutor["id"]])
            report["cycles"].append({"interlocutor": interlocutor["id"], "held": True})
            continue
        result = yield _answer(ports, world, interlocutor, events, run_cycle=run_cycle,
                               call_later=call_later, cache=cache)  # fmt: skip
        # what they say from now until the cooldown ends waits for one turn together
        perception.start_cooldown(ports, interlocutor["id"], call_later)
        compaction_due |= bool(world is not None and world.compaction_due)
        report["cycles"].append(result)
        report["answered"] += 1
    if compaction_due and compact is not None:
        # the context is over the emergency threshold: extract, then compact (or, with no
        # LLM, trim into the journal), now
        report["compaction"] = yield compact(ports, run_cycle=run_cycle)
    return report


def _never_silent(ports, world, interlocutor, result):
    """
    The cycle ended without a turn-ending action: the person who addressed the assistant
    still hears its fallback line (unless they left, or it already spoke to them), and the
    reason is recorded for admins.
    """
    reason = str(result.get("stopped") or "no answer")
    LoopState(ports).record_unanswered(interlocutor["name"], reason)
    ports.log(f"{ports.name}: could not answer {interlocutor['name']}: {reason}")
    line = str(ports.settings.get("react.fallback_line") or "").strip()
    if world is None or not line or world.spoke:
        return
    world.say(line)
    result["fallback"] = line


def _mechanical_notice(ports, interlocutor):
    """
    Tell the speaker, privately, that the assistant cannot talk (no LLM): at most once per
    speaker per `react.notice_period` seconds (the times are kept in the runtime).

    Returns:
        bool: True if the notice was sent.
    """
    tell = getattr(ports.world, "tell", None)
    if tell is None:
        return False
    shown = ports.runtime.cache("mechanical_notices", dict)
    now = ports.clock.now()
    last = shown.get(interlocutor["id"])
    if last is not None and (now - last).total_seconds() < ports.settings.get(
            "react.notice_period"):
        return False
    shown[interlocutor["id"]] = now
    tell(interlocutor["id"], MECHANICAL_NOTICE.format(name=ports.name))
    return True


def _history_full(ports):
    """True when the shared history has reached `compaction.emergency_threshold`."""
    threshold = ports.settings.get("compaction.emergency_threshold")
    return Conversation(ports).usage() >= threshold


def _record_speech(ports, events):
    """
    Record what others said in the conversation, each line once.

    Returns:
        bool: True when the shared history reached the emergency compaction threshold.
    """
    conversation = Conversation(ports)
    shared = False
    for event in events:
        if event["kind"] in SPEECH_KINDS and event["classification"] != "self":
            private = event["kind"] in PRIVATE_KINDS  # not summarised for everyone (`_speak`)
            text = f"(whispered) {event['text']}" if private else event["text"]
            conversation.append("user", event["sender"], text, private=private,
                                interlocutor={"id": event["sender_id"], "name": event["sender"]},
                                source={"speaker_id": event.get("sender_id"),
                                        "journal_id": event.get("journal_id")})
            shared |= not private
    return shared and _history_full(ports)


def _think_visibly(ports, world, heard, call_later):
    """
    Show "pauses, thinking." `react.thinking_delay` seconds after the line was heard (at once
    if that has passed), unless the turn ends first.

    Returns:
        IDelayedCall or None: The pending emote, for the caller to cancel.
    """
    delay = ports.settings.get("react.thinking_delay")
    if call_later is None or world is None or not delay or delay <= 0:
        return None
    heard_at = min((event["heard_at"] for event in heard if event.get("heard_at")), default=None)
    waited = ports.clock.now().timestamp() - heard_at if heard_at is not None else 0.0
    return call_later(max(0.0, delay - max(0.0, waited)), ports.world.emote,
                      perception.THINKING_EMOTE)


@defer.inlineCallbacks
def _answer(ports, world, interlocutor, events, *, run_cycle, call_later, cache):
    """
    Run one ReAct cycle answering `interlocutor`, showing a "thinking" emote meanwhile.

    Returns:
        Deferred[dict]: The cycle's summary, with the interlocutor and any suppressed speech.
    """
    their_events = [e for e in events if e["sender_id"] == interlocutor["id"]]
    context_events = their_events + [
        e for e in events if e["sender_id"] != interlocutor["id"] and e["priority"] < 8
    ]
    addressed = [e for e in their_events if e["classification"] in ANSWERED]
    if world is not None and addressed and addressed[-1]["kind"] in PRIVATE_KINDS:
        world.private = True
    # one deadline for the whole reply: every LLM call of it, and a notice when it passes
    deadline = float(ports.settings.get("react.reply_deadline"))
    llm = with_deadline(ports.llm, deadline)
    overdue = None
    if call_later is not None and world is not None:
        overdue = call_later(deadline, _never_silent, ports, world, interlocutor,
                             {"stopped": f"no answer within the {deadline:g} s reply deadline"})
    situation = {
        "events": context_events,
        "history": Conversation(ports).for_speaker(interlocutor["id"]),
        "interlocutor": interlocutor,
        "mode": "awake",
        "purpose": "conversation",
        "present": ports.world.present() if ports.world else [],
        "private": bool(world is not None and world.private),
    }
    # the "thinking" emote counts from when the line was heard, whatever phase the turn is in
    thinking = _think_visibly(ports, world, addressed or their_events, call_later)
    # background work not yet started (assistants' warm-ups) waits until the reply is over
    reply_priority.reply_started()
    abandon = None
    try:
        turn = _recall_and_reply(ports, world, llm, situation, run_cycle, cache)
        if call_later is not None:
            turn, abandon = _abandoned_after(turn, ABANDON_AFTER * deadline, call_later,
                                             lambda: _abandoned(world, deadline, situation))
        result = yield turn
    finally:
        reply_priority.reply_finished()
        for call in (thinking, overdue, abandon):
            if call is not None and call.active():
                call.cancel()
    if not result.get("terminal"):
        _never_silent(ports, world, interlocutor, result)
    result = {**result, "interlocutor": interlocutor["id"]}
    if world is not None and world.suppressed:
        result["suppressed"] = list(world.suppressed)
    return result


@defer.inlineCallbacks
def _recall_and_reply(ports, world, llm, situation, run_cycle, cache):
    """The turn's own work: what it recalls (into `situation`), then its cycle."""
    situation["recall"] = yield _relevant_memories(ports, situation)
    result = yield run_cycle(dataclasses.replace(ports, world=world, llm=llm), situation,
                             cache=cache)
    return result


def _abandoned_after(turn, seconds, call_later, give_up):
    """
    `turn`'s outcome, or `give_up()`'s if `turn` has not fired within `seconds`.

    Nothing is cancelled: a worker thread cannot be stopped, and a cancelled recall would turn
    into "no memories" and let the turn go on. What fires later is dropped (and logged by the
    turn itself if it failed).

    Returns:
        tuple: `(Deferred, IDelayedCall)`: the outcome, and the timer to cancel once it fired.
    """
    outcome = defer.Deferred()

    def expire():
        if not outcome.called:
            outcome.callback(give_up())

    def settle(result):
        if not outcome.called:
            outcome.callback(result)

    def failed(failure):
        if not outcome.called:
            outcome.errback(failure)

    timer = call_later(seconds, expire)
    turn.addCallbacks(settle, failed)
    return outcome, timer


def _abandoned(world, deadline, situation):
    """
    The summary of a turn given up at `ABANDON_AFTER` deadlines: nothing more is said in it,
    and its reason (logged and kept for admins by `_never_silent`) names what it waited on:
    its recall until the situation holds what was recalled, then the model's reply.
    """
    waiting_on = "the model's reply" if "recall" in situation else "recall"
    if world is not None:
        world.abandoned = True
    return {"terminal": False, "abandoned": waiting_on,
            "stopped": f"abandoned after {ABANDON_AFTER * deadline:g} s, still waiting on "
                       f"{waiting_on} (the reply deadline is {deadline:g} s)"}
