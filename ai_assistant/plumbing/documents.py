"""
Every state document an assistant keeps: its name, where it lives, its default and its owner.

A document is plain data (dicts, lists, strings, numbers) stored under one name. In a game it is
an Attribute on the assistant character (`character.db.<name>`) or on its script
(`script.db.<name>`); the names and places below are part of the contract with game makers, who
may read them from their own code. The core reads and writes documents only through
`ports.state`, by the constants of this module, never by a bare string.

A `Document` is a `str` (its name), so it works wherever a document name does:
`ports.state.get(documents.JOURNAL)`. It also knows its default (`document.default()`, a fresh
copy each time), whether it lives on the character or the script, which module owns it (the
only one that writes it, unless `writers` says more) and the shape of its value.
"""

import copy

CHARACTER = "character"
SCRIPT = "script"

REGISTRY = {}


class Document(str):
    """
    The name of one state document, with what a reader needs to know about it.

    Args:
        name (str): The Attribute's name.
        on (str): `CHARACTER` or `SCRIPT`: the object whose `db` holds it.
        default (any): The value of a document never written (copied on every use).
        owner (str): The module that keeps it (relative to `ai_assistant`).
        shape (str): What the value looks like.
        writers (tuple[str], optional): Other modules that write it.
        straight (bool, optional): The shell writes it straight to its Attribute, never
            through `ports.state` (so no reader may keep a copy of it).
        heavy (bool, optional): It grows with the assistant's history (hundreds of KB as
            plain data), and an idle tick never reads it: the game holds it in memory only
            while the assistant is resident (`plumbing.residency`) and reads it again after.
    """

    def __new__(cls, name, *, on, default, owner, shape, writers=(), straight=False,
                heavy=False):
        if on not in (CHARACTER, SCRIPT):
            raise ValueError(f"a document lives on {CHARACTER!r} or {SCRIPT!r}, not {on!r}")
        if name in REGISTRY:
            raise ValueError(f"document {name!r} is registered twice")
        document = super().__new__(cls, name)
        document.on = on
        document._default = default
        document.owner = owner
        document.shape = shape
        document.writers = tuple(writers)
        document.straight = straight
        document.heavy = heavy
        REGISTRY[name] = document
        return document

    def default(self):
        """A fresh copy of the value of a document never written."""
        return copy.deepcopy(self._default)

    def __reduce__(self):
        # A document is registered once: copying or pickling it (a state snapshot keyed by
        # documents, say) gives back the registered one rather than calling __new__ again.
        return get, (str(self),)


def on_script(name):
    """True when the named document lives on the assistant's script, not its character."""
    document = REGISTRY.get(name)
    return document is not None and document.on == SCRIPT


def kept_in_state(on, heavy=None):
    """
    The names of the documents `ports.state` keeps on `on` (`CHARACTER` or `SCRIPT`): all of
    them, or with `heavy` True or False only the heavy or the light ones.
    """
    return [name for name, document in REGISTRY.items()
            if document.on == on and not document.straight
            and (heavy is None or document.heavy == heavy)]


def heavy(name):
    """True when the named document is a heavy one (see `Document`)."""
    document = REGISTRY.get(name)
    return document is not None and document.heavy


