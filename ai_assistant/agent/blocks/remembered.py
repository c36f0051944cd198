"""
The prompt block that renders recall, "What you remember": what the assistant remembers that
bears on the moment, from every tier at once (journal, long-term memories, memory nodes,
profiles), ranked by the recall pipeline (`memory.recall.pipeline`) and cut to
`recall.budget_tokens`, each line dated.

The awake tick runs the pipeline off the reactor before the cycle and puts the lines in
`situation["recall"]` (`recall_lines`). A situation built without them (another purpose, a
game's own caller) gets the same ranking over the journal alone, synchronously and without
embeddings (cheap: the journal is bounded). Never shown: the entries of the events being
answered, and lines the conversation history or the notes on people (their recent words)
already show.
"""

import dataclasses

from twisted.internet import defer

from ai_assistant.agent.blocks.conversation import shown_history
from ai_assistant.agent.blocks.people import observations_shown
from ai_assistant.memory.journal import get_journal
from ai_assistant.memory.recall.grouping import layout
from ai_assistant.memory.recall.pipeline import (
    RecallQuery,
    build_corpus,
    rank_items,
    recall,
    recall_params,
    select_lines,
)
from ai_assistant.memory.search.journal_search import journal_index_cache
from ai_assistant.plumbing.quoting import quote_untrusted


def _quoted_in_prompt(history):
    """What the prompt's conversation history shows, as a heard entry quotes it."""
    quoted = set()
    for message in history or ():
        text = " ".join(str(message.get("content") or "").removeprefix("(whispered) ").split())
        if text and message.get("role") == "user":
            quoted.add(f'"{text}"')
    return quoted


def _repeats(entry, quoted):
    """True for a heard entry whose words are already in the conversation history."""
    if "heard" not in (entry.get("tags") or ()):
        return False
    content = " ".join(str(entry.get("content") or "").split())
    return any(content.endswith(text) for text in quoted)


def recall_query(ports, situation):
    """
    What the prompt recalls for: the events' words, for the person being answered, without
    the events' own entries and the lines the history and the notes on people show.

    Returns:
        RecallQuery | None: None when the events say nothing.
    """
    events = situation.get("events") or ()
    text = " ".join(str(event.get("text", "")) for event in events).strip()
    if not text:
        return None
    exclude = {str(event.get("journal_id")) for event in events
               if event.get("journal_id") is not None}  # fmt: skip
    quoted = _quoted_in_prompt(shown_history(ports, situation))
    # what "Notes on people here" shows as someone's recent words is in the prompt already
    quoted |= {f'"{text}"' for text in observations_shown(ports, situation)}
    if quoted:
        exclude |= {str(entry.get("id")) for entry in get_journal(ports)["entries"]
                    if _repeats(entry, quoted)}  # fmt: skip
    interlocutor = situation.get("interlocutor") or {}
    viewer = interlocutor.get("id")
    return RecallQuery(text=text[:2000], viewer=str(viewer) if viewer is not None else None,
                       exclude=frozenset(exclude),
                       limit=ports.settings.get("recall.prompt_items"),
                       budget=ports.settings.get("recall.budget_tokens"),
                       # a reply never waits for the store to open (just after a start)
                       wait_for_store=False)  # fmt: skip


def recall_lines(ports, situation):
    """
    Run the recall pipeline for a situation (off the reactor).

    Returns:
        Deferred[list[str] | None]: The dated lines; None when the pipeline failed (logged),
        so the block falls back to the journal alone.
    """
    query = recall_query(ports, situation)
    if query is None:
        return defer.succeed([])

    def failed(failure):
        ports.log(f"{ports.name}: recall for the prompt failed: {failure.getErrorMessage()}")
        return None

    deferred = defer.maybeDeferred(recall, ports, query)
    return deferred.addCallbacks(lambda result: result[1], failed)


def _journal_lines(ports, situation):
    """The pipeline over the journal alone, synchronously, without embeddings."""
    query = recall_query(ports, situation)
    if query is None:
        return []
    settings = ports.settings
    recalled = rank_items(build_corpus(get_journal(ports)["entries"], None), query,
                          now=ports.clock.now(),
                          params=dataclasses.replace(recall_params(settings),
                                                     embedding_weight=0.0),
                          index_cache=journal_index_cache(ports),
                          min_information=settings.get("recall.min_information"))  # fmt: skip
    return select_lines(recalled, query.budget, query.limit,
                        max_line_tokens=settings.get("recall.max_line_tokens"))


def remembered_block(ports, situation):
    """What the assistant remembers that bears on the moment: dated lines, as quoted data."""
    lines = situation.get("recall")
    if lines is None:
        lines = _journal_lines(ports, situation)
    # the lines are whole and the budget bounds them: the block is never cut; each day and
    # each speaker within it is named once (`recall.grouping`)
    return quote_untrusted(layout(lines), "MEMORIES", limit=None) if lines else None
