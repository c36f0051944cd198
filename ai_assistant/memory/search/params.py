"""
The tuning knobs of a journal search, as one object.

`SearchParams()` is the specification's formula (equal weights, recency decay 0.99) with the
default speaker and context boosts and nothing else; `SearchParams.from_settings(settings)` is
what an assistant is configured with (the `journal.*` settings of the same names).
"""

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class SearchParams:
    """
    How `search_entries` scores and ranks (see `journal_search` for the score).

    Attributes:
        alpha_recency, alpha_importance, alpha_relevance (float): The weights of the
            specification's weighted mean.
        recency_decay (float): Rate per hour of the recency decay.
        speaker_boost (float): Relevance bonus (x(1+boost)) for entries whose source_entity
            is named in the query.
        context_weight (float): Share of a neighbouring entry's relevance an entry inherits.
        context_terms (float): Weight of the previous and next entries' words in an entry's
            BM25 (document expansion with the turn's context; 0 reads each entry alone).
        fusion (str): "score" (normalised-score) or "rrf" (reciprocal-rank) fusion of BM25 and
            the dense similarity; used only with `embed` or `semantic_scores`.
        embedding_weight (float): The dense similarity's share of the fusion (0 leaves it out).
        feedback_docs, feedback_terms, feedback_weight: Pseudo-relevance feedback (the best
            `feedback_docs` entries' top terms re-query the journal at `feedback_weight`).
        relevance_gate (float): With a query, only entries whose relevance is at least this
            share of the best one's are scored (0 keeps every entry with relevance > 0).
        rerank_pool (int, optional): With a query, only the this many most relevant of them.
        time_boost (float): Relevance bonus (x(1+boost)) for entries written in the days,
            months or years the query names ("on 9 May", "last week", "yesterday"; see
            `time_references`); those words then leave the text match. 0 turns it off.
        expansion_weight (float): Weight, times their similarity, of the journal's words
            nearest in meaning to the query's (`expansion`); used only with an `expansion`
            computed off the reactor. 0 leaves it out.
    """

    alpha_recency: float = 1.0
    alpha_importance: float = 1.0
    alpha_relevance: float = 1.0
    recency_decay: float = 0.99
    speaker_boost: float = 0.6
    context_weight: float = 0.5
    context_terms: float = 0.0
    fusion: str = "score"
    embedding_weight: float = 0.0
    feedback_docs: int = 0
    feedback_terms: int = 10
    feedback_weight: float = 0.3
    relevance_gate: float = 0.0
    rerank_pool: int | None = None
    time_boost: float = 0.0
    expansion_weight: float = 0.0

    @classmethod
    def from_settings(cls, settings):
        """
        The search configured for an assistant: each knob is the `journal.` setting of its name.

        Nothing here embeds: these options are safe for the synchronous search on the reactor.
        `embedding_weight` applies only when a caller also passes `semantic_scores` (the
        `search_journal` tool does, with similarities computed off the reactor).

        Args:
            settings (Settings): Its settings.

        Returns:
            SearchParams
        """
        return cls(**{knob.name: settings.get(f"journal.{knob.name}") for knob in fields(cls)})

    @property
    def feedback(self):
        """`(docs, terms, weight)` of the pseudo-relevance feedback."""
        return self.feedback_docs, self.feedback_terms, self.feedback_weight
