"""
Evennia's text markup, stripped from what a model reads.

Room descriptions, names and speech may carry Evennia's colour and layout codes (`|w`, `|n`,
`|[r`, `|123`, `|#ff0000`, `|/`...), MXP links (`|lc...|lt...|le`) and raw ANSI escapes. They
cost tokens and mean nothing to a model, so every prompt is cleaned with `strip_markup`. The
core cannot import Evennia, so the patterns below follow `evennia.utils.ansi.ANSIParser` (its
`ansi_map`, xterm256, greyscale, bright-background and MXP tables) and
`evennia.utils.hex_colors` (`|#rrggbb`, `|[#rgb`).
"""

import re

# The MXP links keep their visible text (`|lc look |lt look here |le` -> "look here"; a URL
# link keeps the URL), as Evennia's `strip_mxp` does.
_MXP_LINK = re.compile(r"\|lc(.*?)\|lt(.*?)\|le", re.DOTALL)
_MXP_URL = re.compile(r"\|lu(.*?)\|lt(.*?)\|le", re.DOTALL)

# Layout codes become the whitespace they stand for.
_LAYOUT = {"|/": "\n", "|-": "\t", "|>": "    ", "|_": " "}

_CODE = re.compile(
    r"\|\|"  # an escaped pipe: becomes "|"
    r"|\|[/\->_]"  # layout
    r"|\|\[?#(?:[0-9a-fA-F]{6}|[0-9a-fA-F]{3})"  # hex colour, foreground or background
    r"|\|\[?[0-5]{3}"  # xterm256 colour
    r"|\|\[?=[a-z]"  # greyscale
    r"|\|![RGYBMCWX]"  # dark foreground
    r"|\|\[[RGYBMCWXrgybmcwx]"  # background (lower case: bright)
    r"|\|[nNhHuUiIsS*^rgybmcwxRGYBMCWX]"  # reset, styles, bright/dark foreground
)
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def _replace(match):
    code = match.group(0)
    if code == "||":
        return "|"
    return _LAYOUT.get(code, "")


def strip_markup(text):
    """
    Remove Evennia colour/layout markup, MXP links and ANSI escapes from text.

    Args:
        text (str or None): Any text.

    Returns:
        str: The plain text ("" for None); an escaped `||` becomes a literal `|`.
    """
    if not text:
        return "" if text is None else text
    text = str(text)
    if "|" not in text and "\x1b" not in text:
        return text
    text = _MXP_URL.sub(r"\1", _MXP_LINK.sub(r"\2", text))
    return _ANSI_ESCAPE.sub("", _CODE.sub(_replace, text))
