"""
The assistant handler, and the mixin that makes any NPC typeclass an AI assistant.

As Evennia's buffs and traits contribs do, everything the assistant does lives on a handler,
`AssistantHandler`, that the typeclass exposes as a lazy property:

    from evennia import DefaultCharacter
    from ai_assistant.handler import AssistantMixin

    class Librarian(AssistantMixin, DefaultCharacter):
        pass

    librarian.assistant.hear(player, "hello", "talk")
    librarian.assistant.operating_mode            # "awake" or "sleep"

`AssistantMixin` adds the handler (`obj.assistant`) and the hooks that wire it to the game:
creation (tag, tool cmdset, script), hearing the room (`at_msg_receive`) and flushing state
before a reload or shutdown. The thinking happens in the core; the handler hands it the ports.
"""

import functools
import json

from evennia.utils import logger
from evennia.utils.utils import delay, lazy_property, make_iter
from twisted.internet import reactor

from ai_assistant import heard_line
from ai_assistant.adapters import build_ports
from ai_assistant.agent import perception
from ai_assistant.memory.conversation import Conversation
from ai_assistant.memory.entities import People
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm.links import MemoryLinks
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.nodes import Nodes
from ai_assistant.memory.perception_queue import PerceptionQueue
from ai_assistant.memory.persona import Persona
from ai_assistant.plumbing import documents, residency
from ai_assistant.plumbing.llm import LLMStats
from ai_assistant.plumbing.runtime import AssistantRuntime
from ai_assistant.workspace.goals import Goals
from ai_assistant.workspace.loop_state import LoopState
from ai_assistant.workspace.mode import Mode
from ai_assistant.workspace.projects import Projects
from ai_assistant.workspace.session_memory import SessionMemory

SCRIPT_KEY = "ai_assistant"
ASSISTANT_TAG = ("ai_assistant", "ai_assistant")
TOOL_CMDSET_KEY = "AssistantToolCmdSet"


def is_assistant(obj):
    """True when `obj` is an AI assistant (its typeclass has `AssistantMixin`)."""
    return isinstance(obj, AssistantMixin)


def never_raises(hook):
    """
    A hook Evennia calls while it starts, reloads or stops (or on a timer) must not raise: in
    `update_scripts_after_server_start` one exception skips every later script's start, the task
    and on-demand handlers and the "Server restarted" message. A failure is logged, with its
    traceback, once per call, and the hook returns None.
    """

    @functools.wraps(hook)
    def guarded(self, *args, **kwargs):
        try:
            return hook(self, *args, **kwargs)
        except Exception:  # noqa: BLE001 - see above: nothing may escape into Evennia's loop
            logger.log_trace(f"[ai_assistant] {hook.__name__} of {self.key} (#{self.id}) failed")
            return None

    return guarded


# what an assistant keeps in its object's ndb (its handler's caches)
_NDB_CACHES = ("ai_ports", "ai_runtime", "assistant_script", "llm_client",
               "llm_client_signature", "tool_cache", "ai_state_cache", "ai_state_dirty")


# where `retire` keeps the script's documents while the object is no assistant
_RETIRED = ("script_documents", "ai_assistant_retired")


def retire(obj, script=None):
    """
    Take off an object what being an assistant gave it, once it is one no more (`@typeclass`
    swapped it to a class without `AssistantMixin`; its script calls this as it is deleted).

    As deleting the NPC would: its tool commands, its tag and its write-ahead log go, after
    what it still held in memory reached the database. Unlike deleting it, its Attributes stay
    - its memory scope, overrides, journal - so that swapping it back brings the same assistant
    back, with the same long-term memories.

    The documents kept on its script (mode, conversation, memory links, goals...) are kept on
    the object until it is an assistant again (`at_object_creation` hands them to its new
    script).

    Args:
        obj (Object): The object that was an assistant.
        script (AssistantScript, optional): Its script, being deleted.
    """
    from ai_assistant import durability

    ports = obj.ndb.ai_ports
    if ports is not None:  # swapped in this process: its write-behind cache is still here
        ports.state.flush()
    if script is not None:
        kept = {name: script.attributes.get(name) for name in documents.kept_in_state(
            documents.SCRIPT) if script.attributes.has(name)}
        obj.attributes.add(_RETIRED[0], kept, category=_RETIRED[1])
    durability.remove_log(obj)
    # by path, and by key for a game's own tool cmdset made from the contrib's
    obj.cmdset.remove(AssistantMixin.assistant_tool_cmdset)
    obj.cmdset.remove(TOOL_CMDSET_KEY)
    obj.tags.remove(*ASSISTANT_TAG)
    if obj.ndb.ai_runtime is not None:  # what it held in memory is no assistant's now
        residency.RESIDENCY.forget(obj.ndb.ai_runtime)
    for name in _NDB_CACHES:
        obj.nattributes.remove(name)


