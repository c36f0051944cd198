"""
Quoting untrusted text for a prompt.

Text that comes from players (speech, names, poses, room text written by builders) is data,
never instructions: it is only ever shown inside `<<<BEGIN ...>>>`/`<<<END ...>>>` blocks, with
any delimiter look-alikes inside defused so a player cannot close a block early.
"""

import re

MAX_QUOTED_CHARS = 4000
MAX_NAME_CHARS = 60

_DELIMITER = re.compile(r"<<<|>>>")
# Control characters (NUL, escape...) but newline and tab: they are never words, and a NUL byte
# or a stray escape in a prompt confuses tokenizers and terminals alike.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")




def defuse(text, limit=MAX_QUOTED_CHARS):
    """
    Make untrusted text safe to place inside a delimited block: control characters (NUL,
    escapes) are dropped, delimiter look-alikes are replaced so a player cannot close the block
    early, and the length is capped.
    """
    text = _CONTROL.sub("", str(text if text is not None else ""))
    text = _DELIMITER.sub(lambda m: "‹‹‹" if m.group(0) == "<<<" else "›››", text)
    if len(text) > limit:
        text = text[:limit] + " [...cut]"
    return text


def safe_name(name):
    """A player-chosen name as a single short line, delimiter-free."""
    name = " ".join(str(name or "someone").split())
    return defuse(name, MAX_NAME_CHARS)


def quote_untrusted(text, label="PLAYER TEXT"):
    """
    Wrap untrusted text in a delimited data block.

    Args:
        text (str): What a player (or any game character) wrote.
        label (str): What the block holds (shown in both markers).

    Returns:
        str: The block.
    """
    return f"<<<BEGIN {label}>>>\n{defuse(text)}\n<<<END {label}>>>"
