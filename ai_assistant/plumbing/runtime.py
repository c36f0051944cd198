"""
What one assistant holds in memory while the server runs, and never stores.

Each assistant has one `AssistantRuntime`, carried by its ports (`ports.runtime`). In a game the
shell keeps it in the character's `ndb`, so it lives as long as the server process and starts
empty after a reload, like every other non-persistent attribute. Nothing here may be needed to
resume after a restart: what must survive is a state document (`plumbing.documents`).

Process-wide things (thread pools, an endpoint's circuit breaker, the shared vector store of a
data folder, caches of pure functions) are not per assistant and stay with their modules.
"""

from dataclasses import dataclass, field

from ai_assistant.plumbing import residency


@dataclass
class AssistantRuntime:
    """
    Per-assistant in-memory state.

    Attributes:
        native_tools_rejected (bool): The endpoint refused native tool calls; the ReAct loop
            uses its JSON fallback from now on.
        mechanical_logged (bool): Mechanical mode has been logged once.
        compaction_running (bool): A context compaction is in flight.
        emergency_compaction_running (bool): An awake (emergency) compaction is in flight.
        patrol_running (bool): A memory patrol is in flight.
        caches (dict): What it keeps for the life of the process (delayed calls, its
            write-ahead log, its store), each under the name of the module that keeps it.
        derived (dict): Data derived from its documents to save recomputation (search
            indexes, vector matrices), each under the name of the module that builds it:
            dropped whenever the assistant stops being resident (`plumbing.residency`) and
            built again on the next use.
    """

    native_tools_rejected: bool = False
    mechanical_logged: bool = False
    compaction_running: bool = False
    emergency_compaction_running: bool = False
    patrol_running: bool = False
    caches: dict = field(default_factory=dict)
    derived: dict = field(default_factory=dict)
    _release_hooks: dict = field(default_factory=dict, repr=False)

    def cache(self, name, factory):
        """
        The cache called `name`, made by `factory()` on first use.

        Args:
            name (str): The cache's name (the module that builds it names it).
            factory (callable): Makes an empty cache.
        """
        found = self.caches.get(name)
        if found is None:
            found = self.caches[name] = factory()
        return found

    def derived_cache(self, name, factory):
        """
        The derived cache called `name`, made by `factory()` on first use since the assistant
        was last released; asking for it makes the assistant resident (reactor thread only:
        the least recently used assistant may be released now).

        Args:
            name (str): The cache's name (the module that builds it names it).
            factory (callable): Makes an empty cache.
        """
        residency.RESIDENCY.touch(self)
        found = self.derived.get(name)
        if found is None:
            found = self.derived[name] = factory()
        return found

    def touch(self):
        """Make the assistant the most recently used resident one (`plumbing.residency`)."""
        residency.RESIDENCY.touch(self)

    def on_release(self, name, hook):
        """
        Call `hook()` whenever the assistant is released (the shell drops its clean heavy
        documents so); one hook per `name`, a second one replaces the first.
        """
        self._release_hooks[name] = hook

    def release(self):
        """Drop what is derived and what the hooks hold; the next use builds it again."""
        self.derived.clear()
        for hook in list(self._release_hooks.values()):
            hook()
