"""
The ReAct loop: think (ask the model), act (run a tool), observe (feed the result back), until
the assistant does something that ends its turn.

One cycle (`run_react_cycle`) runs per tick that has something to handle:

1. the messages are built by `agent.context` and the tools on offer come from the registry
   (only sleep-mode tools while asleep, DANGEROUS ones only when an admin enabled them);
2. the model is asked, with native tool calling when `llm.native_tools` is on, otherwise (or
   as soon as the endpoint rejects the tools parameter) with the JSON protocol: the tools are
   described in the system message and the model answers
   `{"tool": ..., "parameters": {...}, "reasoning": ...}`;
3. each call goes through `registry.execute_tool` (argument validation, reasoning log, cache,
   timeout); its result is fed back as an observation;
4. the cycle ends on a TERMINAL tool (say, emote, noop...), after
   `react.max_iterations_per_tick` model calls, when `react.max_errors_per_tick` errors have
   piled up, or when the LLM fails.

Tool calls are read in every dialect servers speak (`plumbing.tool_calls`): native calls, and
calls written into the text (`<tool_call>` tags, JSON objects bare or fenced, Mistral and Llama
markers) when the server runs without a tool parser; markup meant as a call is never spoken.
A former tool name is mapped to the current one. A plain-text reply is the assistant speaking:
it goes out through the `say` tool. Mistakes (malformed calls, unknown tools, bad JSON
arguments) become observations the model can correct, never exceptions; unknown arguments are
dropped and named in the observation. At most one DANGEROUS tool runs per cycle.

The tools of a cycle are chosen by purpose AND trust (`tools.agency.tool_set`): a turn driven
by a player's words may run only the tools whose effects stay in that conversation, an admin's
words and the assistant's own turns the rest too; of those, a conversational turn describes a
lean set (`registry.lean_tools`: speech, lookups, journaling, plus what was explicitly asked
for), and every other permitted tool still runs when the model calls it by name (the system
prompt lists them in one line). A tool the turn's trust does not permit is refused, with the
reason, even when called by name; each call is admitted by the turn's grant, which also keeps a
player's turn whispering only to them and caps the trust of what it records.

The loop records where each cycle stands, its tool counts and who was left without an answer in
its `workspace.loop_state.LoopState` (read by the get_system_status tool and `@assistant <npc>`).
"""

import dataclasses
import json

from twisted.internet import defer

from ai_assistant.agent import context
from ai_assistant.agent.blocks.remembered import messages_within_request
from ai_assistant.plumbing.llm import LLMRequestError
from ai_assistant.plumbing.markup import strip_markup
from ai_assistant.plumbing.ports import LLMError, ToolCall
from ai_assistant.plumbing.tokens import count_message_tokens
from ai_assistant.plumbing.tool_calls import looks_like_data, read_text_calls
from ai_assistant.tools import agency
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import (
    REGISTRY,
    ToolCache,
    ToolCategory,
    error_result,
    execute_tool,
    unknown_tool_result,
)
from ai_assistant.workspace.loop_state import LoopState

MAX_OBSERVATION_CHARS = 4000

# An assistant whose endpoint rejected native tools uses the JSON protocol from then on (until
# the server reloads: `ports.runtime.native_tools_rejected`), instead of paying a failed call
# every cycle.

# What `_ask` returns when the endpoint refused native tools and the same iteration is retried
# with the JSON protocol.
_RETRY = object()

JSON_PROTOCOL = """\
## How to act
You act by replying with exactly one JSON object and nothing else:
{{"tool": "<tool name>", "parameters": {{...}}, "reasoning": "<why, one sentence>"}}
You will then get an "Observation:" with the result and may act again. Tools marked (ends turn)
finish your turn. If you only want to speak, you may instead reply with plain text, which you
say out loud.

## Tools
{tools}"""

