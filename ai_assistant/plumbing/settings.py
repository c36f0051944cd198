"""
Settings for ai_assistant: the defaults, the game's `AI_ASSISTANT` setting, per-NPC overrides.

Every number of the specification is a default here and can be changed. A game overrides any subset
in its `server/conf/settings.py`::

    AI_ASSISTANT = {
        "llm": {"base_url": "http://127.0.0.1:11434/v1", "model": "llama3.1"},
        "journal": {"max_entries": 200},
    }

and an admin can override a key per NPC with `@assistant/config Ada = llm.model gpt-4o-mini`.
Lookups use dotted keys: `settings.get("journal.max_entries")`.

This module knows nothing of Django: the shell reads the game's `AI_ASSISTANT` setting and hands
it to `settings_tree`.
"""

import copy
from collections.abc import Mapping

from ai_assistant.plumbing.environment import environment_values
from ai_assistant.plumbing.setting_values import SettingError, coerce, describe

__all__ = ["SettingError"]  # re-exported: callers catch it from here

DEFAULTS = {
    # The typeclass `@assistant/create` uses; a game may point it at its own subclass.
    "typeclass": "ai_assistant.typeclasses.AssistantCharacter",
    "llm": {
        # No base_url and no api_key -> mechanical mode (no LLM calls at all).
        "base_url": None,
        "api_key": None,
        "model": "gpt-4o-mini",
        "temperature": 0.7,
        "max_tokens": 512,
        "timeout": 30.0,
        "extra": {},
        # Native tool calling; set False for endpoints without it (JSON fallback is used).
        "native_tools": True,
        "context_limit": 128000,
        "max_retries": 3,
        "backoff_base": 0.5,
        "backoff_max": 8.0,
        "breaker_threshold": 5,
        "breaker_cooldown": 30.0,
        "max_consecutive_errors": 5,
        "global_concurrency": 4,
        "per_npc_concurrency": 1,
        "log_requests": False,  # True: httpx/openai log every request (else WARNING and up)
    },
    # max: threads for LLM requests; cpu: threads for embeddings and the vector store;
    # switch_interval: the interpreter's lock hand-over interval (seconds), process-wide, so
    # opt-in (None keeps Python's); the demo game sets 0.001
    "threads": {"max": 8, "cpu": 1, "switch_interval": None},
    # flush_every: changed state is written to the database every this many awake ticks
    # (and on every sleep tick, mode change, reload and shutdown)
    "ticks": {"awake": 5, "sleep": 60, "flush_every": 12},
    "durability": {"write_ahead": True, "fsync_interval": 1.0, "max_log_kb": 4096},  # crashes
    "react": {
        "max_iterations_per_tick": 5,
        "max_errors_per_tick": 3,
        "dangerous_tools_enabled": False,
        "thinking_delay": 2.0,
        # what someone who addressed the assistant hears when its turn ends without an answer
        # (errors, iteration limit, LLM down): in character; "" says nothing
        "fallback_line": "Forgive me, I lost my train of thought. Could you say that again?",
        # mechanical mode: its out-of-character notice goes to a speaker at most once per
        # this many seconds
        "notice_period": 300,
        "reply_deadline": 30.0,  # one reply's whole time; then the speaker hears fallback_line
    },
    # speaker_cooldown: seconds after a turn answering a speaker before their next (floods)
    "perception": {"queue_size": 50, "urgent_priority": 8, "speaker_cooldown": 4.0},
    "working_memory": {"max_messages": 40, "stale_seconds": 3600},
    "journal": {
        "max_entries": 100,
        "max_content_chars": 4000,
        "prune_importance": 3,
        "prune_age_days": 30,
        "prune_batch": 10,
        # One scoring call per tick for up to 25 entries (bench/llm_economy.py): with the
        # specification's 3, the compacting phase (5 consolidations a tick) ended before most
        # entries were ever LLM-scored.
        "scoring_max_per_tick": 25,
        "scoring_batch_size": 25,
        # Failed LLM scoring attempts after which consolidation stops waiting for an entry's
        # LLM score (memory/importance.py, awaiting_llm_score).
        "scoring_max_attempts": 3,
        "search_limit": 10,
        # journal entries relevant to the current events shown in the prompt
        "prompt_entries": 5,
        # journal what the assistant hears (speech to it, chatter it overhears, poses it sees)
        "record_heard": True,
        "alpha_recency": 1.0,
        "alpha_importance": 1.0,
        "alpha_relevance": 1.0,
        # The specification's recency is exp(-0.99 * age_hours); Generative Agents used 0.995
        # per hour.
        "recency_decay": 0.99,
        # Relevance boosts of the episodic search (memory/search/scoring.py).
        "speaker_boost": 0.6,
        "context_weight": 0.5,
        # entries from the time a query names ("on 9 May", "yesterday"):
        # memory/search/time_references.py
        "time_boost": 1.0,
        # Fusion of BM25 with the local embedder's cosine (0 turns embeddings off), and
        # pseudo-relevance feedback (terms of the top entries re-query the journal).
        "embedding_weight": 0.15,
        "feedback_docs": 3,
        "feedback_terms": 5,
        "feedback_weight": 0.2,
        # How the search_journal tool fuses the semantic tier's similarities (fetched off the
        # reactor) with BM25: "score" (normalised scores) or "rrf"; the share is
        # embedding_weight. The synchronous search on the reactor never embeds.
        "fusion": "score",
        # Relevance gate: with a query, the weighted mean (recency, importance, relevance)
        # only reorders entries whose relevance is at least this share of the best match's,
        # and at most the rerank_pool most relevant (0 / None: the specification's formula over
        # all).
        "relevance_gate": 0.5,
        "rerank_pool": 10,
    },
    "reflection": {
        "threshold": 150,
        "questions": 3,
        "evidence_per_question": 10,
        "max_prompt_entries": 50,
    },
    "memory": {
        "enabled": True,
        "min_importance": 3,
        "consolidation_per_tick": 5,
        # Facts extracted from one journal entry (by the scoring call or consolidation) that
        # are stored as memories; more are dropped.
        "max_facts_per_entry": 10,
        # failed fact-extraction calls before entries are stored verbatim (sleep must end)
        "extraction_max_attempts": 3,
        "relevance_threshold": 0.7,
        "min_source_trust": 0.5,
        "link_similarity": 0.7,
        "link_batch": 5,
        "mem0": {},
        # "embedded" (qdrant files under server/) or "postgres" (memory/longterm/pgvector_store.py)
        "store": "embedded", "postgres_url": "", "postgres_database": "default",
        # Dreaming links memories at least this important; each gets at most this many links.
        "link_min_importance": 5,
        "link_max_per_memory": 5,
        # The memory_links document keeps at most this many records (one per memory): past it,
        # the records processed longest ago go first (memory/longterm/links.py, bound_memory_links).
        "links_max_records": 2000,
        "links_full_days": 30, "links_old_kept": 2,  # older records keep fewer links (links.py)
        # Results of search_facts (formerly recall_memories) when the model names no limit.
        "recall_limit": 5,
    },
    # memory/recall/ (the README's "Long-term memory reaches the prompt" says what each does)
    "recall": {"budget_tokens": 900, "prompt_items": 20, "alpha_recency": 0.0,
               "alpha_importance": 0.0, "embedding_weight": 0.3, "min_information": 0.25,
               "mirror_max": 100_000, "history_tokens": 500},
    "entities": {
        "max_observations": 50,
        "consolidation_min_observations": 5,
        # Entity profiles (memory/entities.py): consolidation batch, prompt block, text caps.
        "consolidation_max_per_tick": 3,
        "max_attributes": 20,
        "max_observation_chars": 500,
        "context_max_profiles": 5,
        "context_observations": 3,
        # Relationship states as Dunbar bands: stranger < acquaintance <= friend <= ally.
        "acquaintance_threshold": 0.25,
        "friend_threshold": 0.50,
        "ally_threshold": 0.75,
        # The favorability rule (see memory/entities.py): start, gains, decay toward the start.
        "initial_favorability": 0.1,
        "interaction_gain": 0.02,
        "positive_gain": 0.03,
        "negative_penalty": 0.08,
        "decay_half_life_days": 30,
        # Forgetting people (memory/entity_pruning.py, each dreaming tick): a profile unseen for
        # forget_after_days with at most forget_max_observations observations, no attributes
        # and no bond beyond "stranger" is dropped; past max_profiles, the least known go first.
        "forget_after_days": 30,
        "forget_max_observations": 3,
        "max_profiles": 500,
    },
    "compaction": {
        "sleep_threshold": 0.70,
        "emergency_threshold": 0.80,
        "preserve_messages": 10,
        # sleep/compaction.py: summary call, its input budget (share of llm.context_limit),
        # the journal entry's importance, and the pre-compaction ReAct pass.
        "summary_max_tokens": 400,
        "summary_input_share": 0.5,
        "summary_importance": 6,
        "extraction_max_iterations": 3,
        "history_days": 7,  # a sleep also condenses lines older than this (0: only when full)
    },
    "sleep": {
        "enabled": False,
        "sleep_start_hour": 2,
        "sleep_duration_hours": 4,
        "min_awake_ticks": 10,
        # go_to_sleep is refused for go_to_sleep_cooldown_minutes after falling asleep
        "wake_cooldown_minutes": 60, "go_to_sleep_cooldown_minutes": 30,
        # a player talking to the sleeper gets one sign of it per this many seconds
        "sign_period": 300,
        # how many recent sleeps keep their report (what the sleep changed), for the inspector
        "reports_kept": 10,
    },
    "nodes": {
        "cluster_threshold": 0.45,
        "recall_threshold": 0.35,
        "recall_top_k": 3,
        "dying_threshold": 0.05,
        "decay_sessions": 30,
        "split_min_active": 10,
        "small_cluster_max": 2,
        # Memory nodes (memory/nodes.py) and the memory patrol (sleep/patrol/).
        "embedder": "wordllama",
        "default_importance": 0.5,
        "merge_importance_bonus": 0.05,
        "split_min_part": 2,
        "split_min_remaining": 2,
        "search_limit": 10,
        "recent_nodes": 5,
        "diary_days": 7,
        "max_note_chars": 4000,
        "repair_max_per_patrol": 5,
        "consolidation_max_clusters": 20,
        "consolidation_max_nodes": 60,
        "split_max_clusters": 5,
        "think_max_bullets": 7,
        "relationships_max": 10,
        # Bounds of the node graph (sleep/patrol/archive.py, every patrol): past max_nodes the
        # dead nodes go first (oldest first), then dying, then the least important unpinned;
        # the diary keeps its last diary_kept days. A node costs about 2 KB in "node_vectors"
        # (its base64 vector, stored pickled): 300 keep that Attribute near 600 KB, under 1 MB.
        "max_nodes": 300,
        "diary_kept": 60, "vectors_full_days": 30,  # older nodes' vectors kept as int8
    },
    # The assistant's own workspace (projects, goals, session memory, status).
    "workspace": {
        "projects": {"max_projects": 20, "max_summary_chars": 500, "max_context_chars": 8000},
        "goals": {
            "min_subtasks": 3,
            "max_subtasks": 7,
            "max_goals": 200,
            "max_description_chars": 500,
            "context_max_goals": 15,
        },
        "session_memory": {"max_items": 100, "max_content_chars": 1000, "near_duplicate": 0.8},
        "status": {"warning_percent": 60, "critical_percent": 80},
        "system_prompt": {"max_chars": 4000, "history_max": 20},
    },
    # The memory inspector on the game's website (ai_assistant/web/): how many corrections
    # its audit trail keeps, and how many journal entries one page shows.
    "inspector": {"audit_kept": 200, "page_size": 25},
}


