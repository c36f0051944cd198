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
    # No "llm" here: the contrib reads AI_ASSISTANT_LLM_BASE_URL, AI_ASSISTANT_LLM_API_KEY and
    # AI_ASSISTANT_LLM_MODEL itself (see the README's Configuration).
    # Process-wide: a computing thread hands the interpreter lock back to the reactor sooner.
    "threads": {"switch_interval": 0.001},
}

# PostgreSQL instead of the default SQLite file when EVENNIA_DB_ENGINE=postgresql (as
# `make test-postgres` sets; a production game puts its DATABASES here or in secret_settings).
if os.environ.get("EVENNIA_DB_ENGINE") == "postgresql":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("EVENNIA_DB_NAME", "evennia"),
            "USER": os.environ.get("EVENNIA_DB_USER", "evennia"),
            "PASSWORD": os.environ.get("EVENNIA_DB_PASSWORD", ""),
            "HOST": os.environ.get("EVENNIA_DB_HOST", "127.0.0.1"),
            "PORT": os.environ.get("EVENNIA_DB_PORT", "5432"),
            "CONN_MAX_AGE": 0,
        }
    }

# The memory inspector (ai_assistant/web/): staff pages at /assistants/ and the REST API at
# /api/assistants/ (routes in web/urls.py). Its app label is ai_assistant_web.
REST_API_ENABLED = True
INSTALLED_APPS += ["ai_assistant.web"]  # noqa: F405

try:
    from server.conf.secret_settings import *  # noqa: F401,F403
except ImportError:
    pass
