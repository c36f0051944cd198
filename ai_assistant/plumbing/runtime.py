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
        caches (dict): Derived data kept to save recomputation (search indexes, vector
            matrices), each under the name of the module that builds it.
    """

    native_tools_rejected: bool = False
    mechanical_logged: bool = False
    compaction_running: bool = False
    emergency_compaction_running: bool = False
    patrol_running: bool = False
    caches: dict = field(default_factory=dict)

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
