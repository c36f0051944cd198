"""The memory inspector as a Django app (for its templates and static files)."""

from django.apps import AppConfig


class InspectorConfig(AppConfig):
    """`"ai_assistant.web"` in `INSTALLED_APPS`; labelled apart from Evennia's own `web` app."""

    name = "ai_assistant.web"
    label = "ai_assistant_web"
    verbose_name = "AI assistant memory inspector"
