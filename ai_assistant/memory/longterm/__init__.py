"""
Long-term memory: the memories sleep consolidates from the journal, and what links them.

From the bottom up: the provider adapter (`mem0_store`, with `mem0_collection`,
`mem0_embedding` and `vector_collections`), the policy on new claims (`policy`, over the
correction rules of `supersede`), the recall mirror (`mirror`), and the owners every other
module goes through: `memories.Memories` (the memories) and `links.MemoryLinks` (the links
between memories and journal entries, `documents.MEMORY_LINKS`).
"""
