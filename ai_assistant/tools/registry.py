"""
The tool registry: what the assistant can do, described once for the LLM, the ReAct loop and
the in-game commands generated from it.

A tool is a `Tool` subclass; the catalogue (`tools.catalogue`) lists every tool of the
assistant by reference and its `load_all_tools()` registers them (a game registers its own with
`register`). Its `run(ports, **params)` returns a result dict (or a Deferred firing one) that
always carries `"success"`. `execute_tool` is the one way to run a tool: it parses and
validates the arguments against the JSON schema, logs the `reasoning`, applies the cache and
the timeout, and turns every failure into a result the model (or the admin) can read and
correct - never an exception.
"""

import json
import time
from enum import StrEnum

import jsonschema
from twisted.internet import defer

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
    "recall_memories",
    "store_memory",
)


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
        """The argument schema as offered to the LLM: ours plus the `reasoning` string."""
        schema = json.loads(json.dumps(self.parameters))
        schema.setdefault("type", "object")
        props = schema.setdefault("properties", {})
        props["reasoning"] = {
            "type": "string",
            "description": "Why you are calling this tool (logged, not shown to players).",
        }
        return schema

    def spec(self):
        """The OpenAI function-calling spec of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.schema(),
            },
        }


class ToolRegistry:
    """All known tools, by name."""

    def __init__(self):
        self._tools = {}

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
        if existing is not None and type(existing).__qualname__ != tool_class.__qualname__:
            raise ValueError(f"tool name {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool_class

    def get(self, name):
        """The tool instance called `name`, or None."""
        return self._tools.get(name)

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


def parse_arguments(arguments):
    """
    Turn raw arguments (JSON text or dict) into a dict.

    Returns:
        tuple: `(params, None)` or `(None, error message)`.
    """
    if arguments is None or arguments == "":
        return {}, None
    if isinstance(arguments, dict):
        return dict(arguments), None
    if not isinstance(arguments, str):
        return None, f"arguments must be a JSON object, not {type(arguments).__name__}"
    if len(arguments) > MAX_ARGUMENT_CHARS:
        return None, f"arguments are too long ({len(arguments)} > {MAX_ARGUMENT_CHARS} chars)"
    try:
        params = json.loads(arguments)
    except json.JSONDecodeError as err:
        return None, f"arguments are not valid JSON ({err.msg} at char {err.pos})"
    if not isinstance(params, dict):
        return None, "arguments must be a JSON object like {\"key\": \"value\"}"
    return params, None


def validate_arguments(tool, params):
    """
    Check `params` against the tool's schema.

    Returns:
        str or None: A readable error, or None when valid.
    """
    try:
        jsonschema.validate(params, tool.schema())
    except jsonschema.ValidationError as err:
        where = ".".join(str(part) for part in err.absolute_path)
        return f"invalid argument {where}: {err.message}" if where else err.message
    return None


def execute_tool(tool, ports, arguments, *, cache=None, allow_dangerous=False, reactor=None):
    """
    Run one tool safely.

    Args:
        tool (Tool or str): The tool or its name.
        ports (AssistantPorts): Who is acting.
        arguments (str or dict): Raw arguments (JSON text from the model, or a dict).
        cache (ToolCache, optional): Where cacheable results live.
        allow_dangerous (bool): Whether a DANGEROUS tool may run.
        reactor (IReactorTime, optional): For the timeout; the global reactor by default.

    Returns:
        Deferred[dict]: Always fires with a result dict (never errbacks).
    """
    if isinstance(tool, str):
        name = tool
        tool = REGISTRY.get(name)
        if tool is None:
            known = ", ".join(REGISTRY.names())
            return defer.succeed(error_result(f"unknown tool '{name}'. Known tools: {known}"))
    params, error = parse_arguments(arguments)
    if error:
        return defer.succeed(error_result(error))
    reasoning = params.pop("reasoning", None)
    error = validate_arguments(tool, params)
    if error:
        return defer.succeed(error_result(error))
    if tool.category == ToolCategory.DANGEROUS and not allow_dangerous:
        return defer.succeed(error_result(f"'{tool.name}' is a dangerous tool and is disabled"))
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
