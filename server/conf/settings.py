r"""
Evennia settings for the ai_assistant demo game.

Only what differs from Evennia's defaults is here. Server-specific secrets go in
`secret_settings.py` (not committed). See `ai_assistant/plumbing/settings.py` for every AI_ASSISTANT key.
"""

import os

from evennia.settings_default import *  # noqa: F401,F403

SERVERNAME = "ai_assistant demo"

# The demo listens on loopback only: telnet 4000, web 4001.
TELNET_INTERFACES = ["127.0.0.1"]
WEBSERVER_INTERFACES = ["127.0.0.1"]
WEBSOCKET_CLIENT_INTERFACE = "127.0.0.1"

# Game-wide assistant settings (see ai_assistant/plumbing/settings.py for every key and its default).
# With no LLM endpoint configured (here or in OPENAI_BASE_URL / OPENAI_API_KEY) the assistant
# runs in mechanical mode.
AI_ASSISTANT = {
    "typeclass": "typeclasses.assistants.Assistant",
    "llm": {
        "base_url": os.environ.get("AI_ASSISTANT_LLM_BASE_URL") or None,
        "api_key": os.environ.get("AI_ASSISTANT_LLM_API_KEY") or None,
        "model": os.environ.get("AI_ASSISTANT_LLM_MODEL", "gpt-4o-mini"),
    },
    # Process-wide: a computing thread hands the interpreter lock back to the reactor sooner.
    "threads": {"switch_interval": 0.001},
}

try:
    from server.conf.secret_settings import *  # noqa: F401,F403
except ImportError:
    pass
