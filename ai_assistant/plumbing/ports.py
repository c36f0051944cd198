"""
The ports the core works through, and the plain implementations the core and tests use.

The core (memory, agent loop, tools, workspace, sleep) never imports Evennia. Everything it needs
from the outside world comes in through an `AssistantPorts` bundle:

- `state`: named plain-data documents (dicts/lists) - in the game, the NPC's `db` attributes;
- `clock`: the current time (UTC) and the game's clock;
- `settings`: a `conf.Settings` view;
- `llm`: an LLM client whose calls return Deferreds, or None in mechanical mode;
- `semantic`: the semantic memory store (mem0) whose calls return Deferreds, or None;
- `world`: the NPC's body in the game (say, emote, look), used on the reactor thread.

Rule for async core code: yield the port calls first, then read state, change it and `set` it
back with no yield in between, so no write is ever based on stale data.
"""

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.runtime import AssistantRuntime
from ai_assistant.plumbing.settings import Settings

# ----------------------------------------------------------------------------------------------
# Time


class Clock(Protocol):
    def now(self) -> datetime:
        """The current real time, timezone-aware UTC."""

    def game_now(self) -> datetime:
        """The current in-game time (used for sleep schedules)."""


class SystemClock:
    """Real time; game time equals real time unless the shell supplies a game clock."""

    def __init__(self, game_clock=None):
        self._game_clock = game_clock

    def now(self):
        return datetime.now(UTC)

    def game_now(self):
        return self._game_clock() if self._game_clock else self.now()


class FixedClock:
    """
    A clock for tests and benchmarks that only moves when told to.

    Args:
        start (datetime, optional): The starting time (default 2025-01-01 12:00 UTC).
    """

    def __init__(self, start=None):
        self.current = start or datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

    def now(self):
        return self.current

    def game_now(self):
        return self.current

    def advance(self, **delta):
        """Move forward by `timedelta(**delta)`, e.g. `advance(hours=2)`."""
        self.current += timedelta(**delta)
        return self.current


