"""
Adapters that give the core its ports inside an Evennia game (the shell side of `ports.py`).

- `AttributeState`: state documents as Attributes on the NPC (or its script), read once into a
  plain-data cache in `ndb` and written back with `set` - reactor thread only.
- `EvenniaWorld`: the NPC's body: say, emote, whisper, look around.
- `build_ports`: the `AssistantPorts` bundle for one assistant NPC (its handler,
  `ai_assistant.handler.AssistantHandler`, caches it).
"""

import copy
import uuid

from django.db import transaction
from evennia.utils import logger
from evennia.utils.dbserialize import deserialize

from ai_assistant import durability, heard_line
from ai_assistant.attribute_reads import stored_documents, straight_documents
from ai_assistant.attribute_writes import forget_cached_attribute, write_attribute
from ai_assistant.durability import durability_of
from ai_assistant.plumbing import documents, residency, threads
from ai_assistant.plumbing.environment import environment_values, setting_source
from ai_assistant.plumbing.ports import AssistantPorts, SystemClock
from ai_assistant.plumbing.settings import Settings, settings_tree

_UNREAD = object()


class AttributeState:
    """
    `StateStore` over Evennia Attributes.

    `get` returns a plain (deserialized) copy cached in `ndb`, so repeated reads cost nothing
    and a change is only persisted by `set` (written behind, see `set`). The cache lives in
    `ndb`, so a reload starts from what was flushed.

    The first read of an object's documents reads its light ones, in one query (all an idle
    tick reads); the first read of one of its heavy ones (`documents.Document.heavy`: the
    journal, the people, the memory links and nodes...) reads those, in one more. They stay in
    the cache only while the assistant is resident (`plumbing.residency`): reading or writing
    one makes it the most recently used, and when it is released its heavy documents that have
    no unwritten change are dropped from the cache, to be read again when next used.

    Args:
        character (AssistantMixin): The NPC.
    """

    def __init__(self, character):
        self.character = character
        self._stores = {}
        self._durability = None

    def durability(self):
        """
        The NPC's write-ahead log (`ai_assistant.durability`), opened on first use in this
        process - which first replays what an unclean stop left in it into the Attributes, so
        it comes before any document is read.
        """
        if self._durability is None:
            # the settings its ports were built with (building them again costs a reload)
            self._durability = durability_of(
                self.character, lambda: self.character.assistant.ports().settings)
        return self._durability

    def _store(self, name):
        """`(owner, cache, dirty)` of the object that keeps document `name`."""
        on_script = documents.on_script(name)
        store = self._stores.get(on_script)
        if store is None:
            self.durability()  # replayed before the first read
            owner = self.character
            script = self.character.assistant.script
            if on_script and script is not None:
                owner = script
            # the cache and the dirty set live in the owner's ndb, so every AttributeState of
            # this NPC shares them, and a reload (which clears ndb) starts from the database
            if owner.ndb.ai_state_cache is None:
                place = documents.CHARACTER if owner is self.character else documents.SCRIPT
                owner.ndb.ai_state_cache = stored_documents(
                    owner, documents.kept_in_state(place, heavy=False))
                owner.ndb.ai_state_dirty = set()
            store = (owner, owner.ndb.ai_state_cache, owner.ndb.ai_state_dirty)
            if owner is not self.character or not on_script:
                self._stores[on_script] = store
        return store

    def _resident(self):
        """Make the NPC the most recently used resident assistant (a heavy document is used)."""
        runtime = self.character.assistant.runtime
        runtime.on_release("attribute_state", self._drop_heavy)
        runtime.touch()

    def _drop_heavy(self):
        """Drop the heavy documents with no unwritten change from the cache (released)."""
        if not self.character.pk:  # deleted meanwhile: its caches went with it
            return
        for owner in {self.character, self.character.assistant.script} - {None}:
            cache, dirty = owner.ndb.ai_state_cache, owner.ndb.ai_state_dirty or ()
            for name in list(cache or ()):
                if documents.heavy(name) and name not in dirty:
                    del cache[name]

    def get(self, name, default=None):
        if documents.heavy(name):
            self._resident()
        owner, cache, _ = self._store(name)
        value = cache.get(name, _UNREAD)
        if value is _UNREAD and documents.heavy(name):
            # the object's heavy documents, together: a search or a sleep step reads several
            missing = [other for other in documents.kept_in_state(documents.get(name).on,
                                                                  heavy=True)
                       if other not in cache]  # fmt: skip
            cache.update(stored_documents(owner, missing))
            value = cache[name]
        elif value is _UNREAD:  # not among those loaded: one the shell writes straight is
            # read now (from Evennia's cache, which its writes keep current) and never kept
            # here, so what Evennia writes to it is seen at the next read
            value = straight_documents(owner, (name,))[name]
            if name not in documents.REGISTRY or not documents.REGISTRY[name].straight:
                cache[name] = value
        return copy.deepcopy(default) if value is None else value

    def set(self, name, value, change=None):
        """
        Change a document now; it reaches the database at the next `flush`.

        Written behind because one answered line touches a dozen documents (queue, journal,
        profile, working memory, history, stats) and a busy room multiplies that by every
        listener: a database write each would cost the reactor far more than the thinking.
        The script flushes every `ticks.flush_every` ticks, on every mode change, before a
        reload or shutdown and when the reactor stops (SIGTERM). Between flushes the change
        is safe in the NPC's write-ahead log (appended here, before anyone is told), so a
        crash loses nothing; a value the log cannot take is written through at once.

        The log takes a document whole at its first change after a flush, and after that the
        `change` its owner describes, when it gives one (`plumbing.state_changes`): a heard
        line logs one journal entry, not the whole journal again.
        """
        if documents.heavy(name):
            self._resident()
        owner, cache, dirty = self._store(name)
        cache[name] = value
        log = self.durability()
        if not log.enabled:
            dirty.add(name)
            return
        place = durability.SCRIPT if owner is not self.character else durability.CHARACTER
        if log.record(place, name, value, change):
            dirty.add(name)
            return
        owner.attributes.add(name, value)  # the log refused it: write it through
        log.written_through(place, name)

    def flush(self):
        """
        Write every changed document to its Attribute, then empty the log (reactor only).

        The documents are written in one transaction: each Attribute saved on its own is a
        commit, and with a grown journal a busy room's commits took most of the reactor's time
        (`bench.reactor`). All or nothing: if a write fails, no document is marked written and
        the log is kept, so the next flush (or a replay) writes them all again.
        """
        written = []
        with transaction.atomic():
            for owner in {self.character, self.character.assistant.script} - {None}:
                cache, dirty = owner.ndb.ai_state_cache, owner.ndb.ai_state_dirty
                for name in sorted(dirty or ()):
                    write_attribute(owner, name, cache[name])
                    if documents.heavy(name):
                        forget_cached_attribute(owner, name)
                if dirty:
                    written.append(dirty)
        for dirty in written:
            dirty.clear()
        self.durability().flushed()


