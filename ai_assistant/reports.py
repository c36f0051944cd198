"""
Admin views: the text `@assistant` shows for one assistant (status and config).

The status itself is written by `workspace.status`; this adds what only the game knows (the
NPC's name, room and ticker).
"""

import json

from ai_assistant.plumbing import documents
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
    interval = script.attributes.get(documents.TICKER_INTERVAL) if script else None
    return status_text(npc.assistant.ports(), heading, interval)


def format_config(npc):
    """The NPC's overrides and its effective LLM settings (keys masked)."""
    overrides = dict(npc.attributes.get(documents.CONFIG_OVERRIDES) or {})
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
    ]
    return "\n".join(lines)
