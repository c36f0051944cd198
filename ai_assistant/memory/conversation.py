"""
The conversation: what was said around the assistant, kept by one owner (`Conversation`).

It holds two documents:

- `documents.CONVERSATION_HISTORY`, the chronological history of everything heard and said in
  the open::

      [{"role": "user"|"assistant"|"system", "name": "Alice", "content": "...",
        "time": "2025-12-06T14:30:00Z", "tokens": 12}, ...]

  (`tokens` is the line's cached token count, so measuring the history stays cheap.) Its usage
  is its token count over `llm.context_limit`; when it fills up, or during every sleep for the
  lines older than `compaction.history_days`, the context compaction (`sleep.compaction`)
  replaces its head by one summary marker (`replace_span`)::

      {"role": "system", "name": "summary", "content": "[Summary of earlier conversation] ...",
       "summary": True, "time": "...", "tokens": 80}

- `documents.WORKING_MEMORY`, the state of each active conversation (the specification's third
  memory tier), by the interlocutor's id::

      {"name": "Alice", "topic": None, "started_at": "2025-12-06T10:00:00Z",
       "last_active": "2025-12-06T10:05:00Z",
       "messages": [{"role": "user"|"assistant", "name", "content", "time"}],
       "pending_actions": []}

  Its messages are bounded (`working_memory.max_messages`, oldest dropped first); conversations
  idle for longer than `working_memory.stale_seconds` are forgotten during sleep.

A line is recorded once (`append`): in the working memory of the person it was exchanged with
and in the shared history. A whispered line stays out of the shared history, which is
summarised for everyone: it is kept in the whisperer's own working memory (and in the journal,
with its audience) only.
"""

from ai_assistant.plumbing import documents, state_changes
from ai_assistant.plumbing.ports import iso, parse_iso
from ai_assistant.plumbing.tokens import TOKENS_REPLY_PRIMER, count_message_tokens

SUMMARY_PREFIX = "[Summary of earlier conversation]"


def _for_counting(message):
    return {key: message.get(key) for key in ("role", "name", "content") if message.get(key)}


def message_tokens(message):
    """The tokens one message adds to a prompt (format overhead included)."""
    return count_message_tokens([_for_counting(message)]) - TOKENS_REPLY_PRIMER


def line_tokens(message):
    """A history line's tokens: its cached count, else counted."""
    cached = message.get("tokens")
    if isinstance(cached, int) and not isinstance(cached, bool):
        return cached
    return message_tokens(message)


def history_tokens(history):
    """
    Args:
        history (list[dict]): Conversation history messages.

    Returns:
        int: Their prompt tokens, as `count_message_tokens` counts them (cached per message).
    """
    if not history:
        return 0
    return sum(line_tokens(message) for message in history) + TOKENS_REPLY_PRIMER


def summary_marker(summary, time):
    """The line that stands for a condensed stretch of history (its `summary` text given)."""
    marker = {"role": "system", "name": "summary", "content": f"{SUMMARY_PREFIX} {summary}",
              "summary": True, "time": time}
    marker["tokens"] = message_tokens(marker)
    return marker


def transcript(messages, assistant_name):
    """The messages as plain lines (`[time] speaker: words`), to summarise or review them."""
    lines = []
    for message in messages:
        if message.get("summary"):
            lines.append(f"(Earlier summary) {message.get('content')}")
            continue
        speaker = assistant_name if message.get("role") == "assistant" else message.get("name")
        lines.append(
            f"[{message.get('time', '?')}] {speaker or 'someone'}: {message.get('content')}"
        )
    return "\n".join(lines)


def _same_lines(first, second):
    """True when two stretches of history hold the same lines (time, speaker and words)."""
    fields = ("time", "role", "name", "content")
    return len(first) == len(second) and all(
        [a.get(key) for key in fields] == [b.get(key) for key in fields]
        for a, b in zip(first, second, strict=True))


