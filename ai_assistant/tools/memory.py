"""
Semantic memory tools (family "memory"): `store_memory` and `search_facts` (formerly
`recall_memories`, still accepted; the specification's semantic memory tier).

Both are offered while asleep too (`SLEEP_MODE_TOOLS`). `search_facts` uses the same two-stage
retrieval as the prompt's memory block; `format_memory_results` renders its result for
`@assistant/memory <npc> = <query>`.
"""

from twisted.internet import defer

from ai_assistant.memory.audience import PUBLIC, turn_audience, turn_viewer
from ai_assistant.memory.importance import score_importance_heuristic
from ai_assistant.memory.journal import DEFAULT_SOURCE_TRUST, JournalError, validate_entry_fields
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.longterm.sources import attribution
from ai_assistant.memory.persona import (
    SELF_REFERENCE_ERROR,
    SELF_REFERENCE_SUGGESTION,
    is_self_referential,
)
from ai_assistant.memory.provenance import ProvenanceError, with_provenance
from ai_assistant.memory.recall.long_term import format_memory_results, search_long_term
from ai_assistant.tools.registry import MEMORY, SCOPED, Tool, ToolCategory, error_result

__all__ = ["StoreMemoryTool", "SearchFactsTool", "format_memory_results"]

MAX_RECALL_LIMIT = 50

_NO_STORE = "semantic memory is not available for this assistant (memory.enabled is off)"


class StoreMemoryTool(Tool):
    name = "store_memory"
    description = (
        "Store a lasting fact about the world, a player or an event in long-term semantic "
        "memory. Write it in the third person; facts about yourself are refused."
    )
    parameters = {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "The fact, in the third person."},
            "source_type": {
                "type": "string",
                "enum": list(DEFAULT_SOURCE_TRUST),
                "description": "How you know it (sets the default trust).",
            },
            "source_trust": {"type": "number", "minimum": 0, "maximum": 1,
                             "description": "0.0-1.0; defaults from source_type."},
            "source_entity": {"type": "string", "description": "Who told you, if anyone."},
            "tags": {"type": "array", "items": {"type": "string"}},
            "importance": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["content"],
    }
    category = ToolCategory.ASYNC_REQUIRED
    family = "memory"
    reach = SCOPED
    sourced = True
    kit = MEMORY

    def run(self, ports, content="", source_type="observation", source_trust=None,
            source_entity=None, tags=None, importance=None, provenance=None, **unused):
        memories = Memories(ports)
        if not memories.available:
            return error_result(_NO_STORE)
        try:
            fields = validate_entry_fields(
                ports.settings, content, tags, None, source_type, source_trust,
                source_entity, importance,
            )
        except JournalError as err:
            return error_result(str(err))
        if is_self_referential(fields["content"]):
            return error_result(SELF_REFERENCE_ERROR, suggestion=SELF_REFERENCE_SUGGESTION)
        importance, method = fields["importance"], "manual"
        if importance is None:
            importance = score_importance_heuristic(
                fields["content"], fields["source_type"], fields["tags"]
            )
            method = "heuristic"
        metadata = {
            "source": "tool",
            "tags": fields["tags"],
            "source_type": fields["source_type"],
            "source_trust": fields["source_trust"],
            "source_entity": fields["source_entity"],
            "importance": importance,
            "importance_method": method,
        }
        if turn_audience(ports.world) is not PUBLIC:  # stored in a whispered conversation
            metadata["audience"] = turn_audience(ports.world)
        try:
            # the turn's grant says where it came from; called without one, the fields do
            metadata = with_provenance(metadata, provenance)
        except ProvenanceError as err:
            return error_result(f"provenance: {err}")
        deferred = memories.add(fields["content"], metadata)  # recallable at once

        def _stored(stored):
            stored = stored or []
            duplicate = any(item.get("event") == "DUPLICATE" for item in stored)
            return {
                "success": True,
                "memory_ids": [item["id"] for item in stored],
                "duplicate": duplicate,
                "message": ("An identical memory already exists; kept it." if duplicate
                            else f"Stored {len(stored)} memory."),
            }

        def _failed(failure):
            ports.log(f"{ports.name}: store_memory failed: {failure.getErrorMessage()}")
            return error_result(f"the memory store failed: {failure.getErrorMessage()}")

        return deferred.addCallbacks(_stored, _failed)


class SearchFactsTool(Tool):
    name = "search_facts"
    aliases = ("recall_memories",)
    description = (
        "Search the lasting facts of your long-term memory (what store_memory kept). Results "
        "carry a relevance score and the trust of their source."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "What to remember."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RECALL_LIMIT},
            "min_source_trust": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["query"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "memory"
    reach = SCOPED
    kit = MEMORY
    cacheable = True
    cache_ttl = 30.0

    def run(self, ports, query="", limit=None, min_source_trust=None, **unused):
        if not Memories(ports).available:
            return error_result(_NO_STORE)
        if not isinstance(query, str) or not query.strip():
            return error_result("query is required: a non-empty text")
        max_chars = ports.settings.get("journal.max_content_chars")
        if len(query) > max_chars:
            return error_result(f"query is too long ({len(query)} > {max_chars} characters)")
        # the recall pipeline, for whom this turn answers (`memory.audience`)
        deferred = defer.maybeDeferred(
            search_long_term, ports, query.strip(), viewer=turn_viewer(ports.world),
            limit=limit, min_source_trust=min_source_trust,
        )

        def _found(hits):
            memories = [
                {
                    "id": hit["id"],
                    "memory": hit.get("memory", ""),
                    "score": round(float(hit.get("score", 0.0)), 4),
                    "trust": hit.get("trust"),
                    "metadata": hit.get("metadata") or {},
                    "when": hit.get("when") or None,  # the day it was heard
                    # whose word it is ("Mallory told me"); None for a fact
                    "said_by": attribution(hit).strip().removesuffix(":") or None,
                }
                for hit in hits
            ]
            return {"success": True, "query": query.strip(), "count": len(memories),
                    "memories": memories}

        def _failed(failure):
            ports.log(f"{ports.name}: search_facts failed: {failure.getErrorMessage()}")
            return error_result(f"the memory store failed: {failure.getErrorMessage()}")

        return deferred.addCallbacks(_found, _failed)