# The type of every setting whose default does not show it (None means "unset"). Every other
# setting has the type of its default (an int default takes an int, a float one any number).
TYPES = {
    "llm.base_url": str,
    "llm.api_key": str,
    "threads.switch_interval": float,
}
# Settings that may be None ("unset"); no other setting takes None.
NULLABLE = ("llm.base_url", "llm.api_key", "threads.switch_interval", "journal.relevance_gate",
            "journal.rerank_pool")
FREE_FORM = ("llm.extra", "memory.mem0")  # subtrees handed on whole to the client or to mem0
BIG = 10**9  # "no sensible upper bound": a count or size the game may raise as far as it likes

# The accepted range of every number (inclusive) and the choices of a string that has any.
# `validate` checks a value against it: `@assistant/config` before it stores one, and every
# `Settings` over what the game's settings.py or an older version stored.
RANGES = {
    "llm.temperature": (0.0, 2.0), "llm.max_tokens": (1, 1_000_000), "llm.timeout": (0.1, 3600.0),
    "llm.context_limit": (100, 10_000_000), "llm.max_retries": (0, 20),
    "llm.backoff_base": (0.0, 60.0), "llm.backoff_max": (0.0, 600.0),
    "llm.breaker_threshold": (1, 1000), "llm.breaker_cooldown": (0.0, 3600.0),
    "llm.max_consecutive_errors": (1, 1000), "llm.global_concurrency": (1, 256),
    "llm.per_npc_concurrency": (1, 64), "threads.max": (1, 256), "threads.cpu": (1, 64),
    "threads.switch_interval": (0.0001, 1.0), "ticks.awake": (1, 86400), "ticks.sleep": (1, 86400),
    "ticks.flush_every": (1, 100_000), "react.max_iterations_per_tick": (1, 50),
    "durability.fsync_interval": (0.01, 3600.0), "durability.max_log_kb": (16, BIG),
    "react.max_errors_per_tick": (1, 50), "react.thinking_delay": (0.0, 60.0),
    "react.notice_period": (0, 86400), "perception.queue_size": (1, 10_000),
    "react.reply_deadline": (1.0, 3600.0), "perception.speaker_cooldown": (0.0, 3600.0),
    "perception.urgent_priority": (1, 10), "working_memory.max_messages": (1, 10_000),
    "working_memory.stale_seconds": (1, BIG), "journal.max_entries": (1, BIG),
    "journal.max_content_chars": (1, 1_000_000), "journal.prune_importance": (0, 10),
    "journal.prune_age_days": (0, 36500), "journal.prune_batch": (0, 100_000),
    "journal.scoring_max_per_tick": (0, 1000), "journal.scoring_batch_size": (0, 1000),
    "journal.scoring_max_attempts": (1, 100), "journal.search_limit": (1, 1000),
    "journal.prompt_entries": (0, 100), "journal.alpha_recency": (0.0, 100.0),
    "journal.alpha_importance": (0.0, 100.0), "journal.alpha_relevance": (0.0, 100.0),
    "journal.recency_decay": (0.0, 100.0), "journal.speaker_boost": (0.0, 100.0),
    "journal.context_weight": (0.0, 100.0), "journal.time_boost": (0.0, 100.0),
    "journal.embedding_weight": (0.0, 1.0), "journal.feedback_docs": (0, 100),
    "journal.feedback_terms": (0, 100), "journal.feedback_weight": (0.0, 10.0),
    "journal.fusion": ("score", "rrf"), "memory.store": ("embedded", "postgres"),
    "journal.relevance_gate": (0.0, 1.0),
    "journal.rerank_pool": (0, 100_000), "reflection.threshold": (1, BIG),
    "reflection.questions": (1, 20), "reflection.evidence_per_question": (1, 1000),
    "reflection.max_prompt_entries": (1, 10_000), "memory.min_importance": (0, 10),
    "memory.consolidation_per_tick": (1, 1000), "memory.max_facts_per_entry": (0, 1000),
    "memory.extraction_max_attempts": (1, 100), "memory.relevance_threshold": (0.0, 1.0),
    "memory.min_source_trust": (0.0, 1.0), "memory.link_similarity": (0.0, 1.0),
    "memory.link_batch": (0, 1000), "memory.link_min_importance": (0, 10),
    "memory.link_max_per_memory": (0, 1000), "memory.recall_limit": (0, 1000),
    "memory.links_max_records": (1, BIG), "recall.budget_tokens": (0, 1_000_000),
    "recall.prompt_items": (0, 1000), "recall.alpha_recency": (0.0, 100.0),
    "recall.alpha_importance": (0.0, 100.0), "recall.embedding_weight": (0.0, 1.0),
    "recall.min_information": (0.0, 1.0), "recall.mirror_max": (1, BIG),
    "recall.history_tokens": (0, 1_000_000), "entities.forget_after_days": (1, 36500),
    "entities.forget_max_observations": (0, 100_000), "entities.max_profiles": (1, BIG),
    "nodes.max_nodes": (1, BIG), "nodes.diary_kept": (1, 36500),
    "memory.links_full_days": (0, 36500), "memory.links_old_kept": (0, 1000),
    "entities.max_observations": (1, 100_000), "nodes.vectors_full_days": (0, 36500),
    "entities.consolidation_min_observations": (1, 10_000),
    "entities.consolidation_max_per_tick": (0, 1000), "entities.max_attributes": (0, 10_000),
    "entities.max_observation_chars": (1, 1_000_000), "entities.context_max_profiles": (0, 1000),
    "entities.context_observations": (0, 1000), "entities.acquaintance_threshold": (0.0, 1.0),
    "entities.friend_threshold": (0.0, 1.0), "entities.ally_threshold": (0.0, 1.0),
    "entities.initial_favorability": (0.0, 1.0), "entities.interaction_gain": (0.0, 1.0),
    "entities.positive_gain": (0.0, 1.0), "entities.negative_penalty": (0.0, 1.0),
    "entities.decay_half_life_days": (1, 36500),
    # the thresholds are shares of llm.context_limit; above 1 turns that compaction off
    "compaction.sleep_threshold": (0.0, 100.0), "compaction.emergency_threshold": (0.0, 100.0),
    "compaction.preserve_messages": (0, 10_000), "compaction.summary_max_tokens": (1, 100_000),
    "compaction.summary_input_share": (0.01, 1.0), "compaction.summary_importance": (1, 10),
    "compaction.extraction_max_iterations": (0, 50), "sleep.sleep_start_hour": (0, 23),
    "sleep.sleep_duration_hours": (0, 24), "sleep.min_awake_ticks": (0, BIG),
    "sleep.wake_cooldown_minutes": (0, 100_000), "sleep.sign_period": (0, 86400),
    "sleep.reports_kept": (0, 10_000), "nodes.cluster_threshold": (0.0, 1.0),
    "nodes.recall_threshold": (0.0, 1.0), "nodes.recall_top_k": (0, 1000),
    "nodes.dying_threshold": (0.0, 1.0), "nodes.decay_sessions": (1, 100_000),
    "nodes.split_min_active": (1, 100_000), "nodes.small_cluster_max": (0, 100_000),
    "nodes.default_importance": (0.0, 1.0), "nodes.merge_importance_bonus": (0.0, 1.0),
    "nodes.split_min_part": (1, 100_000), "nodes.split_min_remaining": (1, 100_000),
    "nodes.search_limit": (1, 1000), "nodes.recent_nodes": (0, 1000),
    "nodes.diary_days": (0, 36500), "nodes.max_note_chars": (1, 1_000_000),
    "nodes.repair_max_per_patrol": (0, 10_000), "nodes.consolidation_max_clusters": (0, 10_000),
    "nodes.consolidation_max_nodes": (0, 100_000), "nodes.split_max_clusters": (0, 10_000),
    "nodes.think_max_bullets": (0, 1000), "nodes.relationships_max": (0, 1000),
    "workspace.projects.max_projects": (1, 10_000),
    "workspace.projects.max_summary_chars": (1, 1_000_000),
    "workspace.projects.max_context_chars": (1, 10_000_000),
    "workspace.goals.min_subtasks": (1, 100), "workspace.goals.max_subtasks": (1, 100),
    "workspace.goals.max_goals": (1, 100_000), "sleep.go_to_sleep_cooldown_minutes": (0, 100_000),
    "workspace.goals.max_description_chars": (1, 100_000),
    "workspace.goals.context_max_goals": (0, 10_000),
    "workspace.session_memory.max_items": (1, 100_000),
    "workspace.session_memory.max_content_chars": (1, 1_000_000),
    "workspace.session_memory.near_duplicate": (0.0, 1.0),
    "workspace.status.warning_percent": (0, 100), "workspace.status.critical_percent": (0, 100),
    "workspace.system_prompt.max_chars": (1, 1_000_000),
    "workspace.system_prompt.history_max": (1, 10_000), "inspector.audit_kept": (0, 1_000_000),
    "inspector.page_size": (1, 10_000), "compaction.history_days": (0, 36500),
}


