"""
Recall: what the assistant remembers that bears on a query, from every tier. All of it is here.

- `pipeline`: the ranking (BM25 with lemmas, speaker and time awareness, fused with dense
  similarity), privacy, deduplication by source entry and selection under a token budget; it
  serves the prompt's "What you remember" block (`agent.blocks.remembered`) and the lookup
  tools;
- `diversity`: the second stage: of the first hits, a line that repeats a better one moves
  down, so a question about several things gets a line about each;
- `long_term`: recall from the long-term store alone (the `search_facts` tool,
  `@assistant/memory`);
- `tiers`: the memory nodes and the entity profiles as items recall ranks;
- `lines`: a memory of the long-term store as a journal-shaped item, and the dated line a
  recalled item is shown as;
- `grouping`: the prompt's block laid out by day and speaker (what repeats said once), and
  what a line costs in it;
- `information`: how much a line says (greetings and "ok" say little).

The long-term memories it ranks come from the store's recall mirror (`longterm.mirror`), which
the store's owner (`longterm.memories.Memories`) keeps in step with every write.
"""
