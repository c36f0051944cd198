"""
Journal tools (the specification's "Journal Tools"): write an entry, search the journal, review
it.

The work is done by `ai_assistant.memory.journal` and `ai_assistant.memory.search`; these
tools turn refusals into clear results. With the semantic tier, `search_journal` is the recall
pipeline (`memory.recall`, the same ranking as the prompt's "What you remember"): the journal
and every long-term memory, for whom the turn answers, ranked in the worker pool. Without it,
it never embeds on the reactor either: the local embedder's similarities are computed off the
reactor and fused with BM25 into one relevance once they arrive. `search_journal` is
cacheable for 300 s, so whoever owns the `ToolCache` should call
`cache.invalidate("journal")` after `add_journal_entry` or `review_journal` wrote something.
"""

from twisted.internet import defer

from ai_assistant.memory import journal, provenance
from ai_assistant.memory.audience import turn_audience, turn_viewer, visible_to
from ai_assistant.memory.journal import Journal, JournalError
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.recall.lines import MEMORY_TIER
from ai_assistant.memory.recall.pipeline import RecallQuery, loaded_mirror, recall
from ai_assistant.memory.search.dense import default_embed, dense_similarities
from ai_assistant.memory.search.expansion import expansion_terms
from ai_assistant.memory.search.filters import SearchFilters, entry_matches_filters
from ai_assistant.memory.search.journal_search import (
    journal_embedding_matrices,
    journal_index_cache,
    journal_vocabulary,
    search_entries,
)
from ai_assistant.memory.search.params import SearchParams
from ai_assistant.plumbing.ports import parse_iso
from ai_assistant.tools.registry import (
    CONVERSATION,
    MEMORY,
    SCOPED,
    Tool,
    ToolCategory,
    error_result,
)

RESULT_CONTENT_CHARS = 500
REVIEW_LIST_MAX = 50
REVIEW_CONTENT_CHARS = 200
REVIEW_IMPORTANCE = 8
MAX_SEARCH_LIMIT = 50

SEMANTIC_FETCH = 5  # semantic hits fetched per result wanted (at least 50)

_STRING_LIST = {"type": "array", "items": {"type": "string"}}


def entry_summary(entry, score=None, content_chars=RESULT_CONTENT_CHARS):
    """
    A journal entry as a tool result shows it.

    Returns:
        dict: every field the entry stores: id, timestamp, content (cut to `content_chars`),
        importance and its method, source type, trust and entity, tags, projects, evidence
        (when it has any), and `score` when given.
    """
    content = str(entry.get("content", ""))
    summary = {
        "id": entry.get("id"),
        "timestamp": entry.get("timestamp"),
        "content": content if len(content) <= content_chars else content[:content_chars] + "...",
        "importance": entry.get("importance"),
        "importance_method": entry.get("importance_method"),
        "source_type": entry.get("source_type"),
        "source_trust": entry.get("source_trust"),
        "source_entity": entry.get("source_entity"),
        "tags": list(entry.get("tags") or ()),
        "related_projects": list(entry.get("related_projects") or ()),
    }
    if entry.get("evidence"):
        summary["evidence"] = list(entry["evidence"])
    if entry.get("corrected"):  # staff rewrote it: the assistant knows, without internal ids
        summary["corrected_by"] = "an admin"
    if entry.get("tier") == MEMORY_TIER:  # a long-term memory: what it was made from
        summary.update(tier=MEMORY_TIER, entry_id=entry.get("entry_id"))
    if score is not None:
        summary["score"] = round(float(score), 4)
    return summary