def game_clock():
    """The game's own clock (Evennia gametime), as an aware datetime."""
    from datetime import UTC, datetime

    from evennia.utils import gametime

    return datetime.fromtimestamp(gametime.gametime(absolute=True), UTC)


class EvenniaWorld:
    """
    The `WorldPort` of an NPC: what it does in its room.

    Args:
        character (DefaultCharacter): The NPC.
    """

    def __init__(self, character):
        self.character = character

    def say(self, text):
        self.character.at_say(text)

    def emote(self, text):
        location = self.character.location
        if location:
            # director stance, as Evennia's `pose`: each onlooker sees the NPC's display name.
            # The model's text goes in through the mapping, which is substituted after the
            # funcparser ran and is never parsed itself: `$You()` or `{braces}` in it stay text.
            location.msg_contents(
                text=("{actor} {emote}", {"type": "pose"}),
                from_obj=self.character,
                mapping={"actor": self.character, "emote": str(text)},
                exclude=heard_line.not_sent_notice(location, str(text)),
            )

    def _find_present(self, target):
        location = self.character.location
        if not location:
            return None
        wanted = str(target).strip().lstrip("#").lower()
        for obj in location.contents:
            if obj is self.character or not self._is_character(obj):
                continue
            if obj.key.lower() == wanted or str(obj.id) == wanted:
                return obj
            if wanted in [alias.lower() for alias in obj.aliases.all()]:
                return obj
        return None

    def whisper(self, target, text):
        receiver = self._find_present(target)
        if receiver is None:
            return f"'{target}' is not here"
        self.character.at_say(text, whisper=True, receivers=receiver)
        return None

    def tell(self, target, text):
        """
        An out-of-character message to one character here, from nobody in the room: no one
        else sees it, and no assistant hears it.

        Returns:
            str or None: Why it could not be sent, or None.
        """
        receiver = self._find_present(target)
        if receiver is None:
            return f"'{target}' is not here"
        receiver.msg(str(text))
        return None

    @staticmethod
    def _is_character(obj):
        from evennia.objects.objects import DefaultCharacter

        return isinstance(obj, DefaultCharacter) or obj.has_account

    def present(self):
        location = self.character.location
        if not location:
            return []
        return [
            {"id": obj.dbref, "name": obj.key, "is_player": bool(obj.has_account)}
            for obj in location.contents
            if obj is not self.character and self._is_character(obj)
        ]

    def describe_location(self):
        location = self.character.location
        if not location:
            return {"name": None, "description": "nowhere", "exits": [], "objects": []}
        exits, things = [], []
        for obj in location.contents:
            if obj is self.character or self._is_character(obj):
                continue
            (exits if obj.destination else things).append(obj.key)
        return {
            "name": location.key,
            "description": location.db.desc or "",
            "exits": exits,
            "objects": things,
            "characters": [person["name"] for person in self.present()],
        }