class AssistantHandler:
    """
    Everything one assistant NPC does, reached as `npc.assistant`.

    It keeps no state of its own beyond the NPC: its caches (ports, LLM client, tool cache, the
    per-assistant `AssistantRuntime`) live in the NPC's `ndb`, so they survive the handler being
    rebuilt and start empty after a reload; what must survive a reload is a state document.

    Args:
        obj (AssistantMixin): The NPC.
    """

    def __init__(self, obj):
        self.obj = obj

    # --- wiring -----------------------------------------------------------------------------

    @property
    def script(self):
        """The NPC's `AssistantScript` (its heartbeat), or None if it has none."""
        script = self.obj.ndb.assistant_script
        if script is None or not script.id:
            found = self.obj.scripts.get(SCRIPT_KEY)
            script = self.obj.ndb.assistant_script = found[0] if found else None
        return script

    @property
    def runtime(self):
        """The NPC's `AssistantRuntime`: one per NPC, kept across rebuilt ports."""
        runtime = self.obj.ndb.ai_runtime
        if runtime is None:
            runtime = self.obj.ndb.ai_runtime = AssistantRuntime()
        return runtime

    @property
    def memory_scope(self):
        """
        The id that scopes the NPC's long-term memories: random, given at creation, so a
        database that reuses object ids never hands a new assistant an old one's memories (one
        found without a scope draws one the same way; see `adapters.memory_scope`).
        """
        from ai_assistant.adapters import memory_scope

        return memory_scope(self.obj)

    def forget_memories(self):
        """
        Delete the NPC's long-term memories from the shared store (it is being deleted): its
        points and their history, off the reactor. Its state documents (journal, nodes and
        their vectors, profiles) are Attributes, deleted with it.

        Returns:
            Deferred or None: Fires with the count deleted; None when memory is off.
        """
        memories = self.memories
        if not memories.available:
            return None
        name, scope = self.obj.key, self.memory_scope

        def _done(count):
            logger.log_info(f"[ai_assistant] {name}: deleted {count} memories of {scope}")
            return count

        def _failed(failure):
            logger.log_err(f"[ai_assistant] {name}: could not delete the memories of {scope}: "
                           f"{failure.getErrorMessage()}")

        return memories.forget_all().addCallbacks(_done, _failed)

    def ports(self):
        """The core's ports for this NPC, cached until its config changes (`reset`)."""
        ports = self.obj.ndb.ai_ports
        if ports is None:
            ports = self.obj.ndb.ai_ports = build_ports(self.obj, runtime=self.runtime)
        return ports

    def reset(self):
        """Forget the cached ports and LLM client (after `@assistant/config`)."""
        self.obj.ndb.ai_ports = None
        self.obj.ndb.llm_client = None
        self.obj.ndb.llm_client_signature = None

    def renew(self):
        """
        Re-read everything from the database: after Attributes were written from outside the
        state documents (a prototype's `attrs`), the caches would hide them.
        """
        self.flush()
        for owner in (self.obj, self.script):
            if owner is not None:
                owner.ndb.ai_state_cache = owner.ndb.ai_state_dirty = None
        self.reset()
        if self.script:
            self.script.subscribe()

    def llm_client(self, settings, overrides=None):
        """
        The LLM client for `settings["llm"]`, rebuilt only when that configuration changes.

        Args:
            settings (Settings): The NPC's settings.
            overrides (dict, optional): Its `@assistant/config` overrides, when the caller has
                read them already (they say where each LLM setting came from, for the log).

        Returns:
            LLMClient or None: None in mechanical mode (no endpoint configured).
        """
        from ai_assistant.adapters import AttributeState, llm_sources, log_to_server
        from ai_assistant.plumbing.llm import make_llm_client

        config = settings.get("llm")
        signature = json.dumps(config, sort_keys=True, default=str)
        if self.obj.ndb.llm_client_signature != signature:
            self.obj.ndb.llm_client = make_llm_client(
                config,
                npc_key=f"assistant_{self.obj.id}",
                npc_name=self.obj.key,
                state=AttributeState(self.obj),
                log=log_to_server,
                sources=llm_sources(self.obj, overrides),
            )
            self.obj.ndb.llm_client_signature = signature
        return self.obj.ndb.llm_client

    def warm_up(self):
        """
        Make ready, in the background, what this assistant's next reply needs and what a first
        command in its room reads (`room_warm_up.warm_up`): at every server start and reload.

        Returns:
            Deferred[dict]: What was warmed; never errbacks.
        """
        from ai_assistant.room_warm_up import warm_up

        if self.obj.pk is None:  # deleted before its turn came
            return None
        return warm_up(self.obj, self.ports())

    def tool_cache(self):
        """The NPC's `ToolCache` (tool results reused within a tick)."""
        from ai_assistant.tools.registry import ToolCache

        if self.obj.ndb.tool_cache is None:
            self.obj.ndb.tool_cache = ToolCache()
        return self.obj.ndb.tool_cache

    def flush(self):
        """Write every changed state document to its Attribute (what it overheard first)."""
        heard_line.take_overheard(self)
        self.ports().state.flush()

    # --- stores (each the only code that reads or writes its documents) ---------------------

    @property
    def journal(self):
        """The journal (`memory.journal.Journal`): episodic entries, consolidation marks."""
        return Journal(self.ports())

    @property
    def people(self):
        """The people it knows (`memory.entities.People`): profiles and relationships."""
        return People(self.ports())

    @property
    def nodes(self):
        """Its memory nodes (`memory.nodes.Nodes`): scene notes, nodes, clusters, vectors."""
        return Nodes(self.ports())

    @property
    def conversation(self):
        """What was said (`memory.conversation.Conversation`): history, working memory."""
        return Conversation(self.ports())

    @property
    def perception(self):
        """What it perceived and has not handled yet (`memory.perception_queue`)."""
        return PerceptionQueue(self.ports())

    @property
    def loop(self):
        """The ReAct loop's record of itself (`workspace.loop_state.LoopState`)."""
        return LoopState(self.ports())

    @property
    def llm_stats(self):
        """Its LLM calls, tokens, errors and emergency stop (`plumbing.llm.LLMStats`)."""
        return LLMStats(self.ports().state)

    @property
    def persona(self):
        """Who it is told to be (`memory.persona.Persona`): guidelines, the admins' words."""
        return Persona(self.ports())

    @property
    def memories(self):
        """Its long-term memories (`memory.longterm.memories.Memories`): add, search, correct."""
        return Memories(self.ports())

    @property
    def memory_links(self):
        """The links of its long-term memories (`memory.longterm.links.MemoryLinks`)."""
        return MemoryLinks(self.ports())

    @property
    def mode(self):
        """Its mode and sleep state (`workspace.mode.Mode`)."""
        return Mode(self.ports())

    @property
    def goals(self):
        """Its goals (`workspace.goals.Goals`)."""
        return Goals(self.ports())

    @property
    def projects(self):
        """Its projects (`workspace.projects.Projects`)."""
        return Projects(self.ports())

    @property
    def session(self):
        """Its session memory (`workspace.session_memory.SessionMemory`)."""
        return SessionMemory(self.ports())

    @property
    def operating_mode(self):
        """The operating mode: "awake" or "sleep"."""
        return self.mode.current()

    # --- modes ------------------------------------------------------------------------------

    def set_mode(self, target, reason):
        """
        Switch between awake and sleep: record why, swap the ticker, tell the room.

        This is the `transition` callback the sleep logic (`ai_assistant.sleep.modes`) calls.

        Args:
            target (str): "awake" or "sleep".
            reason (str): Why (logged and kept in the mode history).

        Returns:
            bool: False if already in `target`.
        """
        ports = self.ports()
        current = Mode(ports).switch(target, reason)
        if current is None:
            return False
        ports.state.flush()  # a mode change (and all before it) reaches the database at once
        if self.script:
            self.script.subscribe()
        logger.log_info(f"[ai_assistant] {self.obj.key}: {current} -> {target} ({reason})")
        if self.obj.location:
            verb = "$conj(doze) off." if target == "sleep" else "$conj(wake) up."
            self.obj.location.msg_contents(f"$You() {verb}", from_obj=self.obj)
        return True

    # --- perception -------------------------------------------------------------------------

    def hear(self, sender, text, kind, overheard=False):
        """
        Perceive something and queue it as an event (`heard_line`).

        Args:
            sender (Object): Who caused it.
            text (str): What was said or done.
            kind (str): "talk", "say", "whisper", "pose", "arrive", "depart".
            overheard (bool): Heard in the room (`receive`): a line not said to this NPC is
                taken in a reactor turn of its own (`heard_line.overhear`).

        Returns:
            dict or None: The queued event (None for the NPC's own echo, or a line overheard).
        """
        ports = self.ports()
        names = [self.obj.key, *self.obj.aliases.all()]
        classification = perception.classify(kind, text, names=names,
                                             from_self=sender is self.obj)
        if classification == "self":
            return None
        facts = heard_line.line_facts(sender, kind, text, ports.clock)
        if overheard and not heard_line.said_to(sender, classification):
            heard_line.overhear(self, sender, text, kind, classification, facts)
            return None
        heard_line.take_overheard(self)  # what it overheard before comes first
        if classification == "direct_addressing" and not sender.has_account:
            # other NPCs (and other assistants) are heard, not answered: no endless NPC chatter
            classification = "room_chatter"
        return heard_line.take(self, sender, text, kind, classification, facts)

    def after_hearing(self, ports, sender, event):
        """An event was queued: a sleeper may show a sign or wake; an urgent one is answered."""
        mode = self.operating_mode
        if mode == "sleep" and sender.has_account:
            self._heard_while_asleep(ports, sender, event)
        if event["urgent"] and mode == "awake" and self.script:
            self.script.poke()

    def _heard_while_asleep(self, ports, sender, event):
        """A player talked to the sleeper: one sign of sleep; a light sleeper wakes."""
        from ai_assistant.sleep import modes

        sign = modes.sleep_sign(ports, event)
        if sign:
            sender.msg(sign)  # in character, to that player alone
        if event["urgent"] and modes.wake_light_sleeper(ports, self.set_mode) and self.script:
            self.script.poke()  # answer now, not at the next awake tick

    def receive(self, text=None, from_obj=None, **kwargs):
        """
        Hear a message sent to the NPC (`at_msg_receive`): speech, poses and movement.

        Args:
            text (str or tuple): The message, or `(message, {"type": ...})`.
            from_obj (Object or list): Who sent it.
            **kwargs: The message's other options (`type` among them).
        """
        senders = [obj for obj in make_iter(from_obj) if hasattr(obj, "has_account")]
        if not senders or senders[0] is self.obj or text is None:
            return
        sender = senders[0]
        message, meta = (text[0], text[1] if len(text) > 1 else {}) if isinstance(
            text, tuple | list) else (text, {})
        message = heard_line.plain_text(str(message or ""))
        msg_type = (meta or {}).get("type") or kwargs.get("type")
        if msg_type in ("say", "whisper"):
            self.hear(sender, perception.extract_speech(message), msg_type, overheard=True)
        elif msg_type == "pose":
            self.hear(sender, message, "pose", overheard=True)
        elif msg_type in ("move", "teleport") or (msg_type or "").startswith("move"):
            # announce_move_from runs before the move, announce_move_to after: look once the
            # move has finished to know which this was
            delay(0, self._note_movement, sender)

    def _note_movement(self, sender):
        if sender.location == self.obj.location:
            self.hear(sender, f"{sender.key} arrives.", "arrive")
        else:
            self.hear(sender, f"{sender.key} leaves.", "depart")

    # --- thinking ---------------------------------------------------------------------------

    def run_tick(self, mode):
        """
        One tick of work in `mode`.

        Args:
            mode (str): "awake" or "sleep".

        Returns:
            Deferred or None: The tick's work, or None when there was nothing to do.
        """
        from ai_assistant.agent.react import run_react_cycle

        ports = self.ports()
        if mode == "awake":
            return self._awake_tick(ports, run_react_cycle)
        from ai_assistant.sleep.cycle import run_sleep_tick

        return run_sleep_tick(ports, self.set_mode, run_cycle=run_react_cycle)

    def _awake_tick(self, ports, run_cycle):
        """An awake tick: a sleep request or the schedule first, then what was heard."""
        from ai_assistant.sleep import modes

        Mode(ports).count_awake_tick()
        if modes.take_sleep_request(ports, self.set_mode):
            return None
        should_sleep, target, reason = modes.check_sleep_schedule(ports)
        if should_sleep and target == "sleep":
            modes.enter_sleep(ports, reason, self.set_mode)
            return None
        if not PerceptionQueue(ports).waiting():
            return None
        # (each one imported ahead by the warm-up: server_warm_up.import_tick_modules)
        from ai_assistant.agent.awake import run_awake_tick
        from ai_assistant.sleep.compaction import compact_if_emergency

        return run_awake_tick(
            ports,
            run_cycle=run_cycle,
            call_later=reactor.callLater,
            cache=self.tool_cache(),
            compact=compact_if_emergency,
        )


