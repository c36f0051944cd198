"""
Test setup: Django + Evennia initialised once, the repository importable as the game dir.

Tests that touch the database take pytest-django's `db` fixture.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.conf.settings")
# mem0 must neither phone home nor write to the home folder, whoever imports it first.
os.environ.setdefault("MEM0_TELEMETRY", "False")


def pytest_configure(config):
    import pytest_django.plugin

    blocker = config.stash[pytest_django.plugin.blocking_manager_key]
    blocker.unblock()
    try:
        import evennia
        from django.conf import settings

        # as Evennia's own test runner does: objects may lack a home while the DB is flushed
        settings.TEST_ENVIRONMENT = True

        evennia._init()
    finally:
        blocker.restore()
pytest_plugins = ["scripted_llm"]


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def synchronous_journal_embedding(monkeypatch):
    """The search_journal tool embeds in the worker pool; tests run it synchronously."""
    from support import sync_runner

    import ai_assistant.tools.journal as journal_tools

    monkeypatch.setattr(journal_tools, "EMBED_RUNNER", sync_runner)
