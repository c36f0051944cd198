"""
Perception: what the assistant hears in its room, classified and queued as events.

Every message the NPC receives becomes (at most) one event:
`{"sender", "sender_id", "text", "kind", "classification", "time", "priority", "urgent"}`.

Message classification:

- `self`: the NPC's own output echoed back - ignored;
- `direct_message`: `talk <npc> = ...` or a whisper/page to the NPC - urgent;
- `direct_addressing`: speech that names the NPC ("Ada, where is the inn?") - urgent;
- `room_chatter`: other speech and poses in the room;
- `ambient`: arrivals, departures and other room events.

Not perceived at all (`is_out_of_character`): the automatic emotes assistants show while they
think (`THINKING_EMOTE`, "Npc01 pauses, thinking.") and out-of-character notices ("(OOC: brb)",
"[OOC] ...", an assistant's "(This assistant is in mechanical mode...)"). They say nothing
about the character who shows them, so they never become journal entries, observations in an
entity profile or events to answer. Colour codes are stripped from what is queued.

The events wait in the perception queue (`memory.perception_queue.PerceptionQueue`), bounded:
when it is full the oldest event of the lowest priority is dropped first, and drops are counted.

Floods: what one speaker says between two ticks is answered in one turn (the awake tick runs one
cycle per speaker), and a speaker gets at most one turn per `perception.speaker_cooldown`
seconds. Lines a speaker says while cooling down are journaled at once like any other, then
held (`hold`, in the runtime) and queued again, marked `held`, when the cooldown ends, to be
answered together: fifty lines in five seconds get a few replies, not fifty, and none is lost.
"""

import re

from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.plumbing.markup import strip_markup

# The emote an assistant shows while its model thinks (`agent.awake`).
THINKING_EMOTE = "pauses, thinking."
AUTOMATIC_EMOTES = (THINKING_EMOTE,)

# Out-of-character notices: the MUD conventions "(OOC ...)", "[OOC] ...", "OOC: ...", and the
# assistants' own notices in parentheses ("(This assistant ...)", "(The assistant's LLM ...)").
_OOC = re.compile(
    r"^\s*(?:\(\s*OOC\b|\[\s*OOC\s*\]|OOC\s*:)"
    r"|\((?:this|the) assistant(?:'s)?\b",
    re.IGNORECASE,
)

PRIORITIES = {
    "direct_message": 9,
    "direct_addressing": 8,
    "room_chatter": 3,
    "ambient": 2,
}

_QUOTED = re.compile(r'"(.*)"', re.DOTALL)


def extract_speech(text):
    """
    Pull the spoken words out of a formatted say line (`Alice says, "hello"`).

    Args:
        text (str): The message as the room delivered it.

    Returns:
        str: The quoted words, or the whole text when nothing is quoted.
    """
    match = _QUOTED.search(text or "")
    return (match.group(1) if match else (text or "")).strip()


def addresses(text, names):
    """
    Args:
        text (str): Spoken words.
        names (iterable of str): The NPC's name and aliases.

    Returns:
        bool: True if any name occurs in `text` as a whole word (case-insensitive).
    """
    for name in names:
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE):
            return True
    return False


def classify(kind, text, *, names, from_self=False):
    """
    Classify one perceived message.

    Args:
        kind (str): "talk", "whisper", "say", "pose", "arrive", "depart" or another
            message type.
        text (str): The spoken words (for say/talk/whisper) or the message.
        names (iterable of str): The NPC's name and aliases.
        from_self (bool): The NPC itself is the sender.

    Returns:
        str: One of "self", "direct_message", "direct_addressing", "room_chatter", "ambient".
    """
    if from_self:
        return "self"
    if kind in ("talk", "whisper", "page"):
        return "direct_message"
    if kind in ("say", "pose"):
        return "direct_addressing" if addresses(text, names) else "room_chatter"
    return "ambient"


def is_out_of_character(kind, text, sender=None):
    """
    True for what is not the character acting: an assistant's automatic emote (posed as
    "<name> pauses, thinking.") or an out-of-character notice.

    Args:
        kind (str): Message kind.
        text (str): The message.
        sender (str, optional): The sender's name (an emote's text may start with it).
    """
    text = " ".join(str(text or "").split())
    if _OOC.search(text):
        return True
    if kind != "pose":
        return False
    if sender and text.lower().startswith(str(sender).lower() + " "):
        text = text[len(str(sender)) + 1:]
    return text.strip() in AUTOMATIC_EMOTES


def make_event(*, kind, text, sender, sender_id, classification, time, urgent_priority=8):
    """
    Build an event dict.

    Args:
        kind (str): Message kind (see `classify`).
        text (str): Words or description.
        sender (str): Display name of who caused it.
        sender_id (str): Stable id of the sender (e.g. "#12").
        classification (str): From `classify`.
        time (str): ISO timestamp.
        urgent_priority (int): Events at or above this priority are urgent.

    Returns:
        dict: The event.
    """
    priority = PRIORITIES.get(classification, 1)
    if is_out_of_character(kind, text, sender):
        classification, priority = "out_of_character", 0
    return {
        "kind": kind,
        "text": strip_markup(text),
        "sender": sender,
        "sender_id": sender_id,
        "classification": classification,
        "time": time,
        "priority": priority,
        "urgent": priority >= urgent_priority,
    }


# ----------------------------------------------------------------------------------------------
# One turn per speaker per cooldown

# runtime caches: {speaker id: the delayed call ending their cooldown}, {speaker id: [events]}
COOLDOWNS = "speaker_cooldowns"
HELD = "held_speech"


def start_cooldown(ports, speaker_id, call_later):
    """
    A turn answering `speaker_id` starts: their next one waits `perception.speaker_cooldown`
    seconds.

    Args:
        ports (AssistantPorts): The assistant.
        speaker_id (str): The speaker's stable id.
        call_later (callable or None): `call_later(seconds, func, *args)`; without one (or with
            a cooldown of 0) speakers are not paced.
    """
    seconds = float(ports.settings.get("perception.speaker_cooldown"))
    if call_later is None or seconds <= 0:
        return
    ports.runtime.cache(COOLDOWNS, dict)[speaker_id] = call_later(
        seconds, end_cooldown, ports, speaker_id)


def cooling_down(ports, speaker_id):
    """True while `speaker_id` must wait for their next turn."""
    call = ports.runtime.cache(COOLDOWNS, dict).get(speaker_id)
    return call is not None and call.active()


def hold(ports, speaker_id, events):
    """
    Keep a cooling speaker's events for the turn after their cooldown. They were journaled
    already: they come back marked `held`, so nobody records them twice.
    """
    held = ports.runtime.cache(HELD, dict).setdefault(speaker_id, [])
    held.extend({**event, "held": True} for event in events)


def end_cooldown(ports, speaker_id):
    """The cooldown is over: what the speaker said meanwhile is queued again, in order."""
    ports.runtime.cache(COOLDOWNS, dict).pop(speaker_id, None)
    queue = PerceptionQueue(ports)
    for event in ports.runtime.cache(HELD, dict).pop(speaker_id, []):
        queue.add(event)