class AddJournalEntryTool(Tool):
    name = "add_journal_entry"
    description = (
        "Write in your journal something you observed (observation), were told (direct) or "
        "worked out (inference). Importance 1-10 is scored when left out."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "content": {"type": "string"},
            "tags": _STRING_LIST,
            "related_projects": _STRING_LIST,
            "source_type": {"type": "string", "enum": list(journal.SOURCE_TYPES)},
            "source_trust": {"type": "number", "minimum": 0.0, "maximum": 1.0},
            "source_entity": {"type": "string", "description": "Who told you."},
            "importance": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["content"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "journal"
    reach = SCOPED
    sourced = True
    kit = CONVERSATION

    def run(self, ports, content=None, **fields):
        try:
            # journaled in a whispered conversation: private to the whisperer
            entry = Journal(ports).add(content, **fields, audience=turn_audience(ports.world))
        except JournalError as err:
            return error_result(str(err))
        except TypeError as err:  # an unexpected argument when called directly
            return error_result(f"bad arguments: {err}")
        result = {"success": True, "entry": entry_summary(entry)}
        if Journal(ports).entry(entry["id"]) is None:
            result["note"] = (
                "the journal was full and this entry was the least important; it was not kept"
            )
        return result


def _filter_params(tags, days_back, related_to_project):
    """Validate filter arguments for tools that may be called without the schema."""
    if tags is not None and (
        not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)
    ):
        return "tags must be a list of strings"
    if days_back is not None and (
        isinstance(days_back, bool) or not isinstance(days_back, int | float) or days_back < 0
    ):
        return "days_back must be a number of days, 0 or more"
    if related_to_project is not None and not isinstance(related_to_project, str):
        return "related_to_project must be a project key (text)"
    return None


class SearchJournalTool(Tool):
    name = "search_journal"
    description = (
        "Search your journal and long-term memory for what you were told or saw (ranked by "
        "relevance, importance, recency; a time in the query like 'last week' favours then). "
        "An empty query lists recent important entries."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {"type": "string"},
            "tags": {**_STRING_LIST, "description": "All must match."},
            "days_back": {"type": "integer", "minimum": 0},
            "related_to_project": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT},
            "semantic": {"type": "boolean", "description": "Include long-term memory (true)."},
        },
    }
    category = ToolCategory.SAFE_CHAIN
    family = "journal"
    reach = SCOPED
    kit = CONVERSATION
    cacheable = True
    cache_ttl = 300.0

    def run(
        self,
        ports,
        query="",
        tags=None,
        days_back=None,
        related_to_project=None,
        limit=10,
        semantic=None,
    ):
        problem = _filter_params(tags, days_back, related_to_project)
        if problem is None and (
            isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit
        ):
            problem = "limit must be a whole number, 1 or more"
        if problem is None and not isinstance(query, str):
            problem = "query must be text"
        if problem:
            return error_result(problem)
        limit = min(limit, MAX_SEARCH_LIMIT)
        filters = SearchFilters(tags=tags, days_back=days_back,
                                related_to_project=related_to_project)  # fmt: skip
        use_semantic = (semantic is None or semantic) and Memories(ports).available
        embed = default_embed(ports.settings) if semantic is None or semantic else None
        if query.strip() and use_semantic:
            return self._recall_search(ports, query, limit, filters, embed)
        if query.strip() and embed is not None:
            return self._fused_search(ports, query, limit, filters, use_semantic, embed)
        return self._result(ports, query, "hybrid", self._journal_search(ports, query, limit,
                                                                          filters))  # fmt: skip

    @staticmethod
    def _journal_search(ports, query, limit, filters, semantic_scores=None, expansion=None):
        entries = Journal(ports).entries()
        # what was told in private is found for its teller only (`memory.audience`): ranked
        # over the whole journal (its index is shared), the others' private entries dropped
        viewer = turn_viewer(ports.world)
        hidden = sum(1 for entry in entries if not visible_to(entry, viewer))
        ranked = search_entries(entries, query, now=ports.clock.now(),
                                params=SearchParams.from_settings(ports.settings),
                                filters=filters, limit=limit + hidden,
                                semantic_scores=semantic_scores, expansion=expansion,
                                index_cache=journal_index_cache(ports))  # fmt: skip
        return [(score, entry) for score, entry in ranked if visible_to(entry, viewer)][:limit]

    @staticmethod
    def _result(ports, query, mode, ranked, memories=None, note=None):
        result = {
            "success": True,
            "query": query,
            "mode": mode,
            "count": len(ranked),
            "results": [entry_summary(entry, score) for score, entry in ranked],
        }
        if memories:
            result["memories"] = memories
        if note:
            result["note"] = note
        return result

    @defer.inlineCallbacks
    def _recall_search(self, ports, query, limit, filters, embed):
        """
        The recall pipeline (`memory.recall`), as the prompt recalls: the journal and every
        long-term memory in one ranking, for whom this turn answers. A store that cannot list
        its memories is searched its own way (`_fused_search`).
        """
        mirror = yield loaded_mirror(ports)
        if not mirror.loaded:
            found = yield self._fused_search(ports, query, limit, filters, True, embed)
            return found
        recalled, _ = yield recall(ports, RecallQuery(
            text=query, viewer=turn_viewer(ports.world), limit=limit,
            filters=filters if filters.active else None))
        return self._result(ports, query, "recall",
                            [(found.score, found.item) for found in recalled])

    @staticmethod
    @defer.inlineCallbacks
    def _expansion(ports, embed, query, texts):
        """The journal's words nearest to the query's (worker pool); None: unwanted or failed."""
        if not ports.settings.get("journal.expansion_weight"):
            return None
        try:
            expansion = yield ports.run_cpu_bound(expansion_terms, embed, query, texts,
                                                  journal_vocabulary(ports))
        except Exception as err:  # noqa: BLE001 - the query's own words still answer
            ports.log(f"{ports.name}: journal query expansion failed ({err})")
            return None
        return expansion

    @defer.inlineCallbacks
    def _fused_search(self, ports, query, limit, filters, use_semantic, embed):
        """
        BM25 fused with dense similarities computed off the reactor: the local embedder's
        cosine for every journal entry (vectors cached per text, so each entry is embedded
        once) and the semantic tier's hits mapped back to their entries. The BM25 query is
        widened with the journal's words nearest in meaning to the query's (`expansion`, also
        computed off the reactor) when `journal.expansion_weight` is set.
        """
        similarities, memories, notes, modes = {}, [], [], []
        expansion = None
        if embed is not None:
            entries = Journal(ports).entries()
            ids = [entry["id"] for entry in entries]
            texts = [entry.get("content", "") for entry in entries]
            try:
                cosines = yield ports.run_cpu_bound(dense_similarities, embed, query, texts,
                                                    journal_embedding_matrices(ports))
            except Exception as err:  # noqa: BLE001 - the other ways still answer
                ports.log(f"{ports.name}: journal embedding failed ({err})")
                notes.append("embedding unavailable")
            else:
                similarities.update(zip(ids, cosines, strict=True))
                modes.append("dense")
                expansion = yield self._expansion(ports, embed, query, texts)
        if use_semantic:
            try:
                # over-fetch: the fusion needs similarities beyond the final top `limit`
                hits = yield Memories(ports).search(query,
                                                    limit=max(limit * SEMANTIC_FETCH, 50))
            except Exception as err:  # noqa: BLE001 - the text search still answers
                ports.log(f"{ports.name}: semantic journal search failed ({err})")
                notes.append("semantic memory unavailable")
                hits = ()
            else:
                modes.append("semantic")
            # After the yield: read the journal fresh.
            known = {entry["id"] for entry in Journal(ports).entries()}
            for hit in hits or ():
                if not isinstance(hit, dict):
                    continue
                entry_id = (hit.get("metadata") or {}).get("entry_id")
                score = float(hit.get("score") or 0.0)
                if entry_id in known:
                    similarities[entry_id] = max(score, similarities.get(entry_id, 0.0))
                elif not any(vars(filters).values()):
                    memories.append({"id": hit.get("id"), "memory": hit.get("memory"),
                                     "score": round(score, 4)})  # fmt: skip
        # The similarities join BM25 in one relevance (score or rank fusion, share
        # `journal.embedding_weight`), so every way of finding an entry counts in one ranking.
        ranked = self._journal_search(ports, query, limit, filters,
                                      semantic_scores=similarities or None,
                                      expansion=expansion)
        mode = "+".join(modes + ["hybrid"])
        note = "; ".join(notes) or None
        if notes and not modes:
            note += "; text search only"
        return self._result(ports, query, mode, ranked, memories[:limit], note=note)