# process-wide: the shared vector stores are closed once, when the reactor shuts down
_shutdown_hooked = []


class LazySemanticStore:
    """
    The NPC's semantic store (`SemanticPort`), opened in the worker pool on first use.

    Opening loads the embedder and the local vector store (seconds): off the reactor, at first
    use, never holding up a reload. Calls made while it opens wait for it; if opening fails they
    fail (the callers fall back to the journal) and the next call tries again.

    Args:
        settings (conf.Settings): The NPC's settings.
        key (str): The assistant key that scopes its memories.
        log (callable): `log(message)`.
    """

    def __init__(self, settings, key, log):
        self._settings = settings
        self._key = key
        self._log = log
        self._store = None
        self._waiting = None
        # thresholds are known without loading the model: they belong to the embedder class
        embedder_class = None
        if "embedder" not in (settings.get("memory.mem0") or {}):
            from ai_assistant.memory.embedder import EMBEDDERS

            embedder_class = EMBEDDERS["wordllama"]
        for name in ("relevance_threshold", "link_similarity", "duplicate_similarity"):
            setattr(self, name, getattr(embedder_class, name, None))

    @property
    def is_open(self):
        """True once the store is open (its opening - reading its files - is behind it)."""
        return self._store is not None

    def _ready(self):
        from twisted.internet import defer

        if self._store is not None:
            return defer.succeed(self._store)
        waiter = defer.Deferred()
        if self._waiting is None:
            self._waiting = [waiter]
            self._open()
        else:
            self._waiting.append(waiter)
        return waiter

    def _open(self):
        from twisted.internet import reactor

        from ai_assistant.agent.warmup import after_process_warm_up
        from ai_assistant.memory.longterm.mem0_store import close_all_stores, make_semantic_store
        from ai_assistant.plumbing.threads import run_blocking

        if not _shutdown_hooked:
            reactor.addSystemEventTrigger("before", "shutdown", close_all_stores)
            _shutdown_hooked.append(True)

        def _opened(store):
            self._store = store
            waiting, self._waiting = self._waiting, None
            for waiter in waiting:
                waiter.callback(store)

        def _failed(failure):
            self._log(f"semantic memory of {self._key} unavailable: {failure.getErrorMessage()}")
            waiting, self._waiting = self._waiting, None
            for waiter in waiting:
                waiter.errback(failure)

        # opening is mostly importing mem0 and reading files: the waiting pool, so that a
        # reply's recall (computing pool) never queues behind it; and only once what a reply
        # needs is loaded (a reply does not wait for the store), so that just after a start
        # it does not compete with a first reply for the interpreter
        after_process_warm_up(
            run_blocking, make_semantic_store, self._settings, semantic_data_dir(), self._key,
            log=self._log, database=game_database(self._settings),
        ).addCallbacks(_opened, _failed)

    def _call(self, method, *args, **kwargs):
        return self._ready().addCallback(lambda store: getattr(store, method)(*args, **kwargs))

    def add(self, text, *, metadata=None, infer=False):
        return self._call("add", text, metadata=metadata, infer=infer)

    def search(self, query, *, limit=10, filters=None):
        return self._call("search", query, limit=limit, filters=filters)

    def get(self, memory_id):
        return self._call("get", memory_id)

    def delete(self, memory_id):
        return self._call("delete", memory_id)

    def update(self, memory_id, text, *, metadata=None):
        return self._call("update", memory_id, text, metadata=metadata)

    def list(self, *, limit=100, filters=None):
        return self._call("list", limit=limit, filters=filters)

    def delete_all(self):
        return self._call("delete_all")

    def histories(self, memory_ids):
        return self._call("histories", memory_ids)

    @property
    def ranks_in_database(self):
        """Whether the database finds recall's candidates: the game's `memory.store`, known
        before the store opens (recall must never fall back to a mirror this store lacks)."""
        from ai_assistant.memory.longterm import pgvector_store

        return pgvector_store.is_postgres(self._settings)

    def recall_candidates(self, query, **kwargs):
        return self._call("recall_candidates", query, **kwargs)


