"""
What `@assistant` shows: the text of its views - the journal and a search of it, the persona
and its versions, the tools - made from an assistant's state, for `ai_assistant.admin_commands`
to send. Nothing here reads the command line or answers anyone.
"""

import json
import textwrap

from evennia.utils.ansi import raw

from ai_assistant.tools.registry import SCOPED, ToolCategory

TOOL_TEXT_WIDTH = 78


def format_json(data):
    return json.dumps(data, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def journal_text(npc, query=""):
    """
    `@assistant/journal`: the newest entries, or a search's matches best first and, apart, the
    related entries the ranking brought along.
    """
    from ai_assistant.memory.journal import format_entry
    from ai_assistant.memory.search.journal_search import search_journal, split_matches

    ports = npc.assistant.ports()
    entries = npc.assistant.journal.entries()
    if not query:
        recent = entries[-15:]
        lines = [f"|wJournal of {npc.key}|n ({len(entries)} entries, newest last)"]
        lines += [f"  {format_entry(entry)}" for entry in recent] or ["  (empty)"]
        return "\n".join(lines)
    # best first, whatever order the search hands them back in
    hits = sorted(search_journal(ports, query), key=lambda hit: -hit[0])
    matches, related = split_matches(ports, query, hits)
    if not matches:
        lines = [f"No journal entries of {npc.key} match '{query}'."]
    else:
        lines = [f"|wJournal of {npc.key}|n: {len(matches)} "
                 f"match{'es' if len(matches) != 1 else ''} for '{query}' (hybrid score, "
                 "best first)"]
        lines += [f"  {score:.3f}  {format_entry(entry)}" for score, entry in matches]
    if related:
        lines.append(f"|wRelated|n ({len(related)}; ranked near the matches, but sharing "
                     "no word, speaker or time with the query)")
        lines += [f"  {score:.3f}  {format_entry(entry)}" for score, entry in related]
    return "\n".join(lines)


def persona_text(npc):
    """`@assistant/persona <npc>`: the admins' persona, its own guidelines, its description."""
    own = npc.assistant.persona.own_guidelines()
    persona = npc.assistant.persona.admin_instructions()
    lines = [f"|wPersona of {npc.key}|n (set by admins; the assistant cannot change it)",
             f"  {persona}" if persona else "  (none: the default persona is used)"]
    if own:
        lines += ["|wIts own guidelines|n (update_system_prompt; they extend the persona)",
                  f"  {own}"]
    lines.append(f"  (every version of both: @assistant/persona/history {npc.key})")
    lines.append(f"|wDescription|n (@desc): {npc.db.desc or '(none)'}")
    return "\n".join(lines)


def persona_versions_text(npc, listed):
    """`@assistant/persona/history`: every version of the persona and its own guidelines."""
    if not listed:
        return (f"{npc.key} has not changed its own guidelines. No admin has changed its "
                "persona either.")
    lines = [f"|wVersions of {npc.key}'s own guidelines and persona|n (oldest first; "
             f"@assistant/persona/revert {npc.key} = <n>)"]
    for item in listed:
        when = f" {item['time']}" if item["time"] else ""
        who = f" by {item['by']}" if item["by"] else ""
        text = item["prompt"] if item["kept"] else "(text not kept)"
        lines.append(f"  |w{item['version']}|n {item['which']}{when}{who}: "
                     f"{item['reason'] or ''}")
        lines.append(f"      {text if text else '(none: no guidelines of its own)'}")
    return "\n".join(lines)


def tool_arguments(tool):
    """
    A tool's arguments in words: `message (string, required), reasoning (string, optional)`.

    Returns:
        str: One entry per parameter, required ones first; "none" for a tool without any.
    """
    props = tool.parameters.get("properties", {})
    required = tool.parameters.get("required", [])
    names = [name for name in required if name in props]
    names += [name for name in props if name not in required]
    parts = []
    for name in names:
        spec = props[name]
        kind = spec.get("type", "any")
        if isinstance(kind, list):
            kind = "/".join(kind)
        if spec.get("enum"):
            kind += " " + "|".join(str(value) for value in spec["enum"])
        parts.append(f"{name} ({kind}, {'required' if name in required else 'optional'})")
    return ", ".join(parts) or "none"


def format_tools(npc, registry):
    """The whole tool list: per family, each tool with its category, arguments and text."""
    lines = [f"|wTools of {npc.key}|n (also commands on the NPC, except those named like "
             "a default command)"]
    family = None
    for tool in registry.all():
        if tool.family != family:
            family = tool.family
            lines.append(f"|y{family}|n")
        marker = "" if tool.category != ToolCategory.DANGEROUS else " |r(disabled)|n"
        # least agency (tools.agency): a lasting tool never runs on a player's word
        reach = "players' turns too" if tool.reach == SCOPED else "own turns and admins only"
        lines.append(f"  |c{tool.name}|n ({tool.category.value}; {reach}){marker}")
        # the whole description, wrapped at word boundaries, never cut; shown as written: a
        # "|" in it ("high|medium|low") is text, not the start of a colour code
        for paragraph in " ".join(tool.description.split()).split("\n"):
            lines += [raw(line) for line in textwrap.wrap(
                paragraph, TOOL_TEXT_WIDTH, initial_indent="      ", subsequent_indent="      ")]
        lines += [raw(line) for line in textwrap.wrap(
            f"arguments: {tool_arguments(tool)}", TOOL_TEXT_WIDTH, initial_indent="      ",
            subsequent_indent="        ")]
    return "\n".join(lines)
