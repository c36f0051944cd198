"""
The environment variables the contrib reads itself, and where a setting's value comes from.

A game need not copy environment variables into its `AI_ASSISTANT` setting: `settings_tree`
(`plumbing/settings.py`) reads these for whatever the game's settings leave unset. Precedence,
highest first:

1. a per-NPC override (`@assistant/config Ada = llm.model ...`);
2. the game's `AI_ASSISTANT` setting (`server/conf/settings.py`);
3. `AI_ASSISTANT_LLM_BASE_URL`, `AI_ASSISTANT_LLM_API_KEY`, `AI_ASSISTANT_LLM_MODEL`;
4. `OPENAI_BASE_URL`, `OPENAI_API_KEY` (the `openai` SDK's own names);
5. the default (`DEFAULTS`).

`setting_source` names the level a value came from, so that the first LLM request can log it:
an `OPENAI_API_KEY` left in a shell then does not start paid calls unnoticed.
"""

import os
from collections.abc import Mapping

# dotted setting -> the variables read for it, in order of precedence
ENVIRONMENT = {
    "llm.base_url": ("AI_ASSISTANT_LLM_BASE_URL", "OPENAI_BASE_URL"),
    "llm.api_key": ("AI_ASSISTANT_LLM_API_KEY", "OPENAI_API_KEY"),
    "llm.model": ("AI_ASSISTANT_LLM_MODEL",),
}
PER_NPC = "per-NPC config"
GAME = "game settings (AI_ASSISTANT)"
DEFAULT = "default"


def configured_value(configured, dotted_key):
    """The value the game's `AI_ASSISTANT` gives `dotted_key`, or None when it sets none."""
    node = configured or {}
    for part in dotted_key.split("."):
        if not isinstance(node, Mapping) or node.get(part) is None:
            return None
        node = node[part]
    return node


def environment_values(configured=None, environ=None):
    """
    Args:
        configured (Mapping, optional): The game's `AI_ASSISTANT` setting.
        environ (Mapping, optional): The environment (default `os.environ`).

    Returns:
        dict: `{dotted key: value}` read from the environment for the settings of
        `ENVIRONMENT` that the game leaves unset.
    """
    environ = os.environ if environ is None else environ
    found = {}
    for dotted_key, names in ENVIRONMENT.items():
        if configured_value(configured, dotted_key) is not None:
            continue
        value = next((environ[name] for name in names if environ.get(name)), None)
        if value:
            found[dotted_key] = value
    return found


def setting_source(dotted_key, configured=None, overrides=None, environ=None):
    """
    Where a setting's value comes from, in words.

    Args:
        dotted_key (str): The setting.
        configured (Mapping, optional): The game's `AI_ASSISTANT` setting.
        overrides (Mapping, optional): The NPC's per-NPC overrides.
        environ (Mapping, optional): The environment (default `os.environ`).

    Returns:
        str: "per-NPC config", "game settings (AI_ASSISTANT)", "environment (NAME)" or
        "default".
    """
    environ = os.environ if environ is None else environ
    if dotted_key in (overrides or {}):
        return PER_NPC
    if configured_value(configured, dotted_key) is not None:
        return GAME
    for name in ENVIRONMENT.get(dotted_key, ()):
        if environ.get(name):
            return f"environment ({name})"
    return DEFAULT