class AssistantMixin:
    """
    Makes an NPC typeclass an AI assistant: `class Librarian(AssistantMixin, DefaultCharacter)`.

    Put it before the Evennia base class so its hooks run first; each calls `super()`.

    Attributes:
        assistant (AssistantHandler): Everything the assistant does.
        assistant_script_typeclass (str): The script that drives its ticks.
        assistant_tool_cmdset (str): The cmdset of its tools, as commands.
    """

    assistant_script_typeclass = "ai_assistant.typeclasses.AssistantScript"
    assistant_tool_cmdset = "ai_assistant.commands.AssistantToolCmdSet"

    @lazy_property
    def assistant(self):
        return AssistantHandler(self)

    def at_object_creation(self):
        """
        Tag the NPC, give it its tools as commands and start its script.

        Also run when an object becomes an assistant again (`@typeclass` back to an assistant
        class runs this hook): what it still has - its memory scope, its overrides, its script
        and tool cmdset - is kept, never drawn or added twice.
        """
        from ai_assistant.adapters import keep_or_start_overrides, memory_scope

        super().at_object_creation()
        self.tags.add(*ASSISTANT_TAG)
        if not self.cmdset.has(self.assistant_tool_cmdset):
            self.cmdset.add(self.assistant_tool_cmdset, persistent=True)
        keep_or_start_overrides(self)
        memory_scope(self)
        if self.assistant.script is None:
            self.scripts.add(self.assistant_script_typeclass, key=SCRIPT_KEY, autostart=True)
            # an assistant again (`@typeclass` back): its script's documents come back
            kept = self.attributes.get(_RETIRED[0], category=_RETIRED[1])
            if kept:
                self.assistant.script.attributes.batch_add(*kept.items())
                self.attributes.remove(_RETIRED[0], category=_RETIRED[1])
        self.assistant.script.subscribe()

    def at_object_post_creation(self):
        """
        Take up what creation gave it after `at_object_creation`: a prototype's (or
        `create_object`'s) Attributes are written only then - its persona, its per-NPC
        settings (`config_overrides`) - so the cached ports and the ticker's rate are renewed.
        """
        super().at_object_post_creation()
        self.assistant.renew()

    def at_object_post_spawn(self, prototype=None):
        """Spawned or updated from a prototype (`spawn`): take up its Attributes too."""
        super().at_object_post_spawn(prototype=prototype)
        self.assistant.renew()

    def at_object_delete(self):
        """Deleted: its memories go with it, from every store (whispers included)."""
        if not super().at_object_delete():
            return False
        self.assistant.forget_memories()
        return True

    def at_post_unpuppet(self, account=None, session=None, **kwargs):
        """
        An admin stopped puppeting the NPC: it stays where it is and goes on living there.

        `DefaultCharacter` stows a player's character away (location None, "has left the
        game") when its account logs off; an NPC is no player's character, so that is skipped.
        """

    def at_msg_receive(self, text=None, from_obj=None, **kwargs):
        """Hear the room: what is said, posed, whispered, and who comes and goes."""
        self.assistant.receive(text=text, from_obj=from_obj, **kwargs)
        return super().at_msg_receive(text=text, from_obj=from_obj, **kwargs)

    @never_raises
    def at_server_reload(self):
        super().at_server_reload()
        self.assistant.flush()

    @never_raises
    def at_server_shutdown(self):
        super().at_server_shutdown()
        self.assistant.flush()