def iso(moment):
    """Format an aware datetime the way stored documents keep it: `2025-12-06T14:30:00Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text):
    """
    Parse a timestamp written by `iso` (or any ISO-8601 string) into an aware datetime.

    Returns:
        datetime or None: None when `text` is empty or unparseable.
    """
    if not text:
        return None
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# ----------------------------------------------------------------------------------------------
# State


class StateStore(Protocol):
    def get(self, name: str, default: Any = None) -> Any:
        """The named document (plain data). Callers `set` it back after changing it."""

    def set(self, name: str, value: Any, change: list | None = None) -> None:
        """
        Change the named document; it is persisted at the latest at the next `flush`.

        `change`, when the owner gives one, says what it did to the value it read
        (`plumbing.state_changes`): a store that logs every write may log that instead of the
        whole value. Applied to the document as it was, it must give `value`.
        """

    def flush(self) -> None:
        """Persist every change not yet persisted."""


class MemoryState:
    """
    In-memory `StateStore` for the core's tests and benchmarks.

    `get` returns the stored object itself (like the game's cached state), so a caller that
    forgets to `set` still sees its change here; `saves` counts writes so tests can check them.
    """

    def __init__(self, initial=None):
        self.data = copy.deepcopy(initial or {})
        self.saves = 0

    def get(self, name, default=None):
        documents.get(name)  # only registered documents exist
        if name not in self.data:
            return copy.deepcopy(default)
        return self.data[name]

    def set(self, name, value, change=None):
        documents.get(name)
        self.data[name] = value
        self.saves += 1

    def flush(self):
        """Nothing is ever pending here."""


# ----------------------------------------------------------------------------------------------
# LLM


class LLMError(Exception):
    """Base class of every failure an LLM call reports (its Deferred errbacks with one)."""


class LLMUnavailable(LLMError):
    """No call was made: mechanical mode, circuit breaker open, or emergency stop."""


class LLMTimeout(LLMError):
    """The endpoint did not answer in time (after retries)."""


class LLMBadResponse(LLMError):
    """The endpoint answered, but not with something usable."""


@dataclass
class ToolCall:
    """A tool call the model asked for. `arguments` is the raw JSON text the model produced."""

    name: str
    arguments: str = "{}"
    id: str = ""


@dataclass
class LLMReply:
    """One chat-completion answer."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    model: str | None = None


class LLMPort(Protocol):
    def complete(self, messages, *, tools=None, purpose="chat", **params):
        """
        Args:
            messages (list[dict]): OpenAI-style chat messages.
            tools (list[dict], optional): OpenAI tool specs for native tool calling.
            purpose (str): What the call is for (logged, and counted per purpose).
            **params: Per-call overrides (temperature, max_tokens, response_format...).

        Returns:
            Deferred[LLMReply]: errbacks with an `LLMError`.
        """


# ----------------------------------------------------------------------------------------------
# Semantic memory


class SemanticPort(Protocol):
    """The semantic tier (mem0). Every call runs off the reactor and returns a Deferred."""

    def add(self, text, *, metadata=None, infer=False):
        """Deferred[list[dict]]: the stored memories, each `{"id", "memory"}`."""

    def search(self, query, *, limit=10, filters=None):
        """Deferred[list[dict]]: `{"id", "memory", "score", "metadata"}`, best first."""

    def get(self, memory_id):
        """Deferred[dict or None]."""

    def delete(self, memory_id):
        """Deferred[None]."""

    def update(self, memory_id, text, *, metadata=None):
        """Deferred[dict or None]: rewrite a memory's text and merge `metadata` into its own."""

    def list(self, *, limit=100):
        """Deferred[list[dict]]."""


# ----------------------------------------------------------------------------------------------
# World


class WorldPort(Protocol):
    """The NPC's body in the game. Reactor thread only."""

    def say(self, text: str) -> None: ...

    def emote(self, text: str) -> None: ...

    def whisper(self, target: str, text: str) -> str | None:
        """Returns None on success, or a reason why it could not be done."""

    def describe_location(self) -> dict: ...

    def present(self) -> list[dict]:
        """Characters here: `{"id", "name", "is_player"}` each (the NPC itself excluded)."""


# ----------------------------------------------------------------------------------------------
# The bundle


def _no_log(message):
    return None


def in_worker_pool(func, *args, **kwargs):
    """
    Run computing work in the process's bounded CPU pool (`threads.run_cpu_bound`).

    Returns:
        Deferred: Fires on the reactor thread with the return value (or the exception).
    """
    # looked up when called: the pool module starts Twisted's reactor machinery on import
    from ai_assistant.plumbing import threads

    return threads.run_cpu_bound(func, *args, **kwargs)


@dataclass
class AssistantPorts:
    """
    Everything a core function needs to act for one assistant.

    Args:
        key (str): Stable, unique id of the assistant (scopes its semantic memories).
        name (str): The NPC's display name.
        state (StateStore): Its persistent documents.
        clock (Clock): Time.
        settings (Settings): Its settings (game-wide plus per-NPC overrides).
        llm (LLMPort, optional): None in mechanical mode.
        semantic (SemanticPort, optional): None when the semantic tier is off.
        world (WorldPort, optional): None outside the game.
        log (callable): `log(message)` for the game's log.
        run_cpu_bound (callable): `run_cpu_bound(func, *args, **kwargs) -> Deferred` runs
            computing work (ranking, embedding) off the reactor: the worker pool; tests pass a
            runner that works in place.
        runtime (AssistantRuntime): What it holds in memory only (the shell keeps one per
            assistant across rebuilt ports).
    """

    key: str
    name: str
    state: StateStore
    clock: Clock
    settings: Settings
    llm: LLMPort | None = None
    semantic: SemanticPort | None = None
    world: WorldPort | None = None
    log: Callable[[str], None] = _no_log
    run_cpu_bound: Callable[..., Any] = in_worker_pool
    runtime: AssistantRuntime = field(default_factory=AssistantRuntime)

    @property
    def mechanical(self):
        """True when no LLM is configured: LLM steps are skipped, everything else runs."""
        return self.llm is None