def accepted(dotted_key):
    """What a setting accepts, in words: "a whole number from 1 to 86400", "true or false"..."""
    return describe(setting_type(dotted_key), RANGES.get(dotted_key),
                    nullable=dotted_key in NULLABLE)


def validate(dotted_key, value):
    """
    Check a value for a setting and return it as the setting's type.

    Args:
        dotted_key (str): A leaf key of `DEFAULTS`, a free-form subtree, or a key below one.
        value: The value (from JSON, from settings.py, or text).

    Returns:
        any: The value with the setting's type ("5" or 5.0 for an int setting gives 5).

    Raises:
        SettingError: For an unknown key, or a value outside the type and range (`RANGES`); the
            message names what the setting accepts.
    """
    if not Settings.known_key(dotted_key):
        raise SettingError(f"unknown setting {dotted_key!r}")
    parts = dotted_key.split(".")
    if any(".".join(parts[:i]) in FREE_FORM for i in range(1, len(parts))):
        return value  # below a free-form subtree: handed on as it is
    if value is None and dotted_key in NULLABLE:
        return None
    kind, limits = setting_type(dotted_key), RANGES.get(dotted_key)
    try:
        typed = coerce(kind, value)
    except (TypeError, ValueError):
        raise SettingError(f"{dotted_key} takes {accepted(dotted_key)}; got {value!r}") from None
    if limits and not (typed in limits if kind is str else limits[0] <= typed <= limits[1]):
        raise SettingError(f"{dotted_key} takes {accepted(dotted_key)}; got {value!r}")
    return typed


