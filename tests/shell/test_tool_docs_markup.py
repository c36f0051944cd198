"""
`@assistant/tools` shows each tool's text as written: a "|" in it ("high|medium|low") is text,
never read as one of Evennia's colour codes.
"""

from assistant_npc import MECHANICAL, WithAda
from django.test import override_settings
from evennia.utils.test_resources import EvenniaCommandTest

from ai_assistant.admin_commands import CmdAssistant
from ai_assistant.commands import CmdPose, CmdTalk


@override_settings(AI_ASSISTANT=MECHANICAL)
class TestToolDocs(WithAda, EvenniaCommandTest):
    def test_enum_values_show_as_written(self):
        out = " ".join(self.call(CmdAssistant(), "/tools Ada", noansi=True).split())
        assert "priority (string high|medium|low, optional)" in out
        assert "status (string active|completed|abandoned, optional)" in out
        assert "mode (string or|and, optional)" in out
        assert "highedium" not in out and "activeompleted" not in out

    def test_talk_relays_no_control_characters_and_the_npc_hears_none(self):
        self.call(CmdTalk(), "Ada = hi\x1b[2J\x1b]0;pwned\x07 there\x00!",
                  'You say to Ada, "hi there!"')
        event = self.npc.assistant.ports().state.get("pending_events")[-1]
        assert event["text"] == "hi there!"

    def test_pose_relays_no_control_characters(self):
        heard = []
        self.char2.msg = lambda text=None, **kwargs: heard.append(text)
        self.call(CmdPose(), "waves\x1b[2J\x0c hello\x00", caller=self.char1)
        relayed = " ".join(str(text[0] if isinstance(text, tuple) else text) for text in heard)
        assert "waves hello" in relayed
        assert not any(char in relayed for char in "\x1b\x0c\x00")
        self.call(CmdPose(), "\x1b[2J\x00", "What do you want to do?")