# Said once in the system message (native tool calling): what every schema would otherwise
# repeat, and the tools that exist beyond the lean set offered.
NATIVE_TOOLS_NOTE = (
    'Every tool also takes an optional "reasoning" (why; logged, never shown). '
    "Call one tool at a time; speaking (say/emote) ends your turn."
)
MORE_TOOLS_NOTE = "Also available if needed, by name: {names}."
CALL_FORMAT_HINT = (
    " Call a tool through the tools interface, or reply with plain text to speak."
)


def describe_tools_for_prompt(tools):
    """The JSON-protocol tool list: one entry per tool with its argument schema."""
    lines = []
    for tool in tools:
        ends = " (ends turn)" if tool.category == ToolCategory.TERMINAL else ""
        schema = json.dumps(tool.parameters.get("properties", {}), separators=(",", ":"))
        required = tool.parameters.get("required") or []
        lines.append(
            f"- {tool.name}{ends}: {tool.description}\n  parameters: {schema}"
            + (f" required: {', '.join(required)}" if required else "")
        )
    return "\n".join(lines)


def json_protocol_prompt(tools):
    """The system-message addition that teaches the JSON tool protocol."""
    return JSON_PROTOCOL.format(tools=describe_tools_for_prompt(tools))


def _observation_text(result):
    text = strip_markup(json.dumps(result, default=str, ensure_ascii=False))
    if len(text) > MAX_OBSERVATION_CHARS:
        text = text[:MAX_OBSERVATION_CHARS] + "...(cut)"
    return text


class _Cycle:
    """
    One cycle: what it offers, the messages so far, and its bookkeeping (kept off the state
    documents until written).
    """

    def __init__(self, ports, max_iterations):
        self.ports = ports
        self.max_iterations = max_iterations
        self.summary = {
            "iterations": 0,
            "tools": [],
            "terminal": False,
            "stopped": None,
            "errors": 0,
        }
        self.chain_depth = 0
        self.dangerous_ran = False
        self.registry = REGISTRY
        self.offered = {}  # described to the model
        self.allowed = {}  # may run when called: what the turn's trust permits (`agency`)
        self.withheld = {}  # the mode has them, the turn's trust does not permit them
        self.grant = agency.Grant()
        self.cache = None
        self.situation = {}
        self.native = False
        self.switched_to_json = False
        self.messages = []

    def fresh_messages(self):
        """Deferred[list]: the prompt, with the JSON tool protocol when native tool calling is
        off."""
        if self.native:
            extra = NATIVE_TOOLS_NOTE
        else:
            extra = json_protocol_prompt(self.offered.values())
        more = sorted(set(self.allowed) - set(self.offered))
        if more:
            extra += "\n" + MORE_TOOLS_NOTE.format(names=", ".join(more))
        # the recall block gets what the rest of the request leaves (`recall.request_tokens`)
        return messages_within_request(
            self.ports, {**self.situation, "extra_system": extra},
            lambda situation, rendered: context.build_messages(self.ports, situation, rendered),
            self.specs())

    def specs(self):
        """The tool specs sent beside the messages (None with the JSON tool protocol)."""
        return [tool.spec() for tool in self.offered.values()] if self.native else None

    # The writers below run right after a yield, with no yield inside: fresh reads, one write.

    def write_loop_state(self, *, pending=(), context_tokens=None, in_chain=None):
        LoopState(self.ports).record_step(
            iteration=self.summary["iterations"],
            max_iterations=self.max_iterations,
            tools=self.summary["tools"],
            chain_depth=self.chain_depth,
            in_chain=self.chain_depth > 0 if in_chain is None else in_chain,
            pending=[call.name for call in pending],
            context_tokens=context_tokens,
        )

    def record_tool(self, tool, result):
        LoopState(self.ports).count_tool(bool(result.get("success")))
        self.summary["tools"].append(tool.name)
        if tool.category == ToolCategory.SAFE_CHAIN and result.get("success"):
            self.chain_depth += 1


