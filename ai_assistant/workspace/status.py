"""
Self-monitoring and self-modification.

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

from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.persona import Persona
from ai_assistant.plumbing.ports import iso
from ai_assistant.workspace.loop_state import LoopState

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
