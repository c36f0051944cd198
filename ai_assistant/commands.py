"""
In-game commands: `talk`, the `@assistant` admin family, and one command per ReAct tool.

Add `AssistantCmdSet` to your `CharacterCmdSet` (see the README). The tool commands live in
`AssistantToolCmdSet`, which every assistant NPC carries, so the NPC's own actions and an admin's
(`@assistant/tool Ada = say {"message": "hi"}`, or the command itself while puppeting the NPC)
go through the same code.
"""

import json

from evennia import CmdSet, search_tag
from evennia.commands.command import Command
from evennia.commands.default.muxcommand import MuxCommand
from evennia.utils import create, logger

from ai_assistant.adapters import game_settings
from ai_assistant.handler import ASSISTANT_TAG, is_assistant
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.settings import Settings
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import ToolCategory, execute_tool

MAX_NAME_LENGTH = 40
MAX_TALK_LENGTH = 2000


def find_assistant(name):
    """
    Args:
        name (str): An assistant's name (case-insensitive) or dbref.

    Returns:
        tuple: `(assistant, None)` or `(None, error message)`.
    """
    name = (name or "").strip()
    assistants = all_assistants()
    if not name:
        return None, "Name an assistant."
    for npc in assistants:
        if npc.key.lower() == name.lower() or npc.dbref == name:
            return npc, None
    known = ", ".join(sorted(npc.key for npc in assistants)) or "none yet"
    return None, f"No assistant called '{name}'. Assistants: {known}."


def all_assistants():
    return [obj for obj in search_tag(ASSISTANT_TAG[0], category=ASSISTANT_TAG[1])
            if is_assistant(obj)]


