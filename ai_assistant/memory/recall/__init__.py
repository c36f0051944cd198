"""
One recall pipeline for the prompt and the lookup tools, over every tier.

- `lines`: a memory of the long-term store as a journal-shaped item, and the dated line a
  recalled item is shown as;
- `information`: how much a line says (greetings and "ok" say little);
- `mirror`: the assistant's in-memory lexical and dense index beside mem0, keyed by memory id;
- `pipeline`: the ranking (BM25 with lemmas, speaker and time awareness, fused with dense
  similarity), privacy, deduplication by source entry and selection under a token budget.
"""
