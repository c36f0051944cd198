"""
Recall blocks: what the assistant remembers that bears on the moment - semantic memories the
awake tick fetched before the cycle, and journal entries matching the events.
"""

from ai_assistant.memory.journal import format_entry
from ai_assistant.memory.search.journal_search import search_journal
from ai_assistant.plumbing.quoting import quote_untrusted


def semantic_memories_block(ports, situation):
    """Memories the awake tick fetched from the semantic tier before the cycle (if any)."""
    text = str(situation.get("memories") or "").strip()
    if text.startswith("## "):
        text = text.partition("\n")[2]
    return quote_untrusted(text, "MEMORIES") if text else None


def journal_block(ports, situation):
    """Journal entries relevant to what is happening now (hybrid-scored search, fast)."""
    query = " ".join(str(event.get("text", "")) for event in situation.get("events") or [])
    if not query.strip():
        return None
    hits = search_journal(ports, query, limit=ports.settings.get("journal.prompt_entries"))
    lines = [format_entry(entry) for _, entry in hits]
    return quote_untrusted("\n".join(lines), "JOURNAL") if lines else None