def format_json(data):
    return json.dumps(data, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def parse_config_value(text):
    """A config value: JSON when it parses (numbers, true, null, lists), else the raw string."""
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


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
        target, sep, message = self.args.partition("=")
        target, message = target.strip(), message.strip()
        if not sep or not target or not message:
            caller.msg("Usage: talk <assistant> = <message>")
            return
        if len(message) > MAX_TALK_LENGTH:
            caller.msg(f"That is too long to say at once ({len(message)} > {MAX_TALK_LENGTH}).")
            return
        npc = caller.search(target, location=caller.location, quiet=True)
        npc = npc[0] if npc else None
        if npc is None or not is_assistant(npc):
            caller.msg(f"There is no assistant called '{target}' here.")
            return
        caller.msg(f'You say to {npc.get_display_name(caller)}, "{message}"')
        # the player's words go in through the mapping, which is never parsed for `$func()`
        # or `{key}` markers: they reach the room as typed
        caller.location.msg_contents(
            '{speaker} says to {listener}, "{speech}"', exclude=[caller, npc], from_obj=caller,
            mapping={"speaker": caller, "listener": npc, "speech": message},
        )
        npc.assistant.hear(caller, message, "talk")


class CmdAssistant(MuxCommand):
    """
    Manage AI assistant NPCs.

    Usage:
      @assistant [<npc>]                     - status (all assistants, or one)
      @assistant/create <name>               - create an assistant here, awake and ticking
      @assistant/sleep <npc>                 - put it to sleep (memory consolidation)
      @assistant/wake <npc>                  - wake it (deferred while it is compacting)
      @assistant/config <npc> [= key value]  - show or set a per-NPC setting
      @assistant/journal <npc> [= <query>]   - recent journal entries, or a scored search
      @assistant/memory <npc> = <query>      - semantic recall (mem0), with scores and trust
      @assistant/goals <npc>                 - the goal tree with progress
      @assistant/projects <npc>              - project slots
      @assistant/reflect <npc>               - run a reflection now
      @assistant/profile <npc> = <entity>    - an entity profile and relationship
      @assistant/patrol <npc>                - run the memory patrol now (nodes, clusters)
      @assistant/nodes <npc>                 - the memory graph at a glance
      @assistant/tools <npc>                 - list its ReAct tools
      @assistant/tool <npc> = <tool> [json]  - run one tool as the NPC

    Per-NPC settings use the dotted keys of AI_ASSISTANT, e.g.
      @assistant/config Ada = llm.model gpt-4o-mini
      @assistant/config Ada = ticks.awake 10
      @assistant/config Ada = llm.model default      (remove the override)
    """

    key = "@assistant"
    aliases = ["@assistants"]
    locks = "cmd:perm(Admin)"
    help_category = "Admin"
    # validated in func (not MuxCommand's switch_options, which only warns and ignores)
    valid_switches = ("create", "sleep", "wake", "config", "journal", "memory", "goals",
                      "projects", "reflect", "profile", "patrol", "nodes", "tools", "tool")

    def func(self):
        switch = self.switches[0] if self.switches else "status"
        if len(self.switches) > 1:
            self.caller.msg("Use one switch at a time.")
            return
        handler = getattr(self, f"do_{switch}", None)
        if handler is None or (switch != "status" and switch not in self.valid_switches):
            valid = ", ".join(f"/{name}" for name in self.valid_switches)
            self.caller.msg(f"Unknown switch '/{switch}'. Valid switches: {valid}.")
            return
        try:
            handler()
        except Exception as err:  # never a traceback to the player
            logger.log_trace()
            self.caller.msg(f"|r@assistant/{switch} failed: {err}|n")

    def _npc(self, name=None):
        npc, error = find_assistant(self.lhs if name is None else name)
        if error:
            self.caller.msg(error)
        return npc

    # --- status -----------------------------------------------------------------------------

    def do_status(self):
        if not self.args.strip():
            assistants = all_assistants()
            if not assistants:
                self.caller.msg("No assistants yet. Create one with @assistant/create <name>.")
                return
            lines = ["|wAI assistants|n"]
            for npc in sorted(assistants, key=lambda obj: obj.key):
                where = npc.location.key if npc.location else "nowhere"
                lines.append(f"  {npc.key} ({npc.dbref}) - {npc.assistant.operating_mode}, "
                             f"in {where}")
            self.caller.msg("\n".join(lines))
            return
        npc = self._npc()
        if npc:
            from ai_assistant.reports import format_status

            self.caller.msg(format_status(npc))

    # --- create -----------------------------------------------------------------------------

    def do_create(self):
        caller = self.caller
        name = self.args.strip()
        if not name:
            caller.msg("Usage: @assistant/create <name>")
            return
        if len(name) > MAX_NAME_LENGTH or not name.replace(" ", "").replace("-", "").isalnum():
            caller.msg(f"'{name}' is not a good name: use letters, digits, spaces or '-', "
                       f"at most {MAX_NAME_LENGTH} characters.")
            return
        existing, _ = find_assistant(name)
        if existing:
            caller.msg(f"There is already an assistant called {existing.key} ({existing.dbref}).")
            return
        location = caller.location
        if location is None:
            caller.msg("You must stand in a room to create an assistant.")
            return
        typeclass = Settings(game_settings()).get("typeclass")
        npc = create.create_object(typeclass, key=name, location=location, home=location)
        if npc is None or not is_assistant(npc):
            caller.msg(f"Could not create an assistant from typeclass {typeclass} (it needs "
                       "ai_assistant.handler.AssistantMixin).")
            return
        interval = npc.assistant.script.attributes.get(documents.TICKER_INTERVAL)
        caller.msg(f"Created assistant {npc.key} ({npc.dbref}): awake, ticking every "
                   f"{interval}s.")
        location.msg_contents("{npc} appears.", exclude=[caller], mapping={"npc": npc})

    # --- modes ------------------------------------------------------------------------------

    def do_sleep(self):
        npc = self._npc()
        if not npc:
            return
        assistant = npc.assistant
        if assistant.operating_mode == "sleep":
            self.caller.msg(f"{npc.key} is already asleep.")
            return
        from ai_assistant.sleep.modes import enter_sleep

        enter_sleep(assistant.ports(), f"admin {self.caller.key}", assistant.set_mode)
        assistant.script.poke()
        interval = assistant.script.attributes.get(documents.TICKER_INTERVAL)
        self.caller.msg(f"{npc.key} is now asleep (phase: compacting; ticker {interval}s).")

    def do_wake(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.sleep.modes import request_wake

        outcome = request_wake(npc.assistant.ports(), f"admin {self.caller.key}",
                               npc.assistant.set_mode)
        self.caller.msg(f"{npc.key}: {outcome}")

    # --- config -----------------------------------------------------------------------------

    def do_config(self):
        npc = self._npc()
        if not npc:
            return
        if not self.rhs:
            from ai_assistant.reports import format_config

            self.caller.msg(format_config(npc))
            return
        key, _, raw_value = self.rhs.strip().partition(" ")
        if not key or not raw_value.strip():
            self.caller.msg("Usage: @assistant/config <npc> = <key> <value>  (value 'default' "
                            "removes the override)")
            return
        settings = Settings(game_settings())
        if not settings.known_key(key):
            self.caller.msg(f"Unknown setting '{key}'. See @assistant/config {npc.key} for keys.")
            return
        overrides = dict(npc.attributes.get(documents.CONFIG_OVERRIDES) or {})
        if raw_value.strip().lower() == "default":
            overrides.pop(key, None)
            message = f"{npc.key}: {key} reset to the game default."
        else:
            value = parse_config_value(raw_value)
            overrides[key] = value
            shown = "(hidden)" if key == "llm.api_key" else format_json(value)
            message = f"{npc.key}: {key} = {shown}"
        npc.attributes.add(documents.CONFIG_OVERRIDES, overrides)
        npc.assistant.reset()
        from ai_assistant.sleep.modes import clear_emergency_stop

        clear_emergency_stop(npc.assistant.ports())
        if npc.assistant.script:
            npc.assistant.script.subscribe()
        self.caller.msg(message)

    # --- memory and workspace views --------------------------------------------------------

    def do_journal(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.memory.journal import format_entry, get_journal
        from ai_assistant.memory.search.journal_search import search_journal

        ports = npc.assistant.ports()
        entries = get_journal(ports)["entries"]
        if not self.rhs:
            recent = entries[-15:]
            lines = [f"|wJournal of {npc.key}|n ({len(entries)} entries, newest last)"]
            lines += [f"  {format_entry(entry)}" for entry in recent] or ["  (empty)"]
            self.caller.msg("\n".join(lines))
            return
        query = self.rhs.strip()
        hits = search_journal(ports, query)
        if not hits:
            self.caller.msg(f"No journal entries of {npc.key} match '{query}'.")
            return
        lines = [f"|wJournal of {npc.key}|n: '{query}' ({len(hits)} best, hybrid score)"]
        lines += [f"  {score:.3f}  {format_entry(entry)}" for score, entry in hits]
        self.caller.msg("\n".join(lines))

    def do_memory(self):
        npc = self._npc()
        if not npc:
            return
        if not self.rhs or not self.rhs.strip():
            self.caller.msg("Usage: @assistant/memory <npc> = <query>")
            return
        ports = npc.assistant.ports()
        if ports.semantic is None:
            self.caller.msg(f"{npc.key} has no semantic memory right now (memory.enabled is "
                            "off). Try @assistant/journal instead.")
            return
        from ai_assistant.memory.semantic_recall import (
            format_memory_results,
            retrieve_relevant_memories,
        )

        query = self.rhs.strip()
        caller = self.caller
        deferred = retrieve_relevant_memories(ports, query)
        deferred.addCallback(lambda hits: caller.msg(format_memory_results(query, hits)))
        deferred.addErrback(lambda failure: caller.msg(
            f"|rMemory search failed: {failure.getErrorMessage()}|n"))

    def do_goals(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.workspace.goals import format_goal_tree

        goals = npc.assistant.ports().state.get(documents.CURRENT_GOALS) or []
        self.caller.msg(f"|wGoals of {npc.key}|n\n{format_goal_tree(goals)}")

    def do_projects(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.workspace.projects import format_projects

        doc = npc.assistant.ports().state.get(documents.PROJECTS)
        self.caller.msg(f"|wProjects of {npc.key}|n\n{format_projects(doc)}")

    def do_reflect(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.sleep.reflection import run_reflection

        caller = self.caller
        caller.msg(f"{npc.key} reflects...")

        def _done(report):
            if not report.get("ran"):
                caller.msg(f"{npc.key} did not reflect: {report.get('reason')}")
                return
            insights = "\n".join(
                f"  - {item.get('insight') if isinstance(item, dict) else item}"
                for item in report.get("insights", []))
            caller.msg(f"{npc.key} reflected on {len(report.get('questions', []))} questions; "
                       f"synthesis entry #{report.get('entry_id')}:\n{insights}")

        run_reflection(npc.assistant.ports()).addCallback(_done)

    def do_profile(self):
        npc = self._npc()
        if not npc:
            return
        if not self.rhs or not self.rhs.strip():
            self.caller.msg("Usage: @assistant/profile <npc> = <entity name or #id>")
            return
        from ai_assistant.memory.entities import find_profile, format_profile, get_profiles

        ports = npc.assistant.ports()
        profile = find_profile(ports, self.rhs.strip())
        if profile is None:
            known = ", ".join(sorted(p.get("name") or key for key, p in
                                     get_profiles(ports).items())) or "nobody yet"
            self.caller.msg(f"{npc.key} has no profile of '{self.rhs.strip()}'. Known: {known}.")
            return
        self.caller.msg(f"|wProfile kept by {npc.key}|n\n{format_profile(profile)}")

    def do_patrol(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.sleep.patrol import format_patrol_report, run_patrol

        caller = self.caller
        caller.msg(f"{npc.key} patrols its memories...")
        deferred = run_patrol(npc.assistant.ports())
        deferred.addCallback(lambda report: caller.msg(format_patrol_report(report)))
        deferred.addErrback(lambda failure: caller.msg(
            f"|rPatrol failed: {failure.getErrorMessage()}|n"))

    def do_nodes(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.sleep.patrol.report import format_nodes_overview

        self.caller.msg(format_nodes_overview(npc.assistant.ports()))

    # --- tools ------------------------------------------------------------------------------

    def do_tools(self):
        npc = self._npc()
        if not npc:
            return
        registry = load_all_tools()
        lines = [f"|wTools of {npc.key}|n (also commands on the NPC, except those named like "
                 "a default command)"]
        family = None
        for tool in registry.all():
            if tool.family != family:
                family = tool.family
                lines.append(f"|y{family}|n")
            marker = "" if tool.category != ToolCategory.DANGEROUS else " |r(disabled)|n"
            lines.append(f"  {tool.name:<24} {tool.category.value:<15}{marker} "
                         f"{tool.description.splitlines()[0][:60]}")
        self.caller.msg("\n".join(lines))

    def do_tool(self):
        npc = self._npc()
        if not npc:
            return
        if not self.rhs:
            self.caller.msg("Usage: @assistant/tool <npc> = <tool> [json arguments]")
            return
        tool_name, _, raw_args = self.rhs.strip().partition(" ")
        run_tool_as(npc, self.caller, tool_name, raw_args)


def run_tool_as(npc, caller, tool_name, raw_args):
    """
    Run a tool as `npc` and show `caller` its JSON result (when it is ready).

    Args:
        npc (AssistantMixin): Who acts.
        caller (Object or Account): Who sees the result.
        tool_name (str): The tool.
        raw_args (str): JSON object text; for a tool with one required text parameter,
            plain text is accepted as that parameter.
    """
    registry = load_all_tools()
    tool = registry.get(tool_name)
    arguments = _arguments_for(tool, raw_args)
    ports = npc.assistant.ports()
    deferred = execute_tool(
        tool if tool is not None else tool_name,
        ports,
        arguments,
        cache=npc.assistant.tool_cache(),
        allow_dangerous=bool(ports.settings.get("react.dangerous_tools_enabled")),
    )
    deferred.addCallback(lambda result: caller.msg(
        f"|w{npc.key} {tool_name}|n ->\n{format_json(result)}"))
    deferred.addErrback(lambda failure: caller.msg(f"|r{tool_name} failed: "
                                                   f"{failure.getErrorMessage()}|n"))


def _arguments_for(tool, raw_args):
    raw_args = (raw_args or "").strip()
    if not raw_args or raw_args.startswith("{") or tool is None:
        return raw_args
    required = tool.parameters.get("required", [])
    props = tool.parameters.get("properties", {})
    if len(required) == 1 and props.get(required[0], {}).get("type") == "string":
        return {required[0]: raw_args}
    return raw_args


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
        run_tool_as(npc, self.caller, self.tool_name, self.args)


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

    key = "AssistantToolCmdSet"
    priority = -50
    mergetype = "Union"

    def at_cmdset_creation(self):
        taken = default_command_names()
        for tool in load_all_tools().all():
            if tool.name.lower() not in taken:
                self.add(make_tool_command(tool)())


class AssistantCmdSet(CmdSet):
    """`talk` for everyone and `@assistant` for admins. Add it to your CharacterCmdSet."""

    key = "AssistantCmdSet"

    def at_cmdset_creation(self):
        self.add(CmdTalk())
        self.add(CmdAssistant())