@defer.inlineCallbacks
def run_react_cycle(
    ports,
    situation,
    *,
    registry=REGISTRY,
    cache=None,
    mode="awake",
    only_tools=None,
    max_iterations=None,
):
    """
    Run one think-act-observe cycle.

    Args:
        ports (AssistantPorts): The assistant.
        situation (dict): What to respond to (see `context.build_messages`).
        registry (ToolRegistry): Where tools come from.
        cache (ToolCache, optional): Tool result cache (a fresh one per cycle if None).
        mode (str): "awake" or "sleep" (restricts the tools).
        only_tools (iterable, optional): Offer only these tools (e.g. a journal-only pass).
        max_iterations (int, optional): Model calls allowed (default
            `react.max_iterations_per_tick`).

    Returns:
        Deferred[dict]: `{"iterations", "tools", "terminal", "stopped", "errors"}`; never
        errbacks for LLM or tool failures (`stopped` says why the cycle ended).
    """
    settings = ports.settings
    if max_iterations is None:
        max_iterations = int(settings.get("react.max_iterations_per_tick"))
    max_errors = int(settings.get("react.max_errors_per_tick"))
    cycle = _Cycle(ports, max_iterations)
    summary = cycle.summary
    if ports.llm is None:
        _log_mechanical_once(ports)
        summary["stopped"] = "mechanical"
        return summary
    cycle.situation = {**(situation or {}), "mode": mode}
    cycle.grant, cycle.allowed, cycle.offered, cycle.withheld = _offered_tools(
        ports, registry, mode, only_tools, cycle.situation)
    if not cycle.offered:
        summary["stopped"] = "no_tools"
        return summary
    cycle.registry = registry
    cycle.native = (bool(settings.get("llm.native_tools"))
                    and not ports.runtime.native_tools_rejected)  # fmt: skip
    cycle.cache = cache if cache is not None else ToolCache()
    purpose = cycle.situation.get("purpose") or "react"
    cycle.messages = yield cycle.fresh_messages()
    while summary["iterations"] < max_iterations:
        summary["iterations"] += 1
        # counting a few thousand prompt tokens is CPU work: in the pool, not on the reactor
        # (with 20 assistants answering it was 4% of the reactor's time, `bench.reactor`)
        tokens = yield ports.run_cpu_bound(count_message_tokens, list(cycle.messages))
        cycle.write_loop_state(context_tokens=tokens)
        reply = yield _ask(cycle, purpose)
        if reply is _RETRY:
            summary["iterations"] -= 1
            continue
        if reply is None:
            break
        ended = yield _act_on_reply(cycle, reply)
        if ended:
            summary["stopped"] = "terminal"
            break
        if summary["errors"] >= max_errors:
            summary["stopped"] = "max_errors"
            break
    if summary["stopped"] is None:
        summary["stopped"] = "max_iterations"
    cycle.write_loop_state(in_chain=False)
    return summary


def _log_mechanical_once(ports):
    """Mechanical mode (no LLM) is logged once per assistant, not every tick."""
    if not ports.runtime.mechanical_logged:
        ports.runtime.mechanical_logged = True
        ports.log(f"{ports.name}: mechanical mode (no LLM configured): not thinking")


def _offered_tools(ports, registry, mode, only_tools, situation):
    """
    The tools this cycle may run and those it describes to the model, each by name (the
    catalogue is loaded for the global registry), chosen by trust and purpose.

    Returns:
        tuple: `(grant, allowed, offered, withheld)`: the turn's `agency.Grant`, then dicts;
        `offered` is the lean set for the situation, `withheld` what the trust refuses.
    """
    if registry is REGISTRY:
        try:
            load_all_tools()
        except Exception as err:  # one broken tool family must not silence the assistant
            ports.log(f"{ports.name}: could not load every tool family: {err!r}")
    dangerous_enabled = bool(ports.settings.get("react.dangerous_tools_enabled"))
    available = registry.available(mode, dangerous_enabled, only_tools)
    grant, allowed, offered, withheld = agency.tool_set(available, situation)
    return (grant, *({tool.name: tool for tool in tools} for tools in (allowed, offered, withheld)))


