"""
Working memory: the state of each active conversation (the specification's third memory tier).

`documents.WORKING_MEMORY` maps an interlocutor's id to::

    {
        "name": "Alice",
        "topic": None,
        "started_at": "2025-12-06T10:00:00Z",
        "last_active": "2025-12-06T10:05:00Z",
        "messages": [{"role": "user"|"assistant", "name", "content", "time"}],
        "pending_actions": [],
    }

Messages are bounded (`working_memory.max_messages`, oldest dropped first); conversations idle
for longer than `working_memory.stale_seconds` are cleared during sleep.
"""

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso, parse_iso


def _conversation(memory, entity_id, name, now):
    conversation = memory.get(entity_id)
    if conversation is None:
        conversation = {
            "name": name,
            "topic": None,
            "started_at": now,
            "last_active": now,
            "messages": [],
            "pending_actions": [],
        }
        memory[entity_id] = conversation
    return conversation


def record_message(ports, entity_id, name, role, content):
    """
    Append one message to the conversation with `entity_id`.

    Args:
        ports (AssistantPorts): The assistant.
        entity_id (str): The interlocutor's id.
        name (str): The interlocutor's display name.
        role (str): "user" (they spoke) or "assistant" (the NPC spoke).
        content (str): The words.

    Returns:
        dict: The conversation after the change.
    """
    now = iso(ports.clock.now())
    memory = dict(ports.state.get(documents.WORKING_MEMORY, {}) or {})
    conversation = _conversation(memory, entity_id, name, now)
    conversation["name"] = name or conversation.get("name")
    conversation["last_active"] = now
    speaker = name if role == "user" else ports.name
    conversation["messages"].append(
        {"role": role, "name": speaker, "content": content, "time": now}
    )
    limit = max(2, int(ports.settings.get("working_memory.max_messages")))
    del conversation["messages"][:-limit]
    ports.state.set(documents.WORKING_MEMORY, memory)
    return conversation


def history(ports, entity_id):
    """
    Returns:
        list[dict]: The messages exchanged with `entity_id`, oldest first (a copy).
    """
    conversation = (ports.state.get(documents.WORKING_MEMORY, {}) or {}).get(entity_id)
    return [dict(message) for message in (conversation or {}).get("messages", [])]


def clear_stale_conversations(ports, max_age_seconds=None):
    """
    Forget conversations idle for longer than `max_age_seconds` (default 1 hour).

    Returns:
        list[str]: The ids of the cleared conversations.
    """
    if max_age_seconds is None:
        max_age_seconds = ports.settings.get("working_memory.stale_seconds")
    now = ports.clock.now()
    memory = dict(ports.state.get(documents.WORKING_MEMORY, {}) or {})
    stale = []
    for entity_id, conversation in memory.items():
        last = parse_iso(conversation.get("last_active")) or now
        if (now - last).total_seconds() > max_age_seconds:
            stale.append(entity_id)
    if stale:
        for entity_id in stale:
            del memory[entity_id]
        ports.state.set(documents.WORKING_MEMORY, memory)
    return stale
