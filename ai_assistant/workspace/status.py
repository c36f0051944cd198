"""
An assistant's status, in one place: what it sees of itself, what its admins and the memory
inspector see of it.

Every function here reads the assistant through its ports and the stores' owners and returns
plain text or data; the callers (a tool, `@assistant`, the inspector) only render it:

- `system_status`: the `get_system_status` tool (below);
- `status_text`: `@assistant <npc>` (with `provider_line` and `settings_problem_lines`, which
  `@assistant/config` shows too);
- `inspector_status` and `tier_counts`: the memory inspector's status header;
- `format_patrol_report` and `format_nodes_overview`: `@assistant/patrol` and `@assistant/nodes`.

What each sleep changed is not status but a store of its own (`sleep.reports`).

`system_status` is what the `get_system_status` tool returns: token usage of the context window
with an advisory level, and the ReAct loop's own counters, read from what the loop records
(`workspace.loop_state.LoopState`: the running cycle and the session's tool metrics); when the
loop has not yet recorded the size of the last prompt it sent, the conversation history
(`memory.conversation`) is counted instead.

`update_system_prompt` lets the assistant rewrite its own behavioural guidelines, logging why and
keeping each change as a numbered version with its text (`memory.persona.Persona.rewrite`),
which admins list and revert with `@assistant/persona/history` and `/revert`. The admins'
instructions are never written by anything here: they always take precedence and the assistant
cannot change them.
"""

from twisted.internet import defer

from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.corrections import audit_trail, is_wrong
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.nodes import ACTIVE, DEAD, DYING, PARSE_FAILED, Nodes, cluster_members
from ai_assistant.memory.patrol_record import PatrolRecord
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.memory.persona import Persona
from ai_assistant.memory.provenance import is_player_sourced
from ai_assistant.plumbing.llm import LLMStats, mask_secret
from ai_assistant.plumbing.ports import iso
from ai_assistant.workspace.goals import Goals
from ai_assistant.workspace.loop_state import LoopState
from ai_assistant.workspace.mode import Mode, long_tick
from ai_assistant.workspace.projects import Projects
from ai_assistant.workspace.session_memory import MEMORY_TYPES, SessionMemory

MAX_REASONING_CHARS = 500

ADVISORY_MESSAGES = {
    "normal": "Sufficient context available",
    "warning": "Context filling up: consider wrapping up",
    "critical": "Near the context limit: respond immediately",
}


class SystemPromptError(ValueError):
    """A system-prompt change was refused; the message says why. Nothing was changed."""


# ----------------------------------------------------------------------------------------------
# Self-monitoring


