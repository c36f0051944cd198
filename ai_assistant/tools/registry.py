"""
The tool registry: what the assistant can do, described once for the LLM, the ReAct loop and
the in-game commands generated from it.

A tool is a `Tool` subclass; the catalogue (`tools.catalogue`) lists every tool of the
assistant by reference and its `load_all_tools()` registers them (a game registers its own with
`register`). Its `run(ports, **params)` returns a result dict (or a Deferred firing one) that
always carries `"success"`. `execute_tool` is the one way to run a tool: it parses and
validates the arguments against the JSON schema, logs the `reasoning`, applies the cache and
the timeout, and turns every failure into a result the model (or the admin) can read and
correct - never an exception. Which tools a turn may run at all is decided by `tools.agency`
from each tool's `reach` and the turn's grant; `execute_tool` asks the grant to admit each call.
"""

import difflib
import json
import re
import time
from enum import StrEnum

import jsonschema
from twisted.internet import defer

from ai_assistant.plumbing.tool_calls import decode_arguments
from ai_assistant.tools.arguments import fit_arguments, former_call, takes_unknown
from ai_assistant.tools.arguments import refusal as argument_refusal

MAX_ARGUMENT_CHARS = 20000


class ToolCategory(StrEnum):
    """How the ReAct loop treats a tool."""

    SAFE_CHAIN = "safe_chain"  # read-only or harmless; the loop may chain several per tick
    TERMINAL = "terminal"  # ends the loop for this tick (e.g. speaking)
    DANGEROUS = "dangerous"  # at most one per tick, and only when an admin enabled them
    ASYNC_REQUIRED = "async_required"  # needs an external/deferred call (e.g. the LLM)


# While asleep the assistant is offered only these: the sleep-mode tools.
SLEEP_MODE_TOOLS = (
    "noop",
    "add_journal_entry",
    "review_journal",
    "search_facts",
    "store_memory",
)

# Kits: which situations offer a tool. A conversational turn offers the CONVERSATION kit (speech,
# lookups, journaling); the others come with autonomous and housekeeping passes, or when what
# was said asks for them (`KIT_TRIGGERS`). Kits keep the prompt lean; what a turn may run at all
# is its trust's business (`Tool.reach`, `tools.agency`), and both are chosen together by
# `agency.tool_set`: a tool the turn's trust does not permit is refused even when called by name.
CONVERSATION = "conversation"
WORKSPACE = "workspace"  # goals, projects, session memory, status, persona, sleep
MEMORY = "memory"  # writing and browsing long-term memory
KITS = (CONVERSATION, WORKSPACE, MEMORY)

# Reach: how far a tool's effects go, which decides who may have it run (`tools.agency`).
SCOPED = "scoped"  # stays in the conversation: speech to the speaker, lookups, journaling
LASTING = "lasting"  # lasting or wide: persona, session facts, goals, projects, sleep, reviews

# Words in what the assistant was told that ask for a kit (an explicit request).
KIT_TRIGGERS = {
    WORKSPACE: re.compile(
        r"\b(goals?|projects?|tasks?|plans?|todo|to-do|subtasks?|progress|prefer(?:s|ence)?|"
        r"guidelines?|status|go to sleep|sleep|rest|remember (?:that|this|my|i))\b",
        re.IGNORECASE,
    ),
    MEMORY: re.compile(
        r"\b(remember (?:this|that|it)|memor(?:y|ies)|scenes?|note (?:this|that|it|down)|"
        r"write (?:it|this|that) down)\b",
        re.IGNORECASE,
    ),
}