def get(name):
    """
    The registered document called `name`.

    Raises:
        KeyError: For a name nobody registered.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown state document {name!r}") from None


# ----------------------------------------------------------------------------------------------
# Modes and ticks (kept on the script)

OPERATING_MODE = Document(
    "operating_mode", on=SCRIPT, default="awake", owner="workspace.mode",
    shape='"awake" or "sleep"')
SLEEP_PHASE = Document(
    "sleep_phase", on=SCRIPT, default=None, owner="workspace.mode",
    shape='"compacting", "dreaming" or None when awake')
SLEEP_STATE = Document(
    "sleep_state", on=SCRIPT, default={}, owner="workspace.mode",
    shape='{"started_at", "reason", "ticks", "wake_requested"}')
TICK_COUNT = Document(
    "tick_count", on=SCRIPT, default=0, owner="workspace.mode", shape="ticks run so far (int)")
SKIPPED_TICKS = Document(
    "skipped_ticks", on=SCRIPT, default=0, owner="workspace.mode",
    shape="ticks skipped because the previous one was still running (int)")
TICKER_INTERVAL = Document(
    "ticker_interval", on=SCRIPT, default=None, owner="typeclasses",
    shape="seconds between the ticks the script is subscribed to, None when unsubscribed; "
          "written straight to the Attribute, never through ports.state", straight=True)
CONFIG_OVERRIDES = Document(
    "config_overrides", on=CHARACTER, default={}, owner="adapters",
    shape="the NPC's @assistant/config settings over the game's, {dotted key: value}; read "
          "when the ports are built, written straight to the Attribute", straight=True)
MEMORY_SCOPE = Document(
    "memory_scope", on=CHARACTER, default=None, owner="adapters",
    shape='the id that scopes its long-term memories (mem0 user_id): "assistant_<random hex>" '
          "given at creation (or when found missing), never reused, kept across a typeclass "
          "swap; written straight to the Attribute", straight=True)
MODE_HISTORY = Document(
    "mode_history", on=SCRIPT, default=[], owner="workspace.mode",
    shape='the last 20 mode changes, [{"from", "to", "reason", "time"}]')
LAST_SLEEP_TICK = Document(
    "last_sleep_tick", on=SCRIPT, default=None, owner="workspace.mode",
    shape='the last sleep tick\'s report {"phase", "steps", "woke", "time"}')
AWAKE_STATE = Document(
    "awake_state", on=CHARACTER, default={}, owner="workspace.mode",
    shape='{"awake_ticks", "woke_at", ...} since the last wake')
SLEEP_REQUEST = Document(
    "sleep_request", on=CHARACTER, default=None, owner="workspace.mode",
    shape='{"reason", "time"} from go_to_sleep, taken on the next awake tick')
SLEEP_SCHEDULE = Document(
    "sleep_schedule", on=CHARACTER, default={}, owner="sleep.modes",
    shape="per-NPC overrides of the sleep schedule (enabled, sleep_start_hour, ...)")

# ----------------------------------------------------------------------------------------------
# Perception and conversation

PENDING_EVENTS = Document(
    "pending_events", on=CHARACTER, default=[], owner="memory.perception_queue",
    shape="queued perceived events (perception.make_event), taken highest priority first")
PERCEPTION_STATS = Document(
    "perception_stats", on=CHARACTER, default={}, owner="memory.perception_queue",
    shape='{"queued", "dropped", ...} counters')
WORKING_MEMORY = Document(
    "working_memory", on=CHARACTER, default={}, owner="memory.conversation",
    shape='{entity id: {"name", "topic", "started_at", "last_active", "messages", '
          '"pending_actions"}} per interlocutor')
CONVERSATION_HISTORY = Document(
    "conversation_history", on=SCRIPT, default=[], owner="memory.conversation",
    shape='[{"role", "name", "content", "time"}], summarised or trimmed when it fills up, '
          'and by every sleep past `compaction.history_days` days', heavy=True)
COMPACTION_STATE = Document(
    "compaction_state", on=CHARACTER, default={}, owner="sleep.compaction",
    shape='{"version", "extracted_version", "compactions", "pending", ...}')
LOOP_STATE = Document(
    "loop_state", on=SCRIPT, default={}, owner="workspace.loop_state",
    shape='the running ReAct cycle: {"iteration", "max_iterations", "pending_tools", ...}, and '
          '"last_unanswered": why the last person who addressed it got the fallback line')
SESSION_METRICS = Document(
    "session_metrics", on=SCRIPT, default={}, owner="workspace.loop_state",
    shape='{"tools_this_cycle", "tool_count_this_cycle", "last_context_tokens", ...}')
LLM_STATS = Document(
    "llm_stats", on=CHARACTER, default={}, owner="plumbing.llm",
    shape="calls, tokens and errors per purpose, consecutive errors, emergency stop, "
          '"last_call_at" (epoch seconds: the warm-up at a start takes the most recent first)')

# ----------------------------------------------------------------------------------------------
# Persona

ASSISTANT_SYSTEM_PROMPT = Document(
    "assistant_system_prompt", on=CHARACTER, default=None, owner="memory.persona",
    shape="the guidelines the assistant wrote for itself (str)")
USER_SYSTEM_PROMPT = Document(
    "user_system_prompt", on=CHARACTER, default=None, owner="memory.persona",
    shape="the admins' instructions, which the assistant cannot change (str)")
SYSTEM_PROMPT_HISTORY = Document(
    "system_prompt_history", on=CHARACTER, default=[], owner="memory.persona",
    shape='numbered versions of assistant_system_prompt [{"version", "time", "by", "reason", '
          '"prompt", "previous", "old_len", "new_len"}]', heavy=True)

# ----------------------------------------------------------------------------------------------
# Journal, importance and reflection

JOURNAL = Document(
    "journal", on=CHARACTER, default=None, owner="memory.journal",
    shape='{"entries": [entry], "entry_count", "max_entries", "last_reflection", '
          '"consolidated_entry_ids"} (journal.new_journal)', heavy=True)
IMPORTANCE_SCORING = Document(
    "importance_scoring", on=CHARACTER, default={}, owner="sleep.scoring",
    shape='{"attempts": {entry id: failed LLM scoring attempts}}', heavy=True)
REFLECTION_STATE = Document(
    "reflection_state", on=SCRIPT, default=None, owner="memory.reflection_state",
    shape='{"cumulative_importance", "threshold", "last_reflection_time", "reflection_count", '
          '"entries_since_reflection"} (reflection_state.new_reflection_state)')

# ----------------------------------------------------------------------------------------------
# Long-term (semantic) memory: the memories themselves live in the mem0 store, behind their
# owner (`memory.longterm.memories.Memories`); this document links them to each other and to
# the journal entries they came from

MEMORY_LINKS = Document(
    "memory_links", on=SCRIPT, default={}, owner="memory.longterm.links",
    shape='{memory id: {"linked_to": [{"id", "score"}], "journal_ids", "processed_at"}}: at '
          'most `memory.links_max_records` records, the longest processed dropped first; '
          'records processed over `memory.links_full_days` ago keep `memory.links_old_kept` '
          'links and the journal ids the journal still holds', heavy=True)
MEMORY_CONSOLIDATION = Document(
    "memory_consolidation", on=CHARACTER, default={}, owner="memory.longterm.progress",
    shape='consolidation progress: {"in_flight": {entry id: time}, "extraction_attempts": '
          '{entry id: n}, "stored": {entry id: {part index: memory id}}, "stored_total", '
          '"last_run"}', heavy=True)

# ----------------------------------------------------------------------------------------------
# People

ENTITY_PROFILES = Document(
    "entity_profiles", on=CHARACTER, default={}, owner="memory.entities",
    shape="{entity id: profile with attributes, observations and relationship}: at most "
          "`entities.max_profiles`, `entities.max_observations` observations each; passers-by "
          "unseen for `entities.forget_after_days` are forgotten (People.prune)", heavy=True)

# ----------------------------------------------------------------------------------------------
# Workspace

PROJECTS = Document(
    "projects", on=CHARACTER, default=None, owner="workspace.projects",
    shape='{"active", "slots": {key: project}}')
CURRENT_GOALS = Document(
    "current_goals", on=SCRIPT, default=None, owner="workspace.goals",
    shape='{"goals": {id: goal}, "next_id", ...}: a tree through parent ids')
SESSION_MEMORY = Document(
    "session_memory", on=CHARACTER, default=None, owner="workspace.session_memory",
    shape='{"items": [{"id", "content", "category", ...}], "next_id"}')

# ----------------------------------------------------------------------------------------------
# Memory nodes and patrol

SCENE_NOTES = Document(
    "scene_notes", on=CHARACTER, default=[], owner="memory.nodes",
    shape='[{"id", "type", "created_at", "text", "status", "error"}]: "scene" notes wait for '
          'the patrol to turn them into nodes; other types (todos) show until "read"')
MEMORY_NODES = Document(
    "memory_nodes", on=CHARACTER, default={}, owner="memory.nodes",
    shape="{node id: node (scene, emotion, importance, status, timeline)}: at most "
          "`nodes.max_nodes`, dead then dying then least important dropped first "
          "(sleep.patrol.archive)", heavy=True)
MEMORY_CLUSTERS = Document(
    "memory_clusters", on=CHARACTER, default={}, owner="memory.nodes",
    shape='{cluster id: {"id", "name", "parent_id", "is_parent", "created_at"}} under the '
          "Business and Private roots", heavy=True)
NODE_VECTORS = Document(
    "node_vectors", on=CHARACTER, default={}, owner="memory.nodes",
    shape='{"dims", "revision", "nodes": {id: base64 float32}, "clusters": {id: base64 '
          'centroid}}: one vector per node, so bounded with memory_nodes; a node older than '
          '`nodes.vectors_full_days` keeps it as int8 ("q8:" + base64, a quarter the size)',
    heavy=True)
PATROL_STATE = Document(
    "patrol_state", on=CHARACTER, default={}, owner="memory.patrol_record",
    shape='{"runs", "last_run_at", "last_report", "last_sleep", "diary_pending"}')
DIARY = Document(
    "diary", on=CHARACTER, default={}, owner="memory.patrol_record",
    shape='{"YYYY-MM-DD": {"date", "text", "updated_at"}}: one entry a day, by the patrol, '
          'for the last `nodes.diary_kept` days', heavy=True)
THINK_NOTES = Document(
    "think_notes", on=CHARACTER, default={}, owner="memory.patrol_record",
    shape='{"text", "bullets", "updated_at"}: the notes the patrol distilled for the next day')

# ----------------------------------------------------------------------------------------------
# What staff see and correct (the memory inspector on the game's website)

SLEEP_REPORTS = Document(
    "sleep_reports", on=SCRIPT, default={}, owner="sleep.reports",
    shape='{"current": report of the sleep under way or None, "recent": [report]}: the last '
          '`sleep.reports_kept` sleeps, each {"started_at", "ended_at", "reason", "woke", '
          '"ticks", "counts": {"step.key": n}, "errors"}', heavy=True)
CORRECTIONS_AUDIT = Document(
    "corrections_audit", on=CHARACTER, default=[], owner="memory.corrections",
    shape='the last `inspector.audit_kept` corrections staff made, [{"id", "time", "by", '
          '"action", "target", "detail", "journal_entry_id"}]', heavy=True)