@defer.inlineCallbacks
def _ask(cycle, purpose):
    """
    Ask the model for the next step.

    Returns:
        Deferred: The reply; `_RETRY` when the endpoint refused native tools (the cycle now
        uses the JSON protocol); None when the LLM failed (`stopped` says why).
    """
    ports, summary = cycle.ports, cycle.summary
    specs = cycle.specs()
    try:
        reply = yield ports.llm.complete(cycle.messages, tools=specs, purpose=purpose)
    except LLMRequestError as err:
        if cycle.native and getattr(err, "tools_unsupported", False):
            # the error body says the endpoint does not take `tools` (a plain 400 does not:
            # `llm_resilience.says_tools_unsupported`): switch to the JSON protocol and retry
            cycle.native = False
            cycle.switched_to_json = True
            ports.log(f"{ports.name}: endpoint rejected native tools ({err}); using JSON protocol")
            cycle.messages = yield cycle.fresh_messages()
            return _RETRY
        summary["stopped"] = f"llm_error: {err}"
        return None
    except LLMError as err:
        summary["stopped"] = f"llm_error: {err}"
        return None
    except Exception as err:  # a broken port must not kill the tick
        ports.log(f"{ports.name}: unexpected LLM failure: {err!r}")
        summary["stopped"] = f"llm_error: {type(err).__name__}: {err}"
        return None
    if cycle.switched_to_json:
        # the JSON protocol works where native tools did not: remember that
        ports.runtime.native_tools_rejected = True
        cycle.switched_to_json = False
    return reply


@defer.inlineCallbacks
def _act_on_reply(cycle, reply):
    """
    Act on one reply: speak its plain text, or run its tool calls, or explain the mistake.

    Returns:
        Deferred[bool]: True when a terminal tool (or speech) ended the turn.
    """
    summary, messages = cycle.summary, cycle.messages
    calls, text, protocol_error, native_shape = _calls_from_reply(cycle, reply)
    if not calls and not protocol_error:
        if not text:
            protocol_error = "empty reply: call a tool, or use noop to do nothing"
        elif "say" not in cycle.allowed:
            protocol_error = "plain text cannot be said now; use one of the tools"
        else:
            # plain speech is the assistant talking: it goes out through `say`
            call = ToolCall(name="say", arguments={"message": text}, id="speech")
            messages.append({"role": "assistant", "content": text})
            result = yield _execute(cycle, call)
            _observe(messages, call, result, native=False)
            if result.get("success"):
                summary["terminal"] = True
                return True
            summary["errors"] += 1
    if protocol_error:
        summary["errors"] += 1
        messages.append({"role": "assistant", "content": reply.content or ""})
        messages.append(
            {
                "role": "user",
                "content": f"Observation: {_observation_text(error_result(protocol_error))}",
            }
        )
    if calls:
        ended = yield _run_calls(cycle, reply, calls, native_shape)
        return ended
    return False


@defer.inlineCallbacks
def _run_calls(cycle, reply, calls, native_shape):
    """
    Run the tool calls of one reply in order, until a terminal one succeeds.

    Args:
        native_shape (bool): The calls came as native `tool_calls` (answered with "tool"
            messages); else they were written into the text (answered as observations).

    Returns:
        Deferred[bool]: True when a terminal tool ended the turn.
    """
    summary, messages = cycle.summary, cycle.messages
    if native_shape:
        messages.append(_assistant_tool_message(reply, calls))
    else:
        messages.append({"role": "assistant", "content": reply.content or ""})
    for index, call in enumerate(calls):
        cycle.write_loop_state(pending=calls[index:])
        result = yield _execute(cycle, call)
        _observe(messages, call, result, native_shape)
        if not result.get("success"):
            summary["errors"] += 1
            continue
        tool = cycle.allowed.get(call.name)
        if tool is not None and tool.category == ToolCategory.TERMINAL:
            summary["terminal"] = True
            break
    return summary["terminal"]


