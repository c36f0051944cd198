"""
In-game commands: `talk`, the `@assistant` admin family, and one command per ReAct tool.

Add `AssistantCmdSet` to your `CharacterCmdSet` (see the README). The tool commands live in
`AssistantToolCmdSet`, which every assistant NPC carries, so the NPC's own actions and an admin's
(`@assistant/tool Ada = say {"message": "hi"}`, or the command itself while puppeting the NPC)
go through the same code.
"""

from evennia import CmdSet
from evennia.commands.command import Command
from evennia.commands.default.general import CmdPose as EvenniaCmdPose

from ai_assistant.admin_commands import CmdAssistant, run_tool_as
from ai_assistant.handler import TOOL_CMDSET_KEY, is_assistant
from ai_assistant.heard_line import unpuppeted_assistants
from ai_assistant.player_text import clean_player_text
from ai_assistant.tools.catalogue import load_all_tools

MAX_TALK_LENGTH = 2000


class CmdTalk(Command):
    """
    Speak directly to an AI assistant.

    Usage:
      talk <assistant> = <message>

    The assistant answers in the room when it has thought about it. You can also just
    `say Ada, <message>` - saying its name gets its attention.
    """

    key = "talk"
    aliases = ["talk to"]
    locks = "cmd:all()"
    help_category = "General"

    def func(self):
        caller = self.caller
        # no terminal escapes or control characters reach the room (or the assistant)
        target, sep, message = clean_player_text(self.args).partition("=")
        target, message = target.strip(), message.strip()
        if not sep or not target or not message:
            caller.msg("Usage: talk <assistant> = <message>")
            return
        if len(message) > MAX_TALK_LENGTH:
            caller.msg(f"That is too long to say at once ({len(message)} > {MAX_TALK_LENGTH}).")
            return
        # Evennia's own search among the assistants here: two called Ada get its usual
        # multimatch prompt ("Ada-1", "Ada-2"), never a silent pick
        here = [obj for obj in (caller.location.contents if caller.location else ())
                if is_assistant(obj)]
        npc = caller.search(target, candidates=here,
                            nofound_string=f"There is no assistant called '{target}' here.")
        if npc is None:
            return
        caller.msg(f'You say to {npc.get_display_name(caller)}, "{message}"')
        # the player's words go in through the mapping, which is never parsed for `$func()`
        # or `{key}` markers: they reach the room as typed
        # the other assistants here are not sent it: Evennia would format it for each, and
        # each would drop it (`bench.reactor`)
        caller.location.msg_contents(
            '{speaker} says to {listener}, "{speech}"',
            exclude=[caller, npc, *unpuppeted_assistants(here)], from_obj=caller,
            mapping={"speaker": caller, "listener": npc, "speech": message},
        )
        npc.assistant.hear(caller, message, "talk")


class CmdPose(EvenniaCmdPose):
    """
    strike a pose

    Usage:
      pose <pose text>
      pose's <pose text>

    Example:
      pose is standing by the wall, smiling.
       -> others will see:
      Tom is standing by the wall, smiling.

    Describe an action being taken. The pose text will automatically begin with your name.
    """

    def func(self):
        """Evennia's pose, with the player's words kept out of the message template."""
        pose = clean_player_text(self.args)  # no terminal escapes reach the room
        if not pose.strip():
            self.msg("What do you want to do?")
            return
        # Evennia's own pose puts the text in the template, which `msg_contents` formats:
        # "{curly}" raised a KeyError and the pose was lost. Through the mapping, which is
        # substituted after formatting and never parsed, braces and `$You()` stay text.
        self.caller.location.msg_contents(
            text=("{actor}{pose}", {"type": "pose"}), from_obj=self.caller,
            mapping={"actor": self.caller.name, "pose": pose},
        )


class ToolCommand(Command):
    """
    Base of the commands generated from the tool registry.

    The NPC itself runs its tools through the registry, never through these commands: they are
    for an admin puppeting it, hence the same lock as `@assistant` (whose `/tool` switch runs
    the same code from outside).
    """

    tool_name = ""
    locks = "cmd:perm(Admin)"
    help_category = "Assistant tools"
    auto_help = True

    def func(self):
        npc = self.obj if is_assistant(self.obj) else self.caller
        if not is_assistant(npc):
            self.caller.msg("Only an AI assistant can use this.")
            return
        run_tool_as(npc, self.caller, self.tool_name, clean_player_text(self.args))


def make_tool_command(tool):
    """Build the Command class for one tool."""
    props = tool.parameters.get("properties", {})
    lines = [tool.description, "", "Usage:", f"  {tool.name} <json arguments>"]
    for name, spec in props.items():
        flag = " (required)" if name in tool.parameters.get("required", []) else ""
        lines.append(f"    {name}: {spec.get('type', 'any')}{flag} {spec.get('description', '')}")
    return type(
        f"CmdTool_{tool.name}",
        (ToolCommand,),
        {
            "key": tool.name,
            # former names (renamed lookup tools) still work as commands
            "aliases": [alias for alias in tool.aliases
                        if alias.lower() not in default_command_names()],
            "tool_name": tool.name,
            "__doc__": "\n".join(lines),
        },
    )


# process-wide, derived from the game's settings alone: the command names of its default
# cmdsets, computed once
_default_command_names = set()


def default_command_names():
    """
    Every key and alias of the game's session, account and character cmdsets.

    Returns:
        set: Lower-case command names a player (or an admin puppeting an NPC) already has.
    """
    if not _default_command_names:
        from django.conf import settings
        from evennia.commands.cmdsethandler import import_cmdset

        for path in (settings.CMDSET_SESSION, settings.CMDSET_ACCOUNT, settings.CMDSET_CHARACTER):
            cmdset = import_cmdset(path, None, no_logging=True)
            for cmd in getattr(cmdset, "commands", ()):
                _default_command_names.update(name.lower() for name in cmd._matchset)
    return _default_command_names


class AssistantToolCmdSet(CmdSet):
    """
    The assistant's tools as commands (on every assistant NPC).

    When an admin puppets the NPC, Evennia's commands win: a tool named like one of the game's
    default commands or their aliases (`say`, `whisper`, `page`, `emote`, which is an alias of
    `pose`) is left out, so the default command runs; the other tools stay reachable under
    their names. The set is also merged below every default cmdset (session -20, account -10,
    character 0), so a clash with a command added later still resolves to the game's. Players
    in the room never get this cmdset: a character's `call` lock is false.
    """

    key = TOOL_CMDSET_KEY
    priority = -50
    mergetype = "Union"

    def at_cmdset_creation(self):
        taken = default_command_names()
        for tool in load_all_tools().all():
            if tool.name.lower() not in taken:
                self.add(make_tool_command(tool)())


class AssistantCmdSet(CmdSet):
    """
    `talk` for everyone and `@assistant` for admins. Add it to your CharacterCmdSet (after
    the defaults: its `pose`, which keeps braces in a pose literal, replaces Evennia's).
    """

    key = "AssistantCmdSet"

    def at_cmdset_creation(self):
        self.add(CmdTalk())
        self.add(CmdAssistant())
        self.add(CmdPose())