def setting_type(dotted_key):
    """
    The type a setting takes.

    Args:
        dotted_key (str): A leaf key of `DEFAULTS` (or a free-form subtree).

    Returns:
        type: `str`, `int`, `float`, `bool`, `dict`...

    Raises:
        KeyError: For a key that `DEFAULTS` does not define.
    """
    if dotted_key in TYPES:
        return TYPES[dotted_key]
    node = DEFAULTS
    for part in dotted_key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(f"unknown ai_assistant setting {dotted_key!r}")
        node = node[part]
    return type(node)


def leaf_keys(tree=DEFAULTS, prefix=""):
    """Every settable dotted key of `tree`, free-form subtrees as one key each."""
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and dotted not in FREE_FORM:
            yield from leaf_keys(value, dotted + ".")
        else:
            yield dotted


def deep_merge(base, override):
    """
    Return a new dict with `override` merged into `base`, recursively.

    Args:
        base (Mapping): The defaults.
        override (Mapping): Values that win.

    Returns:
        dict: A fresh nested dict; neither argument is modified.
    """
    merged = copy.deepcopy(dict(base))
    for key, value in (override or {}).items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def settings_tree(configured=None, environ=None):
    """
    A game's settings merged over the defaults, with the environment variables of
    `ENVIRONMENT` read for what the game leaves unset.

    Precedence, highest first: a per-NPC override (`Settings`), the game's `AI_ASSISTANT`,
    `AI_ASSISTANT_LLM_*`, `OPENAI_API_KEY` / `OPENAI_BASE_URL`, the default.

    Args:
        configured (Mapping, optional): The game's `AI_ASSISTANT` setting.
        environ (Mapping, optional): The environment (default `os.environ`).

    Returns:
        dict: The game-wide settings tree.
    """
    tree = deep_merge(DEFAULTS, configured or {})
    for dotted_key, value in environment_values(configured, environ).items():
        _set_dotted(tree, dotted_key, value)
    return tree