class Tool:
    """
    Base class of every tool.

    Class attributes:
        name (str): The tool's name, also its in-game command key.
        description (str): What it does, for the LLM and `help`.
        parameters (dict): JSON schema (type object) of its arguments, without `reasoning`.
        category (ToolCategory): How the ReAct loop treats it.
        family (str): The module family it belongs to (world, journal, goals...).
        timeout (float): Seconds before a deferred run is abandoned.
        cacheable (bool): Identical calls within `cache_ttl` reuse the first result.
        cache_ttl (float): Seconds a cached result lives.
        cache_scope (str): "tick" (cleared every tick) or "session".
        kit (str): The situations that offer it (`KITS`).
        aliases (tuple): Former names, still accepted from a model and as commands.
        former_arguments (dict): Arguments a former tool of this name took, each mapped to
            `"tool.argument"` that takes it now (`tools.arguments.former_call`).
        strict_arguments (bool): Refuse unknown arguments instead of dropping them; a tool
            that sets it says why in its class (`tools.arguments` holds the policy).
        reach (str): SCOPED (its effects stay in the conversation: a player's words may have
            it run) or LASTING (only the assistant's own turns and admins' orders). A game's
            own tool is LASTING unless it says otherwise.
        recipient_argument (str or None): The argument naming who private speech goes to; in
            a player's turn it must be that player.
        sourced (bool): It records what someone said (`source_entity`, `source_type`,
            `source_trust` arguments); in a player's turn the source is that player and the
            trust is capped at theirs.
    """

    name = ""
    description = ""
    parameters = {"type": "object", "properties": {}}
    category = ToolCategory.SAFE_CHAIN
    family = "misc"
    timeout = 30.0
    cacheable = False
    cache_ttl = 0.0
    cache_scope = "tick"
    kit = WORKSPACE
    aliases = ()
    former_arguments = {}
    strict_arguments = False
    reach = LASTING
    recipient_argument = None
    sourced = False

    def run(self, ports, **params):
        """
        Do the work.

        Args:
            ports (AssistantPorts): The assistant acting.
            **params: Validated arguments.

        Returns:
            dict or Deferred[dict]: The result, with a boolean `"success"`.
        """
        raise NotImplementedError

    def schema(self):
        """
        The argument schema as validated: ours plus the optional `reasoning` string (logged).
        """
        schema = json.loads(json.dumps(self.parameters))
        schema.setdefault("type", "object")
        props = schema.setdefault("properties", {})
        props["reasoning"] = {"type": "string"}
        return schema

    def validator(self):
        """
        A jsonschema validator of `schema()`, the schema checked once, not at every call
        (`jsonschema.validate` checks it each time: most of a fast tool's cost).
        """
        key = json.dumps(self.parameters, sort_keys=True)
        cached = self.__dict__.get("_validator")
        if cached is None or cached[0] != key:
            schema = self.schema()
            kind = jsonschema.validators.validator_for(schema)
            kind.check_schema(schema)
            cached = self._validator = (key, kind(schema))
        return cached[1]

    def offered_schema(self):
        """
        The argument schema as offered to the LLM: compact, without `reasoning` (every tool
        takes it; the system prompt says so once) and without `additionalProperties`.
        """
        schema = json.loads(json.dumps(self.parameters))
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        schema.pop("additionalProperties", None)
        return schema

    def spec(self):
        """The OpenAI function-calling spec of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.offered_schema(),
            },
        }


class ToolRegistry:
    """All known tools, by name."""

    def __init__(self):
        self._tools = {}
        self._aliases = {}

    def register(self, tool_class):
        """
        Register a tool class (usable as a decorator).

        Raises:
            ValueError: If the class has no name or the name is taken by another class.
        """
        tool = tool_class()
        if not tool.name:
            raise ValueError(f"{tool_class.__name__} has no name")
        existing = self._tools.get(tool.name)
        if type(existing) is tool_class:
            # the same class again (every cycle loads the catalogue): its instance stays, with
            # its argument validator, whose schema check costs more than most tools' work
            return tool_class
        if existing is not None and type(existing).__qualname__ != tool_class.__qualname__:
            raise ValueError(f"tool name {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        for alias in tool.aliases:
            self._aliases[alias] = tool.name
        return tool_class

    def get(self, name):
        """The tool instance called `name` (or by a former name), or None."""
        tool = self._tools.get(name)
        if tool is None and name in self._aliases:
            tool = self._tools.get(self._aliases[name])
        return tool

    def canonical(self, name):
        """The current name of a tool called `name` or by a former name (`name` if unknown)."""
        return self._aliases.get(name, name)

    def close_names(self, name, among=None, limit=4):
        """
        Tool names that look like `name` (a model's typo or invention).

        Args:
            name (str): The unknown name.
            among (iterable, optional): Names to choose from (default: every tool).
            limit (int): At most this many.
        """
        names = sorted(among) if among is not None else self.names()
        lowered = str(name or "").lower()
        close = difflib.get_close_matches(lowered, names, n=limit, cutoff=0.5)
        words = set(re.split(r"[_\W]+", lowered)) - {""}
        close += [other for other in names
                  if other not in close and words & set(other.split("_"))]
        return close[:limit]

    def all(self):
        """Every tool, sorted by family then name."""
        return sorted(self._tools.values(), key=lambda tool: (tool.family, tool.name))

    def names(self):
        return sorted(self._tools)

    def available(self, mode="awake", dangerous_enabled=False, only=None):
        """
        The tools offered to the LLM.

        Args:
            mode (str): "awake" or "sleep" (sleep offers only SLEEP_MODE_TOOLS).
            dangerous_enabled (bool): Whether DANGEROUS tools may be offered.
            only (iterable, optional): Restrict to these names (e.g. journal-only passes).
        """
        tools = self.all()
        if mode == "sleep":
            tools = [tool for tool in tools if tool.name in SLEEP_MODE_TOOLS]
        if only is not None:
            only = set(only)
            tools = [tool for tool in tools if tool.name in only]
        if not dangerous_enabled:
            tools = [tool for tool in tools if tool.category != ToolCategory.DANGEROUS]
        return tools


def lean_tools(tools, purpose, request_text=""):
    """
    The tools a turn offers the model, out of those it may use.

    Args:
        tools (list[Tool]): What the assistant may use now (`ToolRegistry.available`).
        purpose (str): The cycle's purpose: "conversation" offers the conversation kit plus
            the kits `request_text` asks for; any other purpose (autonomous and housekeeping
            passes) offers them all.
        request_text (str): What the assistant was told this turn.

    Returns:
        list[Tool]: The tools to describe to the model.
    """
    if purpose != "conversation":
        return list(tools)
    kits = {CONVERSATION} | {kit for kit, words in KIT_TRIGGERS.items()
                             if words.search(request_text or "")}
    return [tool for tool in tools if tool.kit in kits]


REGISTRY = ToolRegistry()


def register(tool_class):
    """Register `tool_class` in the global registry (a game's own tools; usable as a decorator)."""
    return REGISTRY.register(tool_class)


class ToolCache:
    """
    Results of cacheable tools, keyed by tool and canonical arguments.

    Args:
        clock (callable): Returns seconds (monotonic); injectable for tests.
    """

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._entries = {}

    @staticmethod
    def key(tool, params):
        return tool.name, json.dumps(params, sort_keys=True, default=str)

    def get(self, tool, params):
        entry = self._entries.get(self.key(tool, params))
        if entry is None:
            return None
        stored_at, scope, result = entry
        if self._clock() - stored_at > tool.cache_ttl:
            del self._entries[self.key(tool, params)]
            return None
        return result

    def put(self, tool, params, result):
        self._entries[self.key(tool, params)] = (self._clock(), tool.cache_scope, result)

    def new_tick(self):
        """Forget tick-scoped results."""
        self._entries = {k: v for k, v in self._entries.items() if v[1] != "tick"}

    def invalidate(self, family=None):
        """Forget everything (or one family's results) after a write changed what they saw."""
        if family is None:
            self._entries.clear()
            return
        names = {tool.name for tool in REGISTRY.all() if tool.family == family}
        self._entries = {k: v for k, v in self._entries.items() if k[0] not in names}


def error_result(message, **extra):
    """A failed tool result with a message the model or admin can act on."""
    return {"success": False, "error": message, **extra}


def unknown_tool_result(name, available, registry=None):
    """
    The result of calling a tool that does not exist (or is not available now).

    Args:
        name (str): The name the model used.
        available (iterable): The names it may use now.
        registry (ToolRegistry, optional): Where to look for close names (the global one).
    """
    registry = registry or REGISTRY
    available = sorted(available)
    close = registry.close_names(name, among=available)
    message = f"unknown tool '{name}'"
    if close:
        message += f"; did you mean: {', '.join(close)}?"
    return error_result(f"{message} Available tools: {', '.join(available)}", close_names=close)


def parse_arguments(arguments):
    """
    Turn raw arguments (JSON text, double-encoded JSON text, or a dict) into a dict.

    Returns:
        tuple: `(params, None)` or `(None, error message)`.
    """
    if isinstance(arguments, str) and len(arguments) > MAX_ARGUMENT_CHARS:
        return None, f"arguments are too long ({len(arguments)} > {MAX_ARGUMENT_CHARS} chars)"
    return decode_arguments(arguments)


def _strict_refusal(tool, params):
    """For a tool that takes no unknown argument (`strict_arguments`), why a call is refused."""
    if not tool.strict_arguments or takes_unknown(tool):
        return None
    takes = tool.parameters.get("properties") or {}
    stray = sorted(set(params) - set(takes) - {"reasoning"})
    if not stray:
        return None
    return (f"{tool.name}: refused, it does not take {', '.join(map(repr, stray))} (it takes "
            f"{', '.join(takes) or 'nothing'}, and guesses at nothing).")


def _former_tool(tool, params):
    """The tool and arguments a call with a former tool's arguments means (else as called)."""
    former = former_call(tool, params)
    target = REGISTRY.get(former[0]) if former else None
    if target is None or target.reach != tool.reach:  # never widen what a turn may do
        return tool, params, []
    mapping = former[1]
    params = {mapping.get(key) or key: value for key, value in params.items()}
    named = ", ".join(f"'{old}'" for old in mapping)
    return target, params, [f"{tool.name} takes no {named}: ran {target.name}, which does"]


def execute_tool(tool, ports, arguments, *, cache=None, allow_dangerous=False, reactor=None,
                 grant=None):
    """
    Run one tool safely.

    Args:
        tool (Tool or str): The tool or its name.
        ports (AssistantPorts): Who is acting.
        arguments (str or dict): Raw arguments (JSON text from the model, or a dict).
        cache (ToolCache, optional): Where cacheable results live.
        allow_dangerous (bool): Whether a DANGEROUS tool may run.
        reactor (IReactorTime, optional): For the timeout; the global reactor by default.
        grant (agency.Grant, optional): The turn's trust; its `admit(tool, params)` refuses
            the call or limits its arguments (none: the assistant's own call).

    Returns:
        Deferred[dict]: Always fires with a result dict (never errbacks).
    """
    if isinstance(tool, str):
        name = tool
        tool = REGISTRY.get(name)
        if tool is None:
            return defer.succeed(unknown_tool_result(name, REGISTRY.names(), REGISTRY))
    params, error = parse_arguments(arguments)
    if error:
        return defer.succeed(error_result(error))
    tool, params, notes = _former_tool(tool, params)
    error = _strict_refusal(tool, params)
    if error:
        return defer.succeed(error_result(error))
    params, fitted = fit_arguments(tool, params)
    notes += fitted
    reasoning = params.pop("reasoning", None)
    error = argument_refusal(tool, params)
    if error:
        return defer.succeed(error_result(error, **({"note": "; ".join(notes)} if notes else {})))
    if tool.category == ToolCategory.DANGEROUS and not allow_dangerous:
        return defer.succeed(error_result(f"'{tool.name}' is a dangerous tool and is disabled"))
    if grant is not None:
        params, refusal, limited = grant.admit(tool, params)
        if refusal:
            ports.log(f"{ports.name}: refused {tool.name}: {refusal}")
            return defer.succeed(error_result(refusal, refused=True))
        notes += limited
    if reasoning:
        ports.log(f"{ports.name} -> {tool.name}: {str(reasoning)[:300]}")
    if cache is not None and tool.cacheable:
        cached = cache.get(tool, params)
        if cached is not None:
            return defer.succeed({**cached, "cached": True})

    deferred = defer.maybeDeferred(tool.run, ports, **params)
    if not deferred.called:
        if reactor is None:
            from twisted.internet import reactor
        deferred.addTimeout(tool.timeout, reactor)

    def _done(result):
        if not isinstance(result, dict) or "success" not in result:
            result = {"success": True, "result": result}
        if notes:
            result = {**result, "note": "; ".join([*notes, *filter(None, [result.get("note")])])}
        if cache is not None and result.get("success"):
            if tool.cacheable:
                cache.put(tool, params, result)
            else:
                # a tool that may have written something: cached reads could now be stale
                cache.invalidate()
        return result

    def _failed(failure):
        if failure.check(defer.TimeoutError, defer.CancelledError):
            message = f"'{tool.name}' timed out after {tool.timeout:g}s"
        else:
            message = f"'{tool.name}' failed: {failure.getErrorMessage() or failure.type.__name__}"
        ports.log(f"{ports.name}: tool {message}")
        return error_result(message)

    deferred.addCallbacks(_done, _failed)
    return deferred
