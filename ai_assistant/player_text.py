"""
What a player types, made safe to relay to other players' screens.

A telnet line may carry control characters: NUL, a bell, a form feed, or whole terminal escape
sequences - clear the screen (`ESC [2J`), move the cursor, set the window title
(`ESC ]0;...BEL`). Relayed as typed by `talk` or `pose`, they act on every other player's
terminal. The contrib's commands clean every piece of player text with `clean_player_text`
before anyone else sees it (or the assistant hears it): escape sequences go whole, every other
control character but newline and tab goes. Evennia's own colour markup (`|r`) is not a
control character and is left to Evennia.
"""

import re

# ESC sequences, whole: CSI (`ESC [ ... final`), OSC/DCS/APC/PM/SOS strings up to their
# terminator (BEL or `ESC \`), and any other two-character escape
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_].*?(?:\x07|\x1b\\|$)"
    r"|\x1b[@-Z\\-~]?",
    re.DOTALL,
)
# C0 controls but tab (\x09) and newline (\x0a), DEL, and the C1 controls (8-bit CSI, OSC...)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def clean_player_text(text):
    """
    Remove control characters, other than newline and tab, from player text.

    Args:
        text (str or None): What the player typed.

    Returns:
        str: The text without terminal escape sequences and control characters ("" for None).
    """
    if not text:
        return ""
    text = str(text)
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", text))
