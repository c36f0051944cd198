"""
Recall over the journal: episodic search.

- `journal_search`: `search_entries` (rank entries for a query) and `search_journal` (an
  assistant's own journal, with its settings and caches); the score is described there;
- `params` (`SearchParams`, the knobs) and `filters` (`SearchFilters`, what may be returned);
- `scoring`: relevance (BM25, feedback, fusion, boosts) and the specification's formula;
- `index`: the BM25 index of a journal version; `terms`: words, stems, stop words;
- `dense`: embedding similarities (the local embedder, computed off the reactor);
- `time_references`: the days, months or years a query names.
"""
