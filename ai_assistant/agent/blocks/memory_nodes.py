"""
Prompt blocks of the memory nodes (the specification's "Context Structure").

- `system_memory_block`: the think notes of the last patrol and the relationships of the
  people present or most relevant (`memory.entities.relationship_summary`), in the system
  message;
- `snapshot_block`: unread notes (todos, reminders) and the diary of the last days;
- `recent_nodes_block`: the most recently activated memories.

Each is `func(ports, situation) -> str | None`; `agent.context` registers them. Every line that
rests on a player's word (a node, a note, the think notes and diary written from their scenes)
says so (`memory.recall.lines.attributed`).
"""

from datetime import timedelta

from ai_assistant.memory import provenance
from ai_assistant.memory.audience import visible_to
from ai_assistant.memory.entities import People, relationship_summary
from ai_assistant.memory.nodes import Nodes, scene_to_text, setting
from ai_assistant.memory.patrol_record import PatrolRecord, provenance_of
from ai_assistant.memory.recall.lines import attributed
from ai_assistant.plumbing.ports import parse_iso
from ai_assistant.plumbing.quoting import defuse, safe_name


def people_in(situation):
    """Entity ids of the person talked with and those present, in that order, each once."""
    people = []
    situation = situation or {}
    interlocutor = situation.get("interlocutor")
    if isinstance(interlocutor, dict) and interlocutor.get("id"):
        people.append(interlocutor["id"])
    for person in situation.get("present") or ():
        person_id = person.get("id") if isinstance(person, dict) else person
        if person_id and person_id not in people:
            people.append(person_id)
    return people


def relationships_text(ports, situation=None):
    """
    A line per relevant person - those present first, then the most recently met - with the
    relationship as `memory.entities` keeps it (at most `nodes.relationships_max`).
    """
    chosen = People(ports).relevant(people_in(situation),
                                    limit=int(setting(ports, "relationships_max")))
    now = ports.clock.now()
    lines = []
    for profile, present in chosen:
        summary = relationship_summary(profile, now, ports.settings)
        where = ", here" if present else ""
        lines.append(f"- {safe_name(summary['name'])} ({summary['entity_type']}{where}): "
                     f"{summary['text']}")
    return "\n".join(lines)


def system_memory_block(ports, situation):
    """The think notes of the last patrol and the relationships (system message)."""
    parts = []
    think = PatrolRecord(ports).think_notes()
    if think.get("text"):
        parts.append("Notes you wrote for yourself after your last memory patrol:\n"
                     + _written_from(think, defuse(think["text"], 2000)))
    relationships = relationships_text(ports, situation)
    if relationships:
        parts.append("People you know (relationship):\n" + relationships)
    return "\n\n".join(parts) or None


def snapshot_block(ports, situation):
    """Unread notes (todos, reminders) and the diary of the last days."""
    parts = []
    unread = [
        n for n in Nodes(ports).scene_notes()
        if n.get("type", "scene") != "scene" and not n.get("read")
    ]
    if unread:
        parts.append("Unread notes:\n" + "\n".join(
            f"- [{safe_name(n.get('type'))}] "
            + attributed(provenance.of(n), defuse(n.get("text"), 300)) for n in unread[:10]
        ))
    days = int(setting(ports, "diary_days"))
    cutoff = (ports.clock.now() - timedelta(days=days)).strftime("%Y-%m-%d")
    diary = PatrolRecord(ports).diary()
    recent = sorted((d for d in diary if d > cutoff), reverse=True)
    if recent:
        parts.append("Your diary:\n" + "\n".join(
            f"{date}:\n{_written_from(diary[date], defuse(diary[date].get('text'), 1000))}"
            for date in recent
        ))
    return "\n\n".join(parts) or None


def recent_nodes_block(ports, situation):
    """The most recently activated nodes that have an action."""
    limit = int(setting(ports, "recent_nodes"))
    nodes = Nodes(ports).stored()
    viewer = ((situation or {}).get("interlocutor") or {}).get("id")
    activated = [
        n for n in nodes.values()
        if n.get("last_activated") and (n.get("scene") or {}).get("action")
        and visible_to(n, viewer)  # a scene told in private: only in its teller's prompt
    ]
    activated.sort(key=lambda n: parse_iso(n["last_activated"]), reverse=True)
    if not activated:
        return None
    return "\n".join(f"- {attributed(provenance.of(n), defuse(scene_to_text(n), 400))}"
                     for n in activated[:limit])


def _written_from(record, text):
    """
    The diary's or the think notes' lines, each saying whose word it rests on when the scenes
    it was written from were a player's (`patrol_record.provenance_of`).
    """
    source = provenance_of(record)
    lines = []
    for line in text.split("\n"):
        bullet = "- " if line.startswith("- ") else ""
        lines.append(bullet + attributed(source, line.removeprefix(bullet)) if line.strip()
                     else line)
    return "\n".join(lines)
