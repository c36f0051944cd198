"""
mem0's qdrant store for a collection that holds one assistant's points only.

Imported only once the semantic tier opens (`vector_collections`), after
`mem0_store.configure_mem0_environment` has set mem0's environment.
"""

from mem0.vector_stores.qdrant import Qdrant


class OwnCollection(Qdrant):
    """
    A qdrant collection of one assistant: its `user_id` condition is left out of filters.

    Every point of the collection meets that condition, and the local qdrant checks each
    condition point by point in Python, so leaving it out makes a search or listing with no
    other condition pure numpy.
    """

    def _create_filter(self, filters):
        rest = {name: value for name, value in (filters or {}).items() if name != "user_id"}
        return super()._create_filter(rest) if rest else None