def semantic_data_dir():
    """The semantic tier's folder: the data folder of this database (`game_data`)."""
    from ai_assistant.game_data import data_folder

    return data_folder()


def game_database(settings):
    """The game's Django database the postgres memory store may use (`memory.postgres_database`)."""
    from django.conf import settings as django_settings

    return dict(django_settings.DATABASES.get(settings.get("memory.postgres_database")) or {})


def semantic_store(settings, key, log, runtime):
    """
    The NPC's `LazySemanticStore`, or None if memory is off.

    One per assistant, kept in its runtime (`caches["semantic_store"]`) so that ports rebuilt
    after a change of config reuse the store already opened.
    """
    if not settings.get("memory.enabled"):
        return None
    return runtime.cache("semantic_store", lambda: LazySemanticStore(settings, key, log))


def memory_scope(character):
    """
    The id that scopes the NPC's long-term memories (mem0's user_id), drawn if it has none.

    Random, so that a database that reuses object ids never hands a new assistant an old one's
    memories; kept as long as the NPC has it (a typeclass swapped away and back included).

    Args:
        character (AssistantMixin): The NPC.

    Returns:
        str: `assistant_<random hex>`.
    """
    scope = character.attributes.get(documents.MEMORY_SCOPE)
    if not scope:
        scope = f"assistant_{uuid.uuid4().hex}"
        character.attributes.add(documents.MEMORY_SCOPE, scope)
    return scope


def npc_overrides(character):
    """The NPC's `@assistant/config` overrides, as plain data."""
    return deserialize(character.attributes.get(documents.CONFIG_OVERRIDES) or {})


def store_overrides(character, overrides):
    """
    Replace the NPC's `@assistant/config` overrides (written straight to the Attribute).

    Args:
        character (AssistantMixin): The NPC.
        overrides (dict): `{dotted key: value}`, each checked by the caller (`validate`).
    """
    character.attributes.add(documents.CONFIG_OVERRIDES, dict(overrides))