class ReviewJournalTool(Tool):
    name = "review_journal"
    description = (
        "Review your recent journal entries and record what you make of them. Returns the "
        "entries reviewed; your synthesis is saved as a [SYNTHESIS] entry unless "
        "save_as_entry is false."
    )
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "synthesis": {"type": "string", "description": "Your insights after the review."},
            "days_back": {"type": "integer", "minimum": 0, "default": 7},
            "tags": {**_STRING_LIST, "description": "Review only entries with all these tags."},
            "save_as_entry": {"type": "boolean", "default": True},
        },
        "required": ["synthesis"],
    }
    category = ToolCategory.SAFE_CHAIN
    family = "journal"
    kit = MEMORY

    def run(self, ports, synthesis=None, days_back=7, tags=None, save_as_entry=True):
        if not isinstance(synthesis, str) or not synthesis.strip():
            return error_result("synthesis is required: your insights after the review")
        problem = _filter_params(tags, days_back, None)
        if problem:
            return error_result(problem)
        now = ports.clock.now()
        entries = Journal(ports).entries()
        reviewed = [
            entry
            for entry in entries
            if entry_matches_filters(entry, now, tags=tags, days_back=days_back)
        ]
        result = {
            "success": True,
            "reviewed_count": len(reviewed),
            "days_back": days_back,
            "summary": _review_summary(reviewed),
            "entries": [
                entry_summary(entry, content_chars=REVIEW_CONTENT_CHARS)
                for entry in reviewed[-REVIEW_LIST_MAX:]
            ],
        }
        if save_as_entry:
            text = synthesis.strip()
            if not text.startswith(journal.SYNTHESIS_PREFIX):
                text = f"{journal.SYNTHESIS_PREFIX} {text}"
            cited = reviewed[-REVIEW_LIST_MAX:]
            try:
                entry = Journal(ports).add(
                    text,
                    tags=list(journal.SYNTHESIS_TAGS),
                    source_type="inference",
                    source_entity="review",
                    importance=REVIEW_IMPORTANCE,
                    evidence=[e["id"] for e in cited],
                    provenance=review_provenance(cited),
                )
            except JournalError as err:
                return error_result(str(err))
            result["saved_entry"] = entry_summary(entry)
        return result


