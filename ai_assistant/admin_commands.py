"""
`@assistant`, the admins' command: status, create, persona, sleep and wake, config; the view
switches (journal, memory, tools...) are in `ai_assistant.admin_views`. `AssistantCmdSet`
(`ai_assistant.commands`) carries it.
"""

from evennia import search_tag
from evennia.commands.default.muxcommand import MuxCommand
from evennia.utils import create, logger
from evennia.utils.utils import at_search_result

from ai_assistant.adapters import game_settings
from ai_assistant.admin_views import AdminViews, format_json
from ai_assistant.handler import ASSISTANT_TAG, is_assistant
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.settings import SettingError, Settings, validate
from ai_assistant.reports import HIDDEN_SETTINGS

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


def set_persona(npc, text):
    """
    Set (or, with None, remove) the admin's persona of `npc`: its admins' instructions
    (`memory.persona.Persona.instruct`).

    The assistant's own `update_system_prompt` changes its own guidelines, never these; the
    prompt places these last and says they take precedence, so the assistant may extend them but
    never override them.
    """
    npc.assistant.persona.instruct(text)
    npc.assistant.flush()


class CmdAssistant(AdminViews, MuxCommand):
    """
    Manage AI assistant NPCs.

    Usage:
      @assistant [<npc>]                     - status (all assistants, or one)
      @assistant/create <name> [= <persona>] - create an assistant here, awake and ticking
      @assistant/persona <npc> [= <text>]    - show or set the admins' persona of it
      @assistant/persona/history <npc>       - the versions of its own guidelines
      @assistant/persona/revert <npc> = <n>  - put back version <n> of its own guidelines
      @assistant/sleep <npc>                 - put it to sleep (memory consolidation)
      @assistant/wake <npc>                  - wake it (deferred while it is compacting)
      @assistant/wake/force <npc>            - wake it now, even while compacting
      @assistant/config <npc> [= key value]  - show or set a per-NPC setting
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
    it. `= default` removes it. Its description is the ordinary `@desc`. Every change the
    assistant makes to its own guidelines is a numbered version: /history lists them (who,
    when, why, the text), /revert puts one back (itself a new version, so it can be undone).

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
    modifiers = {"force": "wake", "history": "persona", "revert": "persona", "move": "memory"}

    def func(self):
        switches = [name for name in self.switches if name not in self.modifiers]
        modifiers = [name for name in self.switches if name in self.modifiers]
        switch = switches[0] if switches else "status"
        if len(switches) > 1 or any(self.modifiers[name] != switch for name in modifiers):
            self.caller.msg("Use one switch at a time (and /force only with /wake).")
            return
        handler = getattr(self, f"do_{switch}", None)
        if handler is None or (switch != "status" and switch not in self.valid_switches):
            valid = ", ".join(f"/{name}" for name in self.valid_switches)
            self.caller.msg(f"Unknown switch '/{switch}'. Valid switches: {valid}, "
                            "/wake/force.")
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
            set_persona(npc, persona)
        interval = npc.assistant.script.attributes.get(documents.TICKER_INTERVAL)
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
            own = npc.assistant.persona.own_guidelines()
            persona = npc.assistant.persona.admin_instructions()
            lines = [f"|wPersona of {npc.key}|n (set by admins; the assistant cannot change it)",
                     f"  {persona}" if persona else "  (none: the default persona is used)"]
            if own:
                lines += ["|wIts own guidelines|n (update_system_prompt; they extend the "
                          "persona)", f"  {own}",
                          f"  (every version: @assistant/persona/history {npc.key})"]
            lines.append(f"|wDescription|n (@desc): {npc.db.desc or '(none)'}")
            self.caller.msg("\n".join(lines))
            return
        text = self.rhs.strip()
        if text.lower() == RESET_WORD:
            set_persona(npc, None)
            self.caller.msg(f"{npc.key}: persona removed (the default persona is used).")
            return
        limit = persona_limit(npc)
        if len(text) > limit:
            self.caller.msg(f"That persona is too long ({len(text)} > {limit} characters).")
            return
        set_persona(npc, text)
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
            self.caller.msg(f"{npc.key}: its own guidelines are back to version {number} "
                            f"(recorded as version {version['version']}).")
            return
        listed = persona.versions()
        if not listed:
            self.caller.msg(f"{npc.key} has not changed its own guidelines.")
            return
        lines = [f"|wVersions of {npc.key}'s own guidelines|n (oldest first; "
                 f"@assistant/persona/revert {npc.key} = <n>)"]
        for item in listed:
            when = f" {item['time']}" if item["time"] else ""
            who = f" by {item['by']}" if item["by"] else ""
            text = item["prompt"] if item["kept"] else "(text not kept)"
            lines.append(f"  |w{item['version']}|n{when}{who}: {item['reason'] or ''}")
            lines.append(f"      {text if text else '(none: no guidelines of its own)'}")
        self.caller.msg("\n".join(lines))

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
            self.caller.msg(f"Unknown setting '{key}'. See @assistant/config {npc.key} for keys.")
            return
        overrides = dict(npc.attributes.get(documents.CONFIG_OVERRIDES) or {})
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
        npc.attributes.add(documents.CONFIG_OVERRIDES, overrides)
        npc.assistant.reset()
        from ai_assistant.sleep.modes import clear_emergency_stop

        if clear_emergency_stop(npc.assistant.ports()):
            message += " (emergency stop cleared)"
        if npc.assistant.script:
            npc.assistant.script.subscribe()
        self.caller.msg(message)