def _count(value, default=0):
    """A non-negative int from a state value that may be missing or damaged."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return default
    return int(value)


def _names(value):
    return [str(item) for item in value] if isinstance(value, list | tuple) else []


def count_history_tokens(history):
    """
    Tokens in a list of chat messages: the agent's tokenizer when it is available, else the
    usual 4-characters-per-token estimate.

    Args:
        history (list[dict]): `{"role", "content"}` messages.

    Returns:
        int: The estimate.
    """
    messages = [m for m in history or [] if isinstance(m, dict)]
    try:
        # imported lazily: the tokenizer is optional for this module and loads an encoding
        from ai_assistant.plumbing.tokens import count_message_tokens
    except ImportError:
        count_message_tokens = None
    if count_message_tokens is not None:
        return int(count_message_tokens(messages))
    chars = sum(len(str(m.get("role") or "")) + len(str(m.get("content") or "")) for m in messages)
    return chars // 4


def token_advisory(usage_percentage, warning=60, critical=80):
    """
    The specification's advisory levels: normal below `warning`%, warning below `critical`%,
    critical from there on.

    Returns:
        dict: `{"level", "message", "threshold"}`; `threshold` is the percentage the next level
        starts at (for critical, the one it passed).
    """
    if usage_percentage >= critical:
        level, threshold = "critical", critical
    elif usage_percentage >= warning:
        level, threshold = "warning", critical
    else:
        level, threshold = "normal", warning
    return {"level": level, "message": ADVISORY_MESSAGES[level], "threshold": threshold}


def token_usage(ports):
    """
    How full the context window is.

    Uses the size of the last prompt the loop sent (`loop_state.last_context_tokens`) when it
    recorded one (non-zero), else counts the conversation history.

    Returns:
        dict: `{"estimated_used", "model_limit", "available", "usage_percentage"}`.
    """
    used = _count(LoopState(ports).current().get("last_context_tokens"))
    if not used:  # 0 is the loop's "not measured yet": no real prompt is empty
        used = count_history_tokens(Conversation(ports).history())
    limit = _count(ports.settings.get("llm.context_limit")) or 1
    return {
        "estimated_used": used,
        "model_limit": limit,
        "available": max(limit - used, 0),
        "usage_percentage": round(used * 100 / limit, 1),
    }


def system_status(ports):
    """
    The assistant's view of itself, in the specification's shape (the `get_system_status` result).

    Args:
        ports (AssistantPorts): The assistant.

    Returns:
        dict: `{"success", "timestamp", "token_usage", "token_advisory", "loop_state",
        "session_metrics", "chain_state"}`.
    """
    record = LoopState(ports)
    loop, metrics = record.current(), record.metrics()

    usage = token_usage(ports)
    advisory = token_advisory(
        usage["usage_percentage"],
        warning=ports.settings.get("workspace.status.warning_percent"),
        critical=ports.settings.get("workspace.status.critical_percent"),
    )
    tools = _names(loop.get("tools_this_cycle"))
    max_iterations = _count(
        loop.get("max_iterations"),
        default=ports.settings.get("react.max_iterations_per_tick"),
    )
    return {
        "success": True,
        "timestamp": iso(ports.clock.now()),
        "token_usage": usage,
        "token_advisory": advisory,
        "loop_state": {
            "iteration": _count(loop.get("iteration")),
            "max_iterations": max_iterations,
            "tools_this_cycle": tools,
            "tool_count_this_cycle": _count(
                loop.get("tool_count_this_cycle"), default=len(tools)
            ),
        },
        "session_metrics": {
            "total_tool_calls": _count(metrics.get("total_tool_calls")),
            "successful_calls": _count(metrics.get("successful_calls")),
            "failed_calls": _count(metrics.get("failed_calls")),
            "session_start": metrics.get("session_start"),
        },
        "chain_state": {
            "in_chain": bool(loop.get("in_chain", False)),
            "chain_depth": _count(loop.get("chain_depth")),
            "pending_tools": _names(loop.get("pending_tools")),
        },
    }


# ----------------------------------------------------------------------------------------------
# Self-modification


def update_system_prompt(ports, new_prompt, reasoning):
    """
    Replace the assistant's own system prompt (never the admins' `user_system_prompt`).

    Args:
        ports (AssistantPorts): The assistant.
        new_prompt (str): The new behavioural guidelines.
        reasoning (str): Why; logged and kept in `"system_prompt_history"`.

    Returns:
        dict: `{"changed", "old_len", "new_len"}` (`changed` is False when the prompt was
        already exactly this).

    Raises:
        SystemPromptError: Empty/whitespace or oversized prompt, or no reasoning.
    """
    if not isinstance(new_prompt, str) or not new_prompt.strip():
        raise SystemPromptError("new_prompt must not be empty")
    new_prompt = new_prompt.strip()
    limit = ports.settings.get("workspace.system_prompt.max_chars")
    if len(new_prompt) > limit:
        raise SystemPromptError(f"new_prompt is too long ({len(new_prompt)} chars; limit {limit})")
    if not isinstance(reasoning, str) or not reasoning.strip():
        raise SystemPromptError("say why the prompt should change (reasoning)")
    reasoning = " ".join(reasoning.split())[:MAX_REASONING_CHARS]

    guidelines = Persona(ports)
    old_prompt = guidelines.own_guidelines()
    old_prompt = old_prompt if isinstance(old_prompt, str) else ""
    if old_prompt == new_prompt:
        return {"changed": False, "old_len": len(old_prompt), "new_len": len(new_prompt)}

    # a numbered version with its text: admins see it and may revert it (`memory.persona`)
    version = guidelines.rewrite(new_prompt, reason=reasoning, by="assistant")
    ports.log(
        f"{ports.name} rewrote its system prompt ({len(old_prompt)} -> {len(new_prompt)} "
        f"chars, version {version['version']}): {reasoning}"
    )
    return {"changed": True, "old_len": len(old_prompt), "new_len": len(new_prompt),
            "version": version["version"]}


# ----------------------------------------------------------------------------------------------
# What admins see: `@assistant <npc>` (and the provider line of `@assistant/config`)


def provider_line(settings, llm):
    """One line naming the LLM provider, or mechanical mode."""
    if llm is None:
        return "mechanical (no LLM configured)"
    config = settings.get("llm")
    endpoint = config.get("base_url") or "https://api.openai.com/v1"
    return f"{config.get('model')} at {endpoint} (key {mask_secret(config.get('api_key'))})"


def settings_problem_lines(settings):
    """
    One line per stored setting value that was ignored (out of its type or range).

    Args:
        settings (Settings): The NPC's settings (`problems` lists what was ignored).

    Returns:
        list: Status lines; empty when every value is fine.
    """
    lines = []
    for problem in settings.problems:
        instead = "the game's value" if problem["source"] == "per-NPC config" else "the default"
        lines.append(f"  |rignored setting|n {problem['key']} = {problem['value']!r} from "
                     f"{problem['source']}: {problem['error']}; {instead} is used")
    return lines


def status_text(ports, heading, ticker_interval, running=None):
    """
    The status `@assistant <npc>` shows: mode and sleep phase, ticks, provider, token usage,
    counts and the last sleep tick.

    Args:
        ports (AssistantPorts): The assistant.
        heading (str): The first line: who and where it is (the shell knows).
        ticker_interval (int or None): Seconds between its ticks; None when unsubscribed.
        running (tuple, optional): `(mode, seconds)` of the tick running now (the shell knows
            when it started): one running past `mode.LONG_TICK_SECONDS` is named.

    Returns:
        str: Lines with Evennia colour codes.
    """
    mode = Mode(ports)
    phase = mode.phase()
    stats = LLMStats(ports.state).read()
    stuck = long_tick(running)
    lines = [
        heading,
        f"  mode: {mode.current()}" + (f" (phase: {phase})" if mode.asleep() else ""),
        f"  ticker: every {ticker_interval}s" if ticker_interval
        else "  ticker: |rnot subscribed|n",
        f"  ticks: {mode.ticks()} (skipped while busy: {mode.skipped_ticks()})"
        + (f"; |r{stuck}|n" if stuck else ""),
        f"  provider: {provider_line(ports.settings, ports.llm)}",
        f"  tokens: prompt {stats.get('prompt_tokens', 0)}, completion "
        f"{stats.get('completion_tokens', 0)} in {stats.get('calls', 0)} calls "
        f"({stats.get('failures', 0)} failed)",
    ]
    lines += settings_problem_lines(ports.settings)
    if stats.get("emergency_stop"):
        lines.append("  |rEMERGENCY STOP|n after repeated LLM errors "
                     f"({stats.get('last_error')}); @assistant/wake or /config clears it")
    queue = PerceptionQueue(ports)
    lines.append(
        f"  events queued: {len(queue.waiting())} (dropped: {queue.dropped()}); "
        f"conversations: {len(Conversation(ports).interlocutors())}"
    )
    unanswered = LoopState(ports).last_unanswered()
    if unanswered:
        # someone got the fallback line instead of an answer: say why (awake._never_silent)
        lines.append(f"  last unanswered: {unanswered.get('who')} at {unanswered.get('time')}: "
                     f"{unanswered.get('reason')}")
    journal = Journal(ports)
    lines.append(
        f"  journal: {len(journal.entries())} entries (consolidated "
        f"{len(journal.consolidated_ids())}); goals: "
        f"{len(Goals(ports).all())}; profiles: {len(People(ports).profiles())}"
    )
    last = mode.last_sleep_tick()
    if last:
        done = ", ".join(f"{name}: {_step_summary(result)}"
                         for name, result in last["steps"].items())
        lines.append(f"  last sleep tick ({last['phase']}, {last['time']}): {done or 'nothing'}")
    return "\n".join(lines)


def _step_summary(result):
    if isinstance(result, dict):
        if result.get("error"):
            return f"|rerror: {result['error']}|n"
        keys = [f"{k}={v}" for k, v in result.items() if isinstance(v, int | float | bool | str)]
        return " ".join(keys[:4]) or "ok"
    if isinstance(result, list):
        return f"{len(result)}"
    return str(result)


# ----------------------------------------------------------------------------------------------
# What the memory inspector's status header shows


SHOWN_OBSERVATIONS = 10  # observations `format_profile` lists, the newest


def format_profile(profile):
    """
    An entity profile as text for `@assistant/profile` (pass a `People.profile`/`People.find`
    result so the relationship shows its current, decayed value).

    Returns:
        str: Several lines.
    """
    relationship = profile.get("relationship") or {}
    favorability = float(relationship.get("favorability", 0.0))
    count = int(relationship.get("interaction_count", 0) or 0)
    lines = [
        f"{profile.get('name')} ({profile.get('entity_id')}, {profile.get('entity_type')})",
        # the same words as `relationship_summary` (the view's relationship is already decayed)
        f"Relationship: {relationship.get('state', 'stranger')} (favorability "
        f"{favorability:.2f}, {count} interaction{'' if count == 1 else 's'})",
        f"First seen {profile.get('first_seen') or '-'}; last seen "
        f"{profile.get('last_seen') or '-'}; last consolidated "
        f"{profile.get('last_consolidated') or 'never'}",
    ]
    attributes = profile.get("attributes") or {}
    lines.append(f"Attributes ({len(attributes)}):")
    lines += [f"  {key}: {value}" for key, value in attributes.items()] or ["  (none yet)"]
    observations = profile.get("observations") or []
    shown = observations[-SHOWN_OBSERVATIONS:]
    # the header counts what it lists, and says how many more there are
    older = len(observations) - len(shown)
    lines.append(f"Recent observations ({len(shown)}"
                 f"{f' of {len(observations)}' if older else ''}):")
    lines += [
        f"  [{o.get('time')}] ({o.get('source')}) {o.get('text')}" for o in shown
    ] or ["  (none)"]
    return "\n".join(lines)


def tier_counts(ports):
    """How much each tier of memory and the workspace hold (long-term memory left out)."""
    entries = Journal(ports).entries()
    graph = Nodes(ports)
    nodes = graph.stored()
    by_status = {}
    for node in nodes.values():
        by_status[node.get("status", ACTIVE)] = by_status.get(node.get("status", ACTIVE), 0) + 1
    return {
        "journal_entries": len(entries),
        "journal_consolidated": len(Journal(ports).consolidated_ids()),
        "journal_wrong": sum(1 for entry in entries if is_wrong(entry)),
        # memories with at least one A-MEM link (not the link records: one per memory)
        "memories_with_links": sum(1 for record in MemoryLinks(ports).records().values()
                                   if record.get("linked_to")),
        "entity_profiles": len(People(ports).profiles()),
        "goals": len(Goals(ports).all()),
        "projects": len(Projects(ports).all()),
        "memory_nodes": len(nodes),
        "memory_nodes_by_status": by_status,
        "memory_clusters": len(graph.clusters()),
        "corrections": len(audit_trail(ports)),
        **session_counts(ports),
    }


def session_counts(ports):
    """
    How many session entries there are, and how many of them rest on a player's word rather
    than the assistant's own thought or an admin's statement (`memory.provenance`).
    """
    session = SessionMemory(ports)
    entries = [item for memory_type in MEMORY_TYPES for item in session.entries(memory_type)]
    return {"session_entries": len(entries),
            "session_entries_from_players": sum(
                1 for item in entries if is_player_sourced(item["provenance"]))}


# The first listing's size when counting the long-term memories: one listing holds them all in
# practice (`Memories.list_all` grows it if not), where many smaller ones would each cost a scan.
COUNT_SCAN = 100_000


@defer.inlineCallbacks
def inspector_status(ports, long_term=None):
    """
    The inspector's status header: mode and phase, ticks, provider and model, LLM use, errors,
    the emergency stop and the counts per tier (long-term memories counted in the store).

    Args:
        long_term (int, optional): The number of long-term memories, when the caller has
            already read them all (else every memory is listed here, so the count is true).

    Returns:
        Deferred[dict]: Plain data; the shell adds who and where the assistant is.
    """
    note = None
    memories = Memories(ports)
    if memories.available and long_term is None:
        try:
            long_term = len((yield memories.list_all(COUNT_SCAN)) or ())
        except Exception as err:  # noqa: BLE001 - the rest of the status still shows
            note = f"long-term memory unavailable: {err}"
    mode = Mode(ports)
    stats = LLMStats(ports.state).read()
    llm = ports.settings.get("llm")
    counts = tier_counts(ports)
    counts["long_term_memories"] = long_term
    return {
        "mode": mode.current(),
        "phase": mode.phase() if mode.asleep() else None,
        "ticks": mode.ticks(),
        "skipped_ticks": mode.skipped_ticks(),
        "mechanical": ports.mechanical,
        "provider": provider_line(ports.settings, ports.llm),
        "model": None if ports.mechanical else llm.get("model"),
        "llm": {key: stats.get(key, 0) for key in
                ("calls", "prompt_tokens", "completion_tokens", "failures",
                 "consecutive_errors")},
        "last_error": stats.get("last_error"),
        "emergency_stop": bool(stats.get("emergency_stop")),
        "pending_events": len(PerceptionQueue(ports).waiting()),
        "counts": counts,
        "note": note,
    }


# ----------------------------------------------------------------------------------------------
# The memory patrol and the memory graph: `@assistant/patrol`, `@assistant/nodes`

# The patrol report's steps in patrol order, with their titles.
PATROL_STEP_TITLES = (
    ("notes", "scene notes -> nodes"),
    ("session_counts", "session counts"),
    ("dying", "dying"),
    ("consolidation", "consolidation"),
    ("revival", "revival"),
    ("split", "split"),
    ("bound", "bound (nodes.max_nodes)"),
    ("small_clusters", "small clusters"),
    ("diary", "diary and think notes"),
)


def format_patrol_report(report):
    """
    A patrol report as text for `@assistant/patrol`.

    Args:
        report (dict): What `sleep.patrol.run_patrol` or `run_patrol_if_due` returned.

    Returns:
        str: A few readable lines.
    """
    if not report:
        return "No patrol report."
    if report.get("skipped"):
        return f"Patrol skipped: {report['skipped']}."
    steps = report.get("steps") or {}
    mode = "mechanical (no LLM)" if report.get("mechanical") else "with LLM"
    lines = [f"Patrol at {report.get('started_at', '?')} ({mode}):"]
    for key, title in PATROL_STEP_TITLES:
        outcome = steps.get(key)
        if outcome is None:
            continue
        if isinstance(outcome, dict):
            text = ", ".join(
                f"{k} {v}" if not isinstance(v, list) else f"{k} {len(v)}"
                for k, v in outcome.items() if k != "ids"
            )
        else:
            text = str(outcome)
        lines.append(f"  {title}: {text or 'nothing to do'}")
    return "\n".join(lines)


def format_nodes_overview(ports):
    """
    The memory graph at a glance for admins: clusters with their node counts, pending notes,
    the last patrol.

    Returns:
        str: Readable lines.
    """
    graph = Nodes(ports)
    nodes, clusters = graph.stored(), graph.clusters()
    scene = [n for n in graph.scene_notes() if n.get("type", "scene") == "scene"]
    failed = sum(1 for n in scene if n.get("status") == PARSE_FAILED)
    counts = {status: 0 for status in (ACTIVE, DYING, DEAD)}
    for node in nodes.values():
        counts[node.get("status", ACTIVE)] = counts.get(node.get("status", ACTIVE), 0) + 1
    lines = [
        f"Memory nodes: {len(nodes)} ({counts[ACTIVE]} active, {counts[DYING]} dying, "
        f"{counts[DEAD]} dead), {len(clusters)} clusters.",
        f"Scene notes waiting: {len(scene) - failed} pending, {failed} {PARSE_FAILED}.",
    ]
    roots = sorted((c for c in clusters.values() if c.get("is_parent")),
                   key=lambda c: c.get("name", ""))
    for root in roots:
        lines.append(_cluster_line(root, nodes, "  "))
        subs = sorted((c for c in clusters.values()
                       if c.get("parent_id") == root["id"] and not c.get("is_parent")),
                      key=lambda c: c.get("name", ""))
        lines += [_cluster_line(sub, nodes, "    ") for sub in subs]
    lines.append(f"Last patrol: {PatrolRecord(ports).last_run_at() or 'never'}.")
    return "\n".join(lines)


def _cluster_line(cluster, nodes, indent):
    members = cluster_members(nodes, cluster["id"])
    active = sum(1 for n in members if n.get("status") == ACTIVE)
    return (f"{indent}{cluster.get('name')} [{cluster['id'][:8]}]: {active} active / "
            f"{len(members)} nodes")