def keep_or_start_overrides(character):
    """Give a new assistant empty `@assistant/config` overrides; keep those it has."""
    if not character.attributes.has(documents.CONFIG_OVERRIDES):
        store_overrides(character, {})


def overrides_attribute(overrides):
    """The `(name, value)` of a prototype's `attrs` that gives its NPC these overrides."""
    return (str(documents.CONFIG_OVERRIDES), dict(overrides))


def npc_settings(character, overrides=None):
    """
    The NPC's settings: the game's AI_ASSISTANT tree plus its `@assistant/config` overrides.

    A stored value its setting does not accept is ignored (and listed in the settings'
    `problems`, which `@assistant` shows), so it never breaks a tick or a reload.

    Args:
        character (AssistantMixin): The NPC.
        overrides (dict, optional): Its overrides, when the caller has read them already.
    """
    if overrides is None:
        overrides = npc_overrides(character)
    return game_view().with_overrides(overrides)


# the game's settings as one checked view, kept while they stay the same (see `game_view`)
_game_views = {}


def game_view():
    """
    The game's settings (`game_settings`) as a `Settings` view, made again only when the
    game's `AI_ASSISTANT` or the environment's values for it change: merging and checking
    them for each assistant was a third of a reload's own work at 1,000 assistants.
    """
    config = game_config()
    key = repr((config, environment_values(config)))
    view = _game_views.get(key)
    if view is None:
        _game_views.clear()
        view = _game_views[key] = Settings(settings_tree(config))
    return view


def game_config():
    """The game's own `AI_ASSISTANT` setting (what its settings.py says, nothing merged)."""
    from django.conf import settings as django_settings

    return getattr(django_settings, "AI_ASSISTANT", {}) or {}


def game_settings():
    """The game's `AI_ASSISTANT` setting over the defaults (with the environment's values)."""
    return settings_tree(game_config())


def llm_sources(character, overrides=None):
    """Where the NPC's LLM endpoint, model and key come from, in words (for the log)."""
    config = game_config()
    if overrides is None:
        overrides = npc_overrides(character)
    return {name: setting_source(f"llm.{name}", config, overrides)
            for name in ("base_url", "model", "api_key")}


def log_to_server(message):
    logger.log_info(f"[ai_assistant] {message}")


def build_ports(character, *, runtime):
    """
    Assemble the ports of one assistant.

    Args:
        character (AssistantMixin): The NPC.
        runtime (AssistantRuntime): What it holds in memory only; its handler keeps one per NPC
            for the life of the server process, so it outlives ports rebuilt after a change of
            config.

    Returns:
        AssistantPorts: Fresh bundle (the LLM client is created by the NPC's handler and
        cached in its `ndb`).
    """
    # what the shell keeps straight on the NPC: at a server start read for every assistant at
    # once (`attribute_reads.read_at_start`), else in one query (through Evennia's `get`, each
    # costs two queries the first time)
    straight = straight_documents(character, (documents.CONFIG_OVERRIDES,
                                              documents.MEMORY_SCOPE))
    overrides = straight[documents.CONFIG_OVERRIDES] or {}
    settings = npc_settings(character, overrides)
    for problem in settings.problems:
        log_to_server(f"{character.key}: ignored setting {problem['key']} = "
                      f"{problem['value']!r} from {problem['source']}: {problem['error']}")
    threads.configure(settings)
    residency.configure(settings)
    key = straight[documents.MEMORY_SCOPE] or memory_scope(character)
    return AssistantPorts(
        key=key,
        name=character.key,
        state=AttributeState(character),
        clock=SystemClock(game_clock),
        settings=settings,
        llm=character.assistant.llm_client(settings, overrides),
        semantic=semantic_store(settings, key, log_to_server, runtime),
        world=EvenniaWorld(character),
        log=log_to_server,
        runtime=runtime,
    )
