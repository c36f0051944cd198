"""
The memory inspector as a Django app (for its templates and static files), and the contrib's
earliest hook in the Server process: its `ready()` starts the warm-up of what a first reply
needs while Evennia is still starting (`ai_assistant.server_warm_up`).
"""

from django.apps import AppConfig


class InspectorConfig(AppConfig):
    """`"ai_assistant.web"` in `INSTALLED_APPS`; labelled apart from Evennia's own `web` app."""

    name = "ai_assistant.web"
    label = "ai_assistant_web"
    verbose_name = "AI assistant memory inspector"

    def ready(self):
        from ai_assistant.server_warm_up import start_in_server_process

        start_in_server_process()  # only in the Server process: a no-op anywhere else
