"""
End-to-end, over telnet: the contrib behaves in a real game.

- `talk` and `pose` relay no terminal control to other players (NUL, clear-screen, window
  title, form feed, bell): what another player's client receives is checked byte by byte.
- `@assistant/tools` shows enum values as written ("high|medium|low").
- An admin who puppets Ada (`@ic Ada`) and goes back (`@ic admin`) leaves her in her room,
  still an assistant there.

On the shared game, with players of its own.
"""

import pytest
from game_server import TelnetClient, login, player

CONTROLS = (b"\x00", b"\x07", b"\x0c", b"\x1b[2J", b"\x1b]0;")


class RecordingSocket:
    """A socket that keeps every byte it receives (the client strips ANSI from its text)."""

    def __init__(self, sock):
        self.sock = sock
        self.received = bytearray()

    def recv(self, size):
        data = self.sock.recv(size)
        self.received += data
        return data

    def __getattr__(self, name):
        return getattr(self.sock, name)


def recording(client: TelnetClient):
    client.sock = RecordingSocket(client.sock)
    return client.sock


@pytest.fixture
def game(shared_game):
    return shared_game


def test_talk_and_pose_relay_no_terminal_control(game):
    admin, carol = login(game), player(game, "Tess")
    try:
        raw = recording(admin)
        carol.command("talk Ada = hi\x1b[2J\x1b]0;pwned\x07 there\x00\x0c!",
                      r'You say to Ada, "hi there!"')
        admin.read_until(r'Tess says to Ada, "hi there!"')
        carol.command("pose waves\x1b[2J hello\x00\x07", r"Tess waves hello")
        admin.read_until(r"Tess waves hello")
        assert not [control for control in CONTROLS if control in raw.received], raw.received
    finally:
        admin.close()
        carol.close()


def test_tool_docs_show_enum_values_as_written(game):
    admin = login(game)
    try:
        out = admin.command("@assistant/tools Ada", r"arguments: none[\s\S]*\n", timeout=30)
        out += admin.drain(1.0)
        flat = " ".join(out.split())
        assert "priority (string high|medium|low, optional)" in flat
        assert "highedium" not in flat
    finally:
        admin.close()


def test_puppeting_ada_and_back_leaves_her_in_her_room(game):
    admin, carol = login(game), player(game, "Uma")
    try:
        admin.command("@ic Ada", r"You become Ada")
        admin.command("@ic admin", r"You become admin")
        seen = carol.drain(1.5)
        assert "Ada has left the game" not in seen
        looked = carol.command("look", r"Limbo[\s\S]*?\n\s*\n|Characters?:[^\n]*\n")
        looked += carol.drain(0.5)
        assert "Ada" in looked
        status = admin.command("@assistant Ada", r"ticker:[^\n]*\n")
        assert "Ada" in status and "in Limbo" in status
        assert "not subscribed" not in status
    finally:
        admin.close()
        carol.close()
