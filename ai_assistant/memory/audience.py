"""
Who may hear a memory: its audience.

What is said to the whole room is public. A whisper or a page is private: its journal entry
carries the speaker's stable id as `audience`, and so does everything sleep makes from it (a
memory's `metadata["audience"]`, facts, scene notes). Recall - the prompt's blocks and the
lookup tools whose results can be spoken - shows an item only to its audience, so a secret told
in a whisper never reaches a prompt built for someone else, nor a tool result said aloud.
"""

# The audience of what was said to the room: everyone.
PUBLIC = None


def audience_of(item):
    """
    The audience of a journal entry, a memory hit or anything carrying one.

    Args:
        item (dict): A journal entry (`item["audience"]`) or a memory hit
            (`item["metadata"]["audience"]`).

    Returns:
        str | None: The id of the one person it was told to, or `PUBLIC` (None).
    """
    if not isinstance(item, dict):
        return PUBLIC
    audience = item.get("audience")
    if audience is None and isinstance(item.get("metadata"), dict):
        audience = item["metadata"].get("audience")
    return str(audience) if audience not in (None, "") else PUBLIC


def visible_to(item, viewer):
    """
    Whether an item may be shown to `viewer`.

    Args:
        item (dict): A journal entry or a memory hit.
        viewer (str | None): The stable id of the person the prompt or tool result is for;
            None for no one in particular (an autonomous turn), which sees public items only.

    Returns:
        bool: True for a public item, or for a private one told to `viewer`.
    """
    audience = audience_of(item)
    return audience is PUBLIC or (viewer is not None and str(viewer) == audience)


def turn_viewer(world):
    """
    Who a conversation turn's prompt and tool results are for.

    Args:
        world (WorldPort or None): The turn's world port; in a conversation it is the awake
            tick's `ConversationWorld`, which knows whom it answers (`interlocutor_id`).

    Returns:
        str | None: The interlocutor's stable id, or None outside a conversation (an
        autonomous turn, sleep), which sees public items only.
    """
    viewer = getattr(world, "interlocutor_id", None)
    return viewer if isinstance(viewer, str) and viewer else None


def turn_audience(world):
    """
    The audience of what a conversation turn writes (a journal entry, a memory): the speaker
    when they whispered (the turn is private), `PUBLIC` otherwise.

    Args:
        world (WorldPort or None): The turn's world port (see `turn_viewer`).

    Returns:
        str | None: The whisperer's stable id, or `PUBLIC`.
    """
    audience = getattr(world, "audience", None)
    return audience if isinstance(audience, str) and audience else PUBLIC
