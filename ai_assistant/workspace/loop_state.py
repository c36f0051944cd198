"""
The ReAct loop's own record of itself: where the running cycle stands and what its tools did.

The loop (`agent.react`) writes it; the assistant reads it back through the `get_system_status`
tool (`workspace.status`), and admins see who was last left without an answer
(`@assistant <npc>`). It sits in the workspace, below both.

`LoopState` owns two documents:

- `documents.LOOP_STATE`: `{"iteration", "max_iterations", "tools_this_cycle",
  "tool_count_this_cycle", "in_chain", "chain_depth", "pending_tools", "last_context_tokens"}`
  of the running cycle, and `"last_unanswered"`: who was left without an answer, when and why;
- `documents.SESSION_METRICS`: `{"total_tool_calls", "successful_calls", "failed_calls",
  "session_start"}`.
"""

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso


def empty_loop_state(max_iterations=5):
    """A fresh `documents.LOOP_STATE` document."""
    return {
        "iteration": 0,
        "max_iterations": max_iterations,
        "tools_this_cycle": [],
        "tool_count_this_cycle": 0,
        "in_chain": False,
        "chain_depth": 0,
        "pending_tools": [],
        "last_context_tokens": 0,
    }


def _as_dict(value):
    return dict(value) if isinstance(value, dict) else {}


class LoopState:
    """
    The ReAct loop's state and session metrics, read fresh from the assistant's state on every
    call.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    # --- written by the loop ------------------------------------------------------------------

    def record_step(self, *, iteration, max_iterations, tools, chain_depth, in_chain, pending,
                    context_tokens=None):
        """
        Where the running cycle stands.

        Args:
            iteration (int): Model calls so far.
            max_iterations (int): The cycle's limit.
            tools (list[str]): The tools run so far, in order.
            chain_depth (int): Successful SAFE_CHAIN tools in a row.
            in_chain (bool): A chain is under way.
            pending (list[str]): The tools the model asked for and that have not run yet.
            context_tokens (int, optional): The size of the last prompt sent (kept otherwise).
        """
        loop = self.ports.state.get(documents.LOOP_STATE, None) or empty_loop_state(
            max_iterations)
        loop.update(
            iteration=iteration,
            max_iterations=max_iterations,
            tools_this_cycle=list(tools),
            tool_count_this_cycle=len(tools),
            chain_depth=chain_depth,
            in_chain=in_chain,
            pending_tools=list(pending),
        )
        if context_tokens is not None:
            loop["last_context_tokens"] = context_tokens
        self.ports.state.set(documents.LOOP_STATE, loop)

    def count_tool(self, succeeded):
        """One tool call ran, and `succeeded` or not (the session's metrics)."""
        metrics = self.ports.state.get(documents.SESSION_METRICS, None) or {}
        metrics.setdefault("total_tool_calls", 0)
        metrics.setdefault("successful_calls", 0)
        metrics.setdefault("failed_calls", 0)
        metrics.setdefault("session_start", iso(self.ports.clock.now()))
        metrics["total_tool_calls"] += 1
        metrics["successful_calls" if succeeded else "failed_calls"] += 1
        self.ports.state.set(documents.SESSION_METRICS, metrics)

    def record_unanswered(self, who, reason):
        """
        Someone who addressed the assistant got no answer from the model (shown by
        `@assistant <npc>`).

        Args:
            who (str): The name of the person left without an answer.
            reason (str): Why the cycle ended without a turn-ending action.
        """
        loop = self.ports.state.get(documents.LOOP_STATE, None) or empty_loop_state()
        loop["last_unanswered"] = {"time": iso(self.ports.clock.now()), "who": who,
                                   "reason": reason}
        self.ports.state.set(documents.LOOP_STATE, loop)

    # --- read -----------------------------------------------------------------------------------

    def current(self):
        """The loop state document (a copy; `{}` when none was written or it is damaged)."""
        return _as_dict(self.ports.state.get(documents.LOOP_STATE, {}))

    def metrics(self):
        """The session metrics document (a copy; `{}` when none was written or it is damaged)."""
        return _as_dict(self.ports.state.get(documents.SESSION_METRICS, {}))

    def last_unanswered(self):
        """`{"time", "who", "reason"}` of the last person left without an answer, or None."""
        return self.current().get("last_unanswered")
