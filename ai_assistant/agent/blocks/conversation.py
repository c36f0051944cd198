"""
Conversation blocks: what was said - the recent history, the new events to answer, the summary
of earlier conversation, and the stretch about to be condensed (for the pre-compaction pass).

Everything here was written by players or other characters, so it is shown only as quoted data.
"""

from ai_assistant.memory.conversation import Conversation, transcript
from ai_assistant.plumbing.quoting import defuse, quote_untrusted, safe_name
from ai_assistant.plumbing.tokens import count_tokens

MAX_HISTORY_MESSAGES = 20


def _without_new_events(history, events):
    """
    The history without its newest messages that are the new events themselves (the awake
    tick records what was heard before the prompt is built): each utterance is shown once.
    """
    pending = [(str(e.get("sender") or ""), " ".join(str(e.get("text") or "").split()))
               for e in events or ()]
    history = list(history)
    while history and pending:
        last = history[-1]
        said = " ".join(str(last.get("content") or "").removeprefix("(whispered) ").split())
        key = (str(last.get("name") or ""), said)
        if last.get("role") != "user" or key not in pending:
            break
        pending.remove(key)
        history.pop()
    return history


def shown_history(ports, situation):
    """
    The messages the "Recent conversation" block shows: the newest that fit
    `recall.history_tokens` (at most MAX_HISTORY_MESSAGES), oldest first. The newest message
    is always shown, cut if it alone is over the budget.
    """
    history = _without_new_events(situation.get("history") or [], situation.get("events"))
    budget = ports.settings.get("recall.history_tokens")
    shown, used = [], 0
    for message in reversed(history[-MAX_HISTORY_MESSAGES:]):
        cost = count_tokens(defuse(message.get("content"), 1000)) + 4
        if shown and budget and used + cost > budget:
            break
        shown.append(message)
        used += cost
    return shown[::-1]


def history_block(ports, situation):
    """The recent conversation with the current interlocutor, as quoted data."""
    history = shown_history(ports, situation)
    if not history:
        return None
    lines = []
    for message in history:
        role = message.get("role")
        speaker = "you" if role == "assistant" else safe_name(message.get("name") or "someone")
        lines.append(f"{speaker}: {defuse(message.get('content'), 1000)}")
    return quote_untrusted("\n".join(lines), "CONVERSATION HISTORY")


def events_block(ports, situation):
    """What happened since the last cycle, each event's text quoted as player data."""
    events = situation.get("events") or []
    if not events:
        return None
    blocks = []
    for number, event in enumerate(events, 1):
        sender = safe_name(event.get("sender"))
        kind = safe_name(event.get("kind") or "say")
        header = f"Event {number}: {kind} from {sender}"
        if event.get("kind") in ("whisper", "page"):
            header += " (private: nobody else heard it; your answer goes back privately)"
        if event.get("sender_id") is not None:
            header += f" (id {safe_name(event.get('sender_id'))})"
        if event.get("time"):
            header += f" at {safe_name(event.get('time'))}"
        if event.get("priority") is not None:
            header += f", priority {safe_name(event.get('priority'))}"
        blocks.append(f"{header}\n{quote_untrusted(event.get('text'), 'PLAYER TEXT')}")
    return "\n\n".join(blocks)


def summary_block(ports, situation):
    """The latest summary of earlier conversation (the marker heading the history)."""
    summary = Conversation(ports).summary()
    if not summary:
        return None
    return quote_untrusted(summary, "SUMMARY OF EARLIER CONVERSATION")


def review_block(ports, situation):
    """The messages about to be compacted, for the pre-compaction extraction pass."""
    messages = situation.get("compaction_review") or []
    if situation.get("purpose") != "pre_compaction" or not messages:
        return None
    return quote_untrusted(transcript(messages, ports.name), "CONVERSATION TO REVIEW")
