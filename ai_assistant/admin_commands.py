"""
`@assistant`, the admins' command: one command, its switches dispatched to `do_<switch>`:
status, create, persona, sleep and wake, config, the views (journal, memory, goals, projects,
profile, nodes, tools) and running a tool or a step (reflect, patrol, tool) as the NPC. The
text the views show is made in `ai_assistant.admin_texts`. `AssistantCmdSet`
(`ai_assistant.commands`) carries it.
"""

from evennia import search_tag
from evennia.commands.default.muxcommand import MuxCommand
from evennia.utils import create, logger
from evennia.utils.utils import at_search_result

from ai_assistant.adapters import game_settings, npc_overrides, store_overrides
from ai_assistant.admin_texts import (
    format_json,
    format_tools,
    journal_text,
    persona_text,
    persona_versions_text,
)
from ai_assistant.handler import ASSISTANT_TAG, is_assistant
from ai_assistant.plumbing.settings import GAME_WIDE_ERROR, SettingError, Settings, validate
from ai_assistant.reports import HIDDEN_SETTINGS
from ai_assistant.tools.catalogue import load_all_tools
from ai_assistant.tools.registry import execute_tool

MAX_NAME_LENGTH = 40
RESET_WORD = "default"  # `/config <npc> = <key> default` and `/persona <npc> = default`


def find_assistant(name, caller=None):
    """
    Args:
        name (str): An assistant's name (case-insensitive) or dbref; with a `caller`, also
            Evennia's "Ada-2" to pick one of several called Ada.
        caller (Object, optional): Who asks. Given, several assistants of that name get
            Evennia's usual multimatch prompt (sent to them) rather than a silent pick.

    Returns:
        tuple: `(assistant, None)` or `(None, error message)`; the message is "" when the
        caller was already told (a multimatch).
    """
    name = (name or "").strip()
    assistants = all_assistants()
    if not name:
        return None, "Name an assistant."
    if caller is not None:
        matches = caller.search(name, candidates=assistants, exact=True, quiet=True,
                                use_locks=False)
        if len(matches) > 1:
            at_search_result(matches, caller, query=name)
            return None, ""
        if matches:
            return matches[0], None
    for npc in assistants:
        if npc.key.lower() == name.lower() or npc.dbref == name:
            return npc, None
    known = ", ".join(sorted(npc.key for npc in assistants)) or "none yet"
    return None, f"No assistant called '{name}'. Assistants: {known}."


def all_assistants():
    return [obj for obj in search_tag(ASSISTANT_TAG[0], category=ASSISTANT_TAG[1])
            if is_assistant(obj)]


def parse_config_value(text):
    """A config value: JSON when it parses (numbers, true, null, lists), else the raw string."""
    import json

    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def persona_limit(npc):
    """The longest persona an admin may set (as long as the assistant's own guidelines)."""
    return int(npc.assistant.ports().settings.get("workspace.system_prompt.max_chars"))


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


def set_persona(npc, text, by, reason="set by an admin"):
    """
    Set (or, with None, remove) the admin's persona of `npc`: its admins' instructions
    (`memory.persona.Persona.instruct`), as a numbered version beside the assistant's own
    guidelines, so an overwritten persona can be put back with `/persona/revert`.

    The assistant's own `update_system_prompt` changes its own guidelines, never these; the
    prompt places these last and says they take precedence, so the assistant may extend them but
    never override them.
    """
    npc.assistant.persona.instruct(text, reason=reason, by=by)
    npc.assistant.flush()