class Conversation:
    """
    The assistant's conversation: the shared history and the working memory per interlocutor.

    Cheap to build (`Conversation(ports)`, or `npc.assistant.conversation`): it keeps nothing
    and reads `ports.state` on every call.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    # --- writing ------------------------------------------------------------------------------

    def append(self, role, name, content, *, interlocutor=None, private=False, source=None):
        """
        Record one line heard or said.

        Args:
            role (str): "user" (someone else spoke) or "assistant" (the NPC did).
            name (str): Who spoke (for "assistant", the NPC's name).
            content (str): The words.
            interlocutor (dict, optional): `{"id", "name"}` of the person the line was
                exchanged with: it goes in their working memory too.
            private (bool): A whispered line: kept in the interlocutor's working memory only,
                never in the shared history.
            source (dict, optional): `speaker_id` (the speaker's stable id) and `journal_id`
                (the entry that journaled the line), kept on the line so what a review of the
                history records names its speaker and inputs (`memory.provenance`).

        Returns:
            dict or None: The line as the shared history keeps it; None for a private one.
        """
        now = iso(self.ports.clock.now())
        content = str(content or "")
        if interlocutor is not None:
            self._remember(interlocutor, role, content, now)
        if private:
            return None
        message = {"role": role, "name": name, "content": content}
        message["tokens"] = message_tokens(message)
        message["time"] = now
        for key in ("speaker_id", "journal_id"):
            if (source or {}).get(key) is not None:
                message[key] = source[key]
        history = self.history()
        history.append(message)
        # what changed, for a store that logs changes: the line, not the whole history again
        self.ports.state.set(documents.CONVERSATION_HISTORY, history,
                             change=[state_changes.append((), message)])
        return message

    def _remember(self, interlocutor, role, content, now):
        memory = dict(self.ports.state.get(documents.WORKING_MEMORY, {}) or {})
        who, name = interlocutor["id"], interlocutor.get("name")
        conversation = memory.get(who)
        started = conversation is None
        if started:
            conversation = memory[who] = {"name": name, "topic": None, "started_at": now,
                                          "last_active": now, "messages": [],
                                          "pending_actions": []}
        conversation["name"] = name or conversation.get("name")
        conversation["last_active"] = now
        speaker = name if role == "user" else self.ports.name
        line = {"role": role, "name": speaker, "content": content, "time": now}
        messages = conversation["messages"]
        messages.append(line)
        limit = max(2, int(self.ports.settings.get("working_memory.max_messages")))
        excess = max(0, len(messages) - limit)
        del messages[:excess]
        # what changed, for a store that logs changes: this line, not every conversation
        if started:
            change = [state_changes.assign((who,), conversation)]
        else:
            change = [state_changes.assign((who, "name"), conversation["name"]),
                      state_changes.assign((who, "last_active"), now),
                      state_changes.append((who, "messages"), line),
                      *[state_changes.pop((who, "messages"), 0)] * excess]
        self.ports.state.set(documents.WORKING_MEMORY, memory, change=change)

    def replace_span(self, span, replacement):
        """
        Replace `span`, which must still head the shared history, by one line (a compaction's
        summary marker).

        Args:
            span (list[dict]): The first lines of the history, as read before.
            replacement (dict): The line that stands for them.

        Returns:
            list[dict] or None: The new history; None (nothing changed) when the history no
            longer starts with `span`.
        """
        history = self.history()
        if not _same_lines(history[: len(span)], span):
            return None
        history = [replacement, *history[len(span):]]
        self.ports.state.set(documents.CONVERSATION_HISTORY, history)
        return history

    def forget_stale(self, max_age_seconds=None):
        """
        Forget the conversations idle for longer than `max_age_seconds` (default
        `working_memory.stale_seconds`).

        Returns:
            list[str]: The ids of the interlocutors forgotten.
        """
        if max_age_seconds is None:
            max_age_seconds = self.ports.settings.get("working_memory.stale_seconds")
        now = self.ports.clock.now()
        memory = dict(self.ports.state.get(documents.WORKING_MEMORY, {}) or {})
        stale = [who for who, conversation in memory.items()
                 if (now - (parse_iso(conversation.get("last_active")) or now)).total_seconds()
                 > max_age_seconds]
        if stale:
            for who in stale:
                del memory[who]
            self.ports.state.set(documents.WORKING_MEMORY, memory)
        return stale

    # --- reading ------------------------------------------------------------------------------

    def history(self):
        """The shared history, oldest first (a new list: `append` and `replace_span` change it)."""
        history = self.ports.state.get(documents.CONVERSATION_HISTORY, [])
        return list(history) if isinstance(history, list) else []

    def for_speaker(self, entity_id):
        """
        Returns:
            list[dict]: The messages exchanged with `entity_id`, oldest first (copies).
        """
        conversation = (self.ports.state.get(documents.WORKING_MEMORY, {}) or {}).get(entity_id)
        return [dict(message) for message in (conversation or {}).get("messages", [])]

    def interlocutors(self):
        """The ids of the people the assistant has a conversation going with."""
        return list(self.ports.state.get(documents.WORKING_MEMORY, {}) or {})

    def summary(self):
        """
        Returns:
            str or None: The text of the summary marker heading the history, if there is one.
        """
        history = self.history()
        if history and history[0].get("summary"):
            return history[0].get("content")
        return None

    def tokens(self):
        """The shared history's prompt tokens."""
        return history_tokens(self.history())

    def usage(self):
        """
        Returns:
            float: The shared history's tokens over `llm.context_limit` (0.0-1.0 and beyond).
        """
        limit = max(1, int(self.ports.settings.get("llm.context_limit") or 1))
        return self.tokens() / limit


def clear_stale_conversations(ports):
    """The sleep step: forget the conversations gone stale (`Conversation.forget_stale`)."""
    return Conversation(ports).forget_stale()
