"""
The read-mostly switches of `@assistant`: journal, memory, goals, projects, reflect, profile,
patrol, nodes, the tool list and running one tool as the NPC.

`AdminViews` is a mixin of `CmdAssistant` (`ai_assistant.admin_commands`); each `do_<switch>`
uses the command's `caller`, `rhs` and `_npc()`.
"""

import json
import textwrap

from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import SCOPED, ToolCategory, execute_tool

TOOL_TEXT_WIDTH = 78


def format_json(data):
    return json.dumps(data, indent=2, sort_keys=True, default=str, ensure_ascii=False)


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


def tool_arguments(tool):
    """
    A tool's arguments in words: `message (string, required), reasoning (string, optional)`.

    Returns:
        str: One entry per parameter, required ones first; "none" for a tool without any.
    """
    props = tool.parameters.get("properties", {})
    required = tool.parameters.get("required", [])
    names = [name for name in required if name in props]
    names += [name for name in props if name not in required]
    parts = []
    for name in names:
        spec = props[name]
        kind = spec.get("type", "any")
        if isinstance(kind, list):
            kind = "/".join(kind)
        if spec.get("enum"):
            kind += " " + "|".join(str(value) for value in spec["enum"])
        parts.append(f"{name} ({kind}, {'required' if name in required else 'optional'})")
    return ", ".join(parts) or "none"


def format_tools(npc, registry):
    """The whole tool list: per family, each tool with its category, arguments and text."""
    lines = [f"|wTools of {npc.key}|n (also commands on the NPC, except those named like "
             "a default command)"]
    family = None
    for tool in registry.all():
        if tool.family != family:
            family = tool.family
            lines.append(f"|y{family}|n")
        marker = "" if tool.category != ToolCategory.DANGEROUS else " |r(disabled)|n"
        # least agency (tools.agency): a lasting tool never runs on a player's word
        reach = "players' turns too" if tool.reach == SCOPED else "own turns and admins only"
        lines.append(f"  |c{tool.name}|n ({tool.category.value}; {reach}){marker}")
        # the whole description, wrapped at word boundaries, never cut
        for paragraph in " ".join(tool.description.split()).split("\n"):
            lines += textwrap.wrap(paragraph, TOOL_TEXT_WIDTH, initial_indent="      ",
                                   subsequent_indent="      ")
        lines += textwrap.wrap(f"arguments: {tool_arguments(tool)}", TOOL_TEXT_WIDTH,
                               initial_indent="      ", subsequent_indent="        ")
    return "\n".join(lines)


class AdminViews:
    """The view switches of `@assistant` (a mixin of `CmdAssistant`)."""

    def do_journal(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.memory.journal import format_entry
        from ai_assistant.memory.search.journal_search import search_journal

        ports = npc.assistant.ports()
        entries = npc.assistant.journal.entries()
        if not self.rhs:
            recent = entries[-15:]
            lines = [f"|wJournal of {npc.key}|n ({len(entries)} entries, newest last)"]
            lines += [f"  {format_entry(entry)}" for entry in recent] or ["  (empty)"]
            self.caller.msg("\n".join(lines))
            return
        query = self.rhs.strip()
        # best first, whatever order the search hands them back in
        hits = sorted(search_journal(ports, query), key=lambda hit: -hit[0])
        if not hits:
            self.caller.msg(f"No journal entries of {npc.key} match '{query}'.")
            return
        lines = [f"|wJournal of {npc.key}|n: '{query}' ({len(hits)} best, hybrid score, "
                 "best first)"]
        lines += [f"  {score:.3f}  {format_entry(entry)}" for score, entry in hits]
        self.caller.msg("\n".join(lines))

    def do_memory(self):
        if "move" in self.switches:  # every assistant's memories to another store
            from ai_assistant.admin_memory_move import start_move

            start_move(self.caller, self.rhs)
            return
        npc = self._npc()
        if not npc:
            return
        if not self.rhs or not self.rhs.strip():
            self.caller.msg("Usage: @assistant/memory <npc> = <query>")
            return
        ports = npc.assistant.ports()
        if not npc.assistant.memories.available:
            self.caller.msg(f"{npc.key} has no semantic memory right now (memory.enabled is "
                            "off). Try @assistant/journal instead.")
            return
        from ai_assistant.memory.recall.long_term import (
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

        goals = npc.assistant.goals.all()
        self.caller.msg(f"|wGoals of {npc.key}|n\n{format_goal_tree(goals)}")

    def do_projects(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.workspace.projects import format_projects

        doc = npc.assistant.projects.document()
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
        from ai_assistant.memory.entities import format_profile

        people = npc.assistant.people
        profile = people.find(self.rhs.strip())
        if profile is None:
            known = ", ".join(sorted(p.get("name") or key for key, p in
                                     people.profiles().items())) or "nobody yet"
            self.caller.msg(f"{npc.key} has no profile of '{self.rhs.strip()}'. Known: {known}.")
            return
        self.caller.msg(f"|wProfile kept by {npc.key}|n\n{format_profile(profile)}")

    def do_patrol(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.sleep.patrol import run_patrol
        from ai_assistant.workspace.status import format_patrol_report

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
        from ai_assistant.workspace.status import format_nodes_overview

        self.caller.msg(format_nodes_overview(npc.assistant.ports()))

    def do_tools(self):
        npc = self._npc()
        if npc:
            self.caller.msg(format_tools(npc, load_all_tools()))

    def do_tool(self):
        npc = self._npc()
        if not npc:
            return
        if not self.rhs:
            self.caller.msg("Usage: @assistant/tool <npc> = <tool> [json arguments]")
            return
        tool_name, _, raw_args = self.rhs.strip().partition(" ")
        run_tool_as(npc, self.caller, tool_name, raw_args)