class CmdAssistant(MuxCommand):
    """
    Manage AI assistant NPCs.

    Usage:
      @assistant [<npc>]                     - status (all assistants, or one)
      @assistant/create <name> [= <persona>] - create an assistant here, awake and ticking
      @assistant/persona <npc> [= <text>]    - show or set the admins' persona of it
      @assistant/persona/history <npc>       - the versions of its persona and own guidelines
      @assistant/persona/revert <npc> = <n>  - put back version <n> (persona or guidelines)
      @assistant/sleep <npc>                 - put it to sleep (memory consolidation)
      @assistant/wake <npc>                  - wake it (deferred while it is compacting)
      @assistant/wake/force <npc>            - wake it now, even while compacting
      @assistant/config <npc> [= key value]  - show or set a per-NPC setting
      @assistant/config/keys <npc> [= prefix]- every setting: value, default, range, doc
      @assistant/journal <npc> [= <query>]   - recent journal entries, or a scored search
      @assistant/memory <npc> = <query>      - semantic recall (mem0), with scores and trust
      @assistant/memory/move = postgres      - move every assistant's memories to PostgreSQL
                                               (= embedded moves them back); game keeps running
      @assistant/goals <npc>                 - the goal tree with progress
      @assistant/projects <npc>              - project slots
      @assistant/reflect <npc>               - run a reflection now
      @assistant/profile <npc> = <entity>    - an entity profile and relationship
      @assistant/patrol <npc>                - run the memory patrol now (nodes, clusters)
      @assistant/nodes <npc>                 - the memory graph at a glance
      @assistant/tools <npc>                 - its ReAct tools, their arguments and text
      @assistant/tool <npc> = <tool> [json]  - run one tool as the NPC

    The persona is who the assistant is, in the admins' words ("You are Ada, the archivist of
    the harbour library..."); the assistant may add guidelines of its own but never override
    it. `= default` removes it. Its description is the ordinary `@desc`. Every change of the
    persona by an admin and of its own guidelines by the assistant is a numbered version:
    /history lists them (which, who, when, why, the text), /revert puts one back (itself a new
    version, so it can be undone).

    Per-NPC settings use the dotted keys of AI_ASSISTANT, e.g.
      @assistant/config Ada = llm.model gpt-4o-mini
      @assistant/config Ada = ticks.awake 10
      @assistant/config Ada = llm.model default      (remove the override)
    A value outside the setting's range is refused, and the message names the range.
    """

    key = "@assistant"
    aliases = ["@assistants"]
    locks = "cmd:perm(Admin)"
    help_category = "Admin"
    # validated in func (not MuxCommand's switch_options, which only warns and ignores)
    valid_switches = ("create", "persona", "sleep", "wake", "config", "journal", "memory",
                      "goals", "projects", "reflect", "profile", "patrol", "nodes", "tools",
                      "tool")
    # switches that only modify another: /wake/force
    modifiers = {"force": "wake", "history": "persona", "revert": "persona", "keys": "config",
                 "move": "memory"}

    def func(self):
        switches = [name for name in self.switches if name not in self.modifiers]
        modifiers = [name for name in self.switches if name in self.modifiers]
        switch = switches[0] if switches else "status"
        combined = ", ".join(f"/{base}/{name}" for name, base in self.modifiers.items())
        if len(switches) > 1 or any(self.modifiers[name] != switch for name in modifiers):
            self.caller.msg(f"Use one switch at a time (or one of {combined}).")
            return
        handler = getattr(self, f"do_{switch}", None)
        if handler is None or (switch != "status" and switch not in self.valid_switches):
            valid = ", ".join(f"/{name}" for name in self.valid_switches)
            self.caller.msg(f"Unknown switch '/{switch}'. Valid switches: {valid}, {combined}.")
            return
        try:
            handler()
        except Exception as err:  # never a traceback to the player
            logger.log_trace()
            self.caller.msg(f"|r@assistant/{switch} failed: {err}|n")

    def _npc(self, name=None):
        npc, error = find_assistant(self.lhs if name is None else name, caller=self.caller)
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

    # --- create and persona -----------------------------------------------------------------

    def do_create(self):
        caller = self.caller
        name, persona = self.lhs.strip(), (self.rhs or "").strip()
        if not name:
            caller.msg("Usage: @assistant/create <name> [= <persona>]")
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
        limit = int(Settings(game_settings()).get("workspace.system_prompt.max_chars"))
        if len(persona) > limit:
            caller.msg(f"That persona is too long ({len(persona)} > {limit} characters).")
            return
        typeclass = Settings(game_settings()).get("typeclass")
        npc = create.create_object(typeclass, key=name, location=location, home=location)
        if npc is None or not is_assistant(npc):
            caller.msg(f"Could not create an assistant from typeclass {typeclass} (it needs "
                       "ai_assistant.handler.AssistantMixin).")
            return
        if persona:
            set_persona(npc, persona, f"admin {caller.key}", "given at creation")
        interval = npc.assistant.script.ticker_interval
        with_persona = " with your persona" if persona else ""
        caller.msg(f"Created assistant {npc.key} ({npc.dbref}){with_persona}: awake, ticking "
                   f"every {interval}s. Describe it with @desc {npc.key} = <description>.")
        location.msg_contents("{npc} appears.", exclude=[caller], mapping={"npc": npc})

    def do_persona(self):
        npc = self._npc()
        if not npc:
            return
        if "history" in self.switches or "revert" in self.switches:
            self._persona_versions(npc)
            return
        if not self.rhs or not self.rhs.strip():
            self.caller.msg(persona_text(npc))
            return
        text = self.rhs.strip()
        if text.lower() == RESET_WORD:
            set_persona(npc, None, f"admin {self.caller.key}", "removed by an admin")
            self.caller.msg(f"{npc.key}: persona removed (the default persona is used).")
            return
        limit = persona_limit(npc)
        if len(text) > limit:
            self.caller.msg(f"That persona is too long ({len(text)} > {limit} characters).")
            return
        set_persona(npc, text, f"admin {self.caller.key}")
        self.caller.msg(f"{npc.key}: persona set ({len(text)} characters).")

    def _persona_versions(self, npc):
        """`/persona/history`: list the versions; `/persona/revert <npc> = <n>`: put one back."""
        from ai_assistant.memory.persona import PersonaVersionError

        persona = npc.assistant.persona
        if "revert" in self.switches:
            number = (self.rhs or "").strip().lstrip("v")
            if not number.lstrip("-").isdigit():
                self.caller.msg(f"Usage: @assistant/persona/revert {npc.key} = <version number> "
                                f"(see @assistant/persona/history {npc.key})")
                return
            try:
                version = persona.revert(int(number), f"admin {self.caller.key}")
            except PersonaVersionError as err:
                self.caller.msg(f"{npc.key}: not reverted: {err}.")
                return
            npc.assistant.flush()
            what = "its persona is" if version["which"] == "persona" else "its own guidelines are"
            self.caller.msg(f"{npc.key}: {what} back to version {number} "
                            f"(recorded as version {version['version']}).")
            return
        self.caller.msg(persona_versions_text(npc, persona.versions()))

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
        interval = assistant.script.ticker_interval
        self.caller.msg(f"{npc.key} is now asleep (phase: compacting; ticker {interval}s).")

    def do_wake(self):
        npc = self._npc()
        if not npc:
            return
        from ai_assistant.sleep.modes import force_wake, request_wake

        wake = force_wake if "force" in self.switches else request_wake
        outcome = wake(npc.assistant.ports(), f"admin {self.caller.key}", npc.assistant.set_mode)
        if npc.assistant.operating_mode == "awake" and npc.assistant.script:
            npc.assistant.script.poke()  # answer whoever waited, now
        self.caller.msg(f"{npc.key}: {outcome}")

    # --- config -----------------------------------------------------------------------------

    def do_config(self):
        npc = self._npc()
        if not npc:
            return
        if "keys" in self.switches:
            from ai_assistant.reports import format_setting_keys

            self.caller.msg(format_setting_keys(npc, self.rhs or ""))
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
        if not Settings.known_key(key):
            self.caller.msg(f"Unknown setting '{key}'. Every key, with its range and doc: "
                            f"@assistant/config/keys {npc.key}")
            return
        if Settings.game_wide(key):
            self.caller.msg(f"{npc.key}: not changed: {GAME_WIDE_ERROR.format(key=key)}.")
            return
        overrides = npc_overrides(npc)
        if raw_value.strip().lower() == RESET_WORD:
            overrides.pop(key, None)
            message = f"{npc.key}: {key} reset to the game default."
        else:
            try:  # checked before anything is stored
                value = validate(key, parse_config_value(raw_value))
            except SettingError as err:
                self.caller.msg(f"{npc.key}: not changed: {err}.")
                return
            overrides[key] = value
            shown = "(hidden)" if key in HIDDEN_SETTINGS else format_json(value)
            message = f"{npc.key}: {key} = {shown}"
        store_overrides(npc, overrides)
        npc.assistant.reset()
        from ai_assistant.sleep.modes import clear_emergency_stop

        if clear_emergency_stop(npc.assistant.ports()):
            message += " (emergency stop cleared)"
        if npc.assistant.script:
            npc.assistant.script.subscribe()
        self.caller.msg(message)

    # --- views and tools ------------------------------------------------------------------

    def do_journal(self):
        npc = self._npc()
        if npc:
            self.caller.msg(journal_text(npc, (self.rhs or "").strip()))

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
        from ai_assistant.workspace.status import format_profile

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