def review_provenance(reviewed):
    """
    The provenance of a review's synthesis (`memory.provenance.derive`): made from the entries
    reviewed (their ids, and what they were made from), its speaker and trust those of the
    least trusted of them, never above an inference's; the assistant's own thought when it
    reviewed nothing. So a synthesis over a player's lines stays that player's testimony.
    """
    refs = []
    for entry in reviewed:
        refs += [provenance.ref("journal", entry["id"]), *provenance.of(entry)["derived_from"]]
    return provenance.derive([provenance.of(entry) for entry in reviewed], refs,
                             ceiling=provenance.INFERENCE_TRUST)


def _review_summary(entries):
    """Counts that help a reviewer: how many, how important, which tags and sources."""
    if not entries:
        return {"entries": 0}
    tags, sources = {}, {}
    for entry in entries:
        for tag in entry.get("tags") or ():
            tags[tag] = tags.get(tag, 0) + 1
        source = entry.get("source_type") or "?"
        sources[source] = sources.get(source, 0) + 1
    moments = [parse_iso(e.get("timestamp")) for e in entries]
    moments = [m for m in moments if m]
    return {
        "entries": len(entries),
        "average_importance": round(
            sum(e.get("importance") or 0 for e in entries) / len(entries), 2
        ),
        "high_importance": sum(1 for e in entries if (e.get("importance") or 0) >= 7),
        "top_tags": dict(sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))[:10]),
        "sources": sources,
        "from": min(moments).strftime("%Y-%m-%dT%H:%M:%SZ") if moments else None,
        "to": max(moments).strftime("%Y-%m-%dT%H:%M:%SZ") if moments else None,
    }
