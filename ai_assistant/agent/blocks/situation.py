"""
The situation block: the assistant's name, mode and time, where it is and who is there.

Room names, descriptions and the names of those present are written by builders and players,
so they are shown only as quoted data or defused names.
"""

from ai_assistant.plumbing.quoting import quote_untrusted, safe_name


def situation_block(ports, situation):
    """Name, mode, where the assistant is and who is there."""
    lines = [f"You are {ports.name}. Mode: {situation.get('mode') or 'awake'}."]
    lines.append(f"Time: {ports.clock.now().strftime('%Y-%m-%d %H:%M UTC')}.")
    interlocutor = situation.get("interlocutor")
    if isinstance(interlocutor, dict) and interlocutor.get("name"):
        lines.append(f"You are talking with {safe_name(interlocutor['name'])}.")
    world = ports.world
    if world is None:
        lines.append("You have no body in the game right now.")
        return "\n".join(lines)
    lines += _location_lines(ports, world)
    try:
        present = world.present() or []
    except Exception as err:
        ports.log(f"{ports.name}: could not list who is present: {err}")
        present = []
    if present:
        people = ", ".join(
            f"{safe_name(p.get('name'))} ({'player' if p.get('is_player') else 'npc'})"
            for p in present
        )
        lines.append(f"Present: {people}")
    else:
        lines.append("Nobody else is here.")
    return "\n".join(lines)


def _location_lines(ports, world):
    """The room: its name, its description (quoted), its exits, objects and contents."""
    try:
        location = world.describe_location() or {}
    except Exception as err:  # a broken room must not stop the assistant thinking
        ports.log(f"{ports.name}: could not describe location: {err}")
        location = {}
    lines = []
    if location:
        lines.append(f"Location: {safe_name(location.get('name') or location.get('key'))}")
        description = location.get("description") or location.get("desc")
        if description:
            lines.append(quote_untrusted(description, "ROOM DESCRIPTION"))
        for key in ("exits", "objects", "contents"):
            items = location.get(key)
            if items:
                names = ", ".join(safe_name(_item_name(item)) for item in items)
                lines.append(f"{key.capitalize()}: {names}")
    return lines


def _item_name(item):
    if isinstance(item, dict):
        return item.get("name") or item.get("key") or "?"
    return item