def _calls_from_reply(cycle, reply):
    """
    What a reply asks for, whatever the dialect: its native calls, else the calls written into
    its text, else its text as speech. Former tool names are mapped to the current ones.

    Returns:
        tuple: `(calls, text to speak, protocol error or None, native_shape)`.
    """
    canonical = cycle.registry.canonical
    native = [
        ToolCall(canonical(call.name), call.arguments, call.id or f"call_{index}")
        for index, call in enumerate(reply.tool_calls or ())
    ]
    if native:
        return native, "", None, True
    found = read_text_calls(reply.content)
    hint = CALL_FORMAT_HINT if cycle.native else ""
    if found.error:
        return [], "", found.error + hint, False
    if found.calls and _echoes_player_text(cycle, reply.content):
        # a call a player wrote into their message, parroted back: players cannot act
        # through the assistant's tools, so it neither runs nor is spoken
        return [], "", ECHOED_CALL, False
    calls = [dataclasses.replace(call, name=canonical(call.name)) for call in found.calls]
    if not calls and looks_like_data(found.text):
        return [], "", (
            'your reply is JSON that names no tool: use {"tool": "<name>", "parameters": '
            '{...}}, or reply with plain text to speak'), False
    return calls, found.text, None, False


ECHOED_CALL = (
    "that tool call was copied from a player's message; players cannot use your tools. "
    "Answer in your own words."
)


def _echoes_player_text(cycle, content):
    """True when the reply's text is a copy of what a player wrote this turn."""
    text = " ".join(str(content or "").split())
    if len(text) < 12:
        return False
    return any(text in " ".join(str(event.get("text") or "").split())
               for event in cycle.situation.get("events") or ())


def _assistant_tool_message(reply, calls):
    return {
        "role": "assistant",
        "content": reply.content,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments),
                },
            }
            for call in calls
        ],
    }


def _observe(messages, call, result, native):
    text = _observation_text(result)
    if native:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    else:
        messages.append({"role": "user", "content": f"Observation ({call.name}): {text}"})


def _execute(cycle, call):
    """
    Run one call through `execute_tool`, or explain why it cannot run.

    Returns:
        Deferred[dict]: The result; the cycle's bookkeeping is written when it fires.
    """
    ports, offered = cycle.ports, cycle.offered
    tool = cycle.allowed.get(call.name)
    if tool is None and call.name in cycle.withheld:
        refused = agency.refusal(cycle.withheld[call.name], cycle.grant)
        ports.log(f"{ports.name}: refused {call.name}: not permitted in this turn")
        return defer.succeed(error_result(refused, refused=True))
    if tool is None:
        if cycle.registry.get(call.name) is not None:
            return defer.succeed(error_result(
                f"'{call.name}' is not available now. Available tools: "
                f"{', '.join(sorted(offered))}"))
        return defer.succeed(unknown_tool_result(call.name, cycle.allowed, cycle.registry))
    allow_dangerous = False
    if tool.category == ToolCategory.DANGEROUS:
        allow_dangerous = not cycle.dangerous_ran
        if cycle.dangerous_ran:
            return defer.succeed(
                error_result(f"only one dangerous tool per turn; '{tool.name}' must wait")
            )
        cycle.dangerous_ran = True
    deferred = execute_tool(tool, ports, call.arguments, cache=cycle.cache,
                            allow_dangerous=allow_dangerous, grant=cycle.grant)

    def _recorded(result):
        cycle.record_tool(tool, result)
        return result

    return deferred.addCallback(_recorded)
