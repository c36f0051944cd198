"""
Player text relayed to other players keeps no terminal control: `player_text.clean_player_text`.
"""

import pytest

from ai_assistant.player_text import clean_player_text

pytestmark = pytest.mark.core


@pytest.mark.parametrize("typed, relayed", [
    ("hello there", "hello there"),
    ("line one\nline two\tand a tab", "line one\nline two\tand a tab"),
    ("hi\x00 there", "hi there"),  # NUL
    ("\x1b[2J\x1b[Hclean slate", "clean slate"),  # clear the screen, cursor home
    ("\x1b]0;pwned\x07title", "title"),  # window title, BEL-terminated
    ("\x1b]2;pwned\x1b\\title", "title"),  # window title, ST-terminated
    ("bell\x07 form\x0c feed\r", "bell form feed"),
    ("\x1b[31mred\x1b[0m", "red"),
    ("\x9b2J 8-bit CSI", "2J 8-bit CSI"),  # the C1 control goes; what follows is text
    ("\x1bc reset", " reset"),  # a two-character escape (full reset)
    ("café |rred|n {braces} $You()", "café |rred|n {braces} $You()"),  # not controls
    ("", ""),
    (None, ""),
])
def test_control_characters_but_newline_and_tab_are_removed(typed, relayed):
    assert clean_player_text(typed) == relayed
