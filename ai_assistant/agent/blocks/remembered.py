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
import functools
import json

from twisted.internet import defer

from ai_assistant.agent.blocks.conversation import shown_history
from ai_assistant.agent.blocks.people import observations_shown
from ai_assistant.memory.journal import get_journal
from ai_assistant.memory.recall.fitting import RecallLines
from ai_assistant.memory.recall.grouping import KEY, layout, needs_key
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
from ai_assistant.plumbing.tokens import count_message_tokens, count_tokens

TITLE = "What you remember"
# Rounds of `fit_to_request`: the layout's estimate is within a few tokens of the block's
# count, so the second round nearly always fits; the third takes off what is left over.
FIT_ROUNDS = 3
# Spare tokens too few to hold another line: the fitting stops there.
FIT_SLACK = 8


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
    if not lines:
        return None
    block = quote_untrusted(layout(lines), "MEMORIES", limit=None)
    # "said to me" is said once, in the key: our own words, so outside the quoted data
    return f"{KEY}\n{block}" if needs_key(lines) else block


def block_tokens(lines, count=count_tokens):
    """Tokens the recall block of `lines` adds to a prompt, its title and spacing included."""
    block = remembered_block(None, {"recall": lines}) if lines else None
    return count(f"## {TITLE}\n{block}") + 2 if block else 0


@functools.cache
def _frame_tokens():
    """Tokens of the block's title, delimiters and spacing (what the lines' cost leaves out)."""
    return count_tokens(f"## {TITLE}\n{quote_untrusted('', 'MEMORIES', limit=None)}") + 2


def fit_to_request(lines, rest_tokens, request_budget, floor=0):
    """
    The recall lines chosen again so that the request they go in holds at most
    `request_budget` tokens (`recall.request_tokens`): recall gets what the request's other
    sections (`rest_tokens`) leave, more lines when they are short, fewer when they are long.
    Lines stay whole; the ranking is not run again (`fitting.RecallLines.fit`).

    Args:
        lines (list[str]): The pipeline's lines (`RecallLines`; any other list is kept as it is).
        rest_tokens (int): Tokens of the request without the recall block.
        request_budget (int): Tokens of the whole request (0: keep `lines`).
        floor (int): Tokens the lines may take however little the rest leaves
            (`recall.min_tokens`: a request with every tool kit still recalls; it then passes
            `request_budget`).

    Returns:
        list[str]: The lines, oldest first.
    """
    if not request_budget or not isinstance(lines, RecallLines):
        return lines
    # what the block really takes beside the layout's estimate (its title and delimiters, less
    # what the estimate overcounts where lines meet), measured once on the block as chosen
    frame = block_tokens(lines, lines.count) - lines.cost if lines else _frame_tokens()
    # the request's budget, but never less than the floor for the lines themselves
    request_budget = max(request_budget, rest_tokens + frame + floor)
    fitted = lines
    for _ in range(FIT_ROUNDS):
        spare = request_budget - rest_tokens - frame - fitted.cost
        if spare >= 0 and (fitted.complete or spare < FIT_SLACK):
            break  # within the budget, and no line is left to add or room for one
        fitted = lines.fit(max(1, fitted.cost + spare))
    while fitted and rest_tokens + block_tokens(fitted, lines.count) > request_budget:
        fitted = lines.fit(max(1, fitted.cost - FIT_SLACK))  # the estimate was short
    return fitted


@defer.inlineCallbacks
def messages_within_request(ports, situation, build, specs=None):
    """
    The messages `build(situation)` makes, the recall block fitted (`fit_to_request`) so that
    they and the tool specs sent beside them hold at most `recall.request_tokens` (0: the
    lines as the pipeline chose them, `recall.budget_tokens`).

    The blocks are built on the reactor (they read the assistant's documents), once: the
    request with the fitted lines takes the other blocks as the measured one rendered them.
    The counting and the fitting run in the worker pool.

    Args:
        ports (AssistantPorts): The assistant.
        situation (dict): The prompt's situation (its "recall", the pipeline's lines).
        build (callable): `build(situation, rendered) -> messages`
            (`context.build_messages`: `rendered` keeps the first call's blocks for the second).
        specs (list, optional): The tool specs sent beside the messages.

    Returns:
        Deferred[list[dict]]: The messages.
    """
    request_budget = ports.settings.get("recall.request_tokens")
    lines = situation.get("recall")
    if not request_budget or not isinstance(lines, RecallLines):
        return build(situation, None)
    rendered = {}
    rest = build({**situation, "recall": []}, rendered)
    fitted = yield ports.run_cpu_bound(_fit_beside, lines, rest, specs, request_budget,
                                       ports.settings.get("recall.min_tokens"))  # fmt: skip
    return build({**situation, "recall": fitted}, rendered)


def _fit_beside(lines, rest, specs, request_budget, floor):
    """`fit_to_request` beside the messages `rest` and the tool specs `specs` (blocking)."""
    rest_tokens = count_message_tokens(rest) + (count_tokens(json.dumps(specs)) if specs else 0)
    return fit_to_request(lines, rest_tokens, request_budget, floor)
