"""
The perception queue: what the assistant perceived and has not handled yet.

`agent.perception` turns what the NPC hears into events; the shell queues them here
(`PerceptionQueue.add`), the awake tick takes them all (`take_all`), and a sleeper's wake rule
looks for an urgent one (`waiting`). The queue sits in the memory layer, below both the agent and
the sleep processes that read it.

It owns two documents:

- `documents.PENDING_EVENTS`, the bounded list of queued events
  (`agent.perception.make_event`): when it holds `perception.queue_size` events the oldest of the
  lowest priority is dropped first;
- `documents.PERCEPTION_STATS`, its counters: `{"dropped": n}`.
"""

from ai_assistant.plumbing import documents, state_changes


class PerceptionQueue:
    """
    The assistant's queue of perceived events, read fresh from its state on every call.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    def add(self, event):
        """
        Queue one event, dropping the oldest of the lowest priority when the queue is full.

        Args:
            event (dict): From `agent.perception.make_event`.

        Returns:
            dict or None: The event dropped to make room, if any (an out-of-character event is
            never queued: it is returned as dropped, uncounted).
        """
        if event.get("classification") == "out_of_character":
            return event
        queue = self.waiting()
        queue.append(event)
        dropped = None
        # what changed, for a store that logs changes: one event, not the whole queue again
        change = [state_changes.append((), event)]
        limit = max(1, int(self.ports.settings.get("perception.queue_size")))
        if len(queue) > limit:
            # the lowest priority loses; among equals, the oldest
            victim = min(range(len(queue)), key=lambda i: (queue[i]["priority"], i))
            dropped = queue.pop(victim)
            change.append(state_changes.pop((), victim))
            stats = dict(self.ports.state.get(documents.PERCEPTION_STATS, {}) or {})
            stats["dropped"] = stats.get("dropped", 0) + 1
            self.ports.state.set(documents.PERCEPTION_STATS, stats)
        self.ports.state.set(documents.PENDING_EVENTS, queue, change=change)
        return dropped

    def take_all(self):
        """
        Take every queued event, highest priority first (oldest first among equals).

        Returns:
            list[dict]: The events; the queue is left empty.
        """
        queue = self.waiting()
        if queue:
            self.ports.state.set(documents.PENDING_EVENTS, [])
        return sorted(queue, key=lambda event: -event["priority"])

    def waiting(self):
        """The queued events, in the order they came (a new list)."""
        return list(self.ports.state.get(documents.PENDING_EVENTS, []) or [])

    def dropped(self):
        """How many events were dropped because the queue was full."""
        return (self.ports.state.get(documents.PERCEPTION_STATS, {}) or {}).get("dropped", 0)