def _checked_tree(tree, problems):
    """`tree` with every value its setting does not accept replaced by the default."""
    checked = tree
    for dotted_key in leaf_keys():
        node, default = tree, DEFAULTS
        for part in dotted_key.split("."):
            node = node.get(part, _MISSING) if isinstance(node, Mapping) else _MISSING
            default = default[part]
        if node is _MISSING or (node == default and type(node) is type(default)):
            continue
        try:
            value = validate(dotted_key, node)
        except SettingError as err:
            problems.append({"key": dotted_key, "value": node, "source": "game settings",
                             "error": str(err)})
            value = copy.deepcopy(default)
        if value is not node:
            if checked is tree:
                checked = copy.deepcopy(tree)
            _set_dotted(checked, dotted_key, value)
    return checked


_MISSING = object()


class Settings:
    """
    Read-only view of a settings tree with dotted-key lookup.

    Every value is checked (`validate`) when the view is made: a value its setting does not
    accept - stored by an older version, or written in the game's settings.py - is ignored
    (the default, or the game's value, is used instead) and listed in `problems`, so it never
    breaks a tick or a reload; `@assistant` shows the list.

    Args:
        tree (dict, optional): A full settings tree; defaults to `settings_tree()`.
        overrides (dict, optional): Flat `{"dotted.key": value}` per-NPC overrides.

    Attributes:
        problems (list): `{"key", "value", "source", "error"}` for every value ignored.
    """

    def __init__(self, tree=None, overrides=None):
        self.problems = []
        tree = tree if tree is not None else settings_tree()
        self._tree = _checked_tree(tree, self.problems)
        self._overrides = {}
        for key, value in dict(overrides or {}).items():
            try:
                self._overrides[key] = validate(key, value)
            except SettingError as err:
                self.problems.append({"key": key, "value": value, "source": "per-NPC config",
                                      "error": str(err)})

    def get(self, dotted_key):
        """
        Look up a setting. Every key has its default in `DEFAULTS`: callers never repeat it.

        Args:
            dotted_key (str): E.g. `"journal.max_entries"`.

        Returns:
            any: The per-NPC override if set, else the game setting (a subtree as a dict).

        Raises:
            KeyError: For a key that `DEFAULTS` does not define (a typo must not read as None).
        """
        if dotted_key in self._overrides:
            return self._overrides[dotted_key]
        node = self._tree
        for part in dotted_key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                if self.known_key(dotted_key):  # a free-form subtree's key nobody set
                    return None
                raise KeyError(f"unknown ai_assistant setting {dotted_key!r}")
            node = node[part]
        if isinstance(node, Mapping):
            # a subtree: apply the overrides that live below it
            node = copy.deepcopy(dict(node))
            prefix = dotted_key + "."
            for key, value in self._overrides.items():
                if key.startswith(prefix):
                    _set_dotted(node, key[len(prefix) :], value)
        return node

    def __getitem__(self, dotted_key):
        return self.get(dotted_key)

    def with_overrides(self, overrides):
        """
        Args:
            overrides (dict): More flat dotted-key overrides.

        Returns:
            Settings: A new view with these overrides on top of the current ones.
        """
        return Settings(self._tree, {**self._overrides, **(overrides or {})})

    @staticmethod
    def known_key(dotted_key):
        """
        Args:
            dotted_key (str): A key to check.

        Returns:
            bool: True if the key exists in the defaults (so it may be overridden).
        """
        node = DEFAULTS
        parts = dotted_key.split(".")
        for i, part in enumerate(parts):
            if not isinstance(node, Mapping):
                return False
            if part not in node:
                # free-form subtrees (llm.extra, memory.mem0) accept any key below them
                return ".".join(parts[:i]) in FREE_FORM
            node = node[part]
        return not isinstance(node, Mapping) or dotted_key in FREE_FORM


def _set_dotted(tree, dotted_key, value):
    parts = dotted_key.split(".")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value
