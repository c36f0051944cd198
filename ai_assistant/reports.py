"""
Admin views: the text `@assistant` shows for one assistant (status and config).

The status itself is written by `workspace.status`; this adds what only the game knows (the
NPC's name, room and ticker).
"""

import json

from ai_assistant.adapters import npc_overrides
from ai_assistant.plumbing.llm import mask_secret
from ai_assistant.workspace.status import settings_problem_lines, status_text

# settings whose value may hold a password: never echoed in game
HIDDEN_SETTINGS = ("llm.api_key", "memory.postgres_url")


def format_status(npc):
    """
    Args:
        npc (AssistantMixin): The assistant.

    Returns:
        str: Mode, sleep phase, tick, provider, token usage and counts (`workspace.status`).
    """
    script = npc.assistant.script
    heading = (f"|w{npc.key}|n ({npc.dbref}) in "
               f"{npc.location.key if npc.location else 'nowhere'}")
    interval = script.ticker_interval if script else None
    return status_text(npc.assistant.ports(), heading, interval,
                       running=script.tick_running() if script else None)


def format_config(npc):
    """The NPC's overrides and its effective LLM settings (keys masked)."""
    overrides = npc_overrides(npc)
    settings = npc.assistant.ports().settings
    llm = dict(settings.get("llm"))
    llm["api_key"] = mask_secret(llm.get("api_key"))
    shown = {key: ("(hidden)" if key in HIDDEN_SETTINGS else value)
             for key, value in overrides.items()}
    lines = [
        f"|wConfig of {npc.key}|n",
        "  overrides: " + (json.dumps(shown, sort_keys=True) if shown else "none"),
        "  llm: " + json.dumps(llm, sort_keys=True, default=str),
        f"  ticks: awake {settings.get('ticks.awake')}s, sleep {settings.get('ticks.sleep')}s",
        *settings_problem_lines(settings),
        "  set one with: @assistant/config <npc> = <dotted.key> <value>",
        f"  every key, its value, default, range and doc: @assistant/config/keys {npc.key} "
        "[= <prefix>]",
    ]
    return "\n".join(lines)


def format_setting_keys(npc, prefix=""):
    """
    Every setting of the NPC (or those under `prefix`): its value, default, what it accepts
    and what it does, from the settings table; its own overrides marked.
    """
    from ai_assistant.plumbing.settings_reference import setting_rows, shown

    overrides = npc_overrides(npc)
    prefix = (prefix or "").strip().rstrip(".")
    rows = [row for row in setting_rows(npc.assistant.ports().settings, overrides)
            if row["key"].startswith(prefix)]  # a section ("llm") or any start ("llm.base")
    if not rows:
        return (f"No setting starts with '{prefix}'. Sections: "
                f"{', '.join(sorted({row['key'].split('.')[0] for row in setting_rows()}))}.")
    lines = [f"|wSettings of {npc.key}|n{f' under {prefix}' if prefix else ''} ({len(rows)}; "
             "|y*|n set for this NPC; change one with @assistant/config <npc> = <key> <value>)"]
    for row in rows:
        value = row["value"]
        if row["key"] == "llm.api_key":
            value = mask_secret(value)
        mark = "|y*|n" if row["overridden"] else " "
        lines.append(f" {mark}|w{row['key']}|n = {shown(value)}  (default {shown(row['default'])};"
                     f" {row['accepts']})")
        lines.append(f"     {row['doc']}")
    return "\n".join(lines)
