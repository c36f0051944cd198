"""
Recall blocks: what the assistant remembers that bears on the moment - semantic memories the
awake tick fetched before the cycle, and journal entries matching the events (without the
entries of what was just heard, or of lines the conversation history already shows).
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


def _quoted_in_prompt(situation):
    """What the prompt's conversation history shows, as a heard entry quotes it."""
    quoted = set()
    for message in situation.get("history") or ():
        text = " ".join(str(message.get("content") or "").removeprefix("(whispered) ").split())
        if text and message.get("role") == "user":
            quoted.add(f'"{text}"')
    return quoted


def _repeats(entry, quoted):
    """True for a heard entry whose words are already in the conversation history."""
    if "heard" not in (entry.get("tags") or ()):
        return False
    content = " ".join(str(entry.get("content") or "").split())
    return any(content.endswith(text) for text in quoted)


def journal_block(ports, situation):
    """Journal entries relevant to what is happening now (hybrid-scored search, fast)."""
    query = " ".join(str(event.get("text", "")) for event in situation.get("events") or [])
    if not query.strip():
        return None
    limit = ports.settings.get("journal.prompt_entries")
    # the entries of what was just heard are the new events themselves: search one more per
    # event so the ones left out do not shrink the block
    shown = {event.get("journal_id") for event in situation.get("events") or ()} - {None}
    hits = search_journal(ports, query, limit=limit + len(shown))
    heard = _quoted_in_prompt(situation)
    lines = [format_entry(entry) for _, entry in hits
             if entry.get("id") not in shown and not _repeats(entry, heard)][:limit]
    return quote_untrusted("\n".join(lines), "JOURNAL") if lines else None
