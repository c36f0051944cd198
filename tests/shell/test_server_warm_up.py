"""
The warm-up's earliest start: the inspector app's `ready()` starts it in Evennia's Server
process, and only there (`ai_assistant.server_warm_up`).
"""

import importlib.util
import os
import sys

import pytest

from ai_assistant import server_warm_up
from ai_assistant.agent import warmup

SERVER_PY = importlib.util.find_spec("evennia.server.server").origin
PORTAL_PY = importlib.util.find_spec("evennia.server.portal.portal").origin


@pytest.mark.parametrize("argv", [
    ["/venv/bin/twistd", f"--python={SERVER_PY}",
     "--logger=evennia.utils.logger.GetServerLogObserver", "--pidfile=server/server.pid"],
    ["twistd", f"--python={SERVER_PY}", "--savestats", "--profiler=cprofile"],  # profiled
    ["twistd", "--nodaemon", "--python", SERVER_PY],  # interactive start (`istart`)
])
def test_the_server_process_is_recognised(argv):
    assert server_warm_up.is_server_process(argv)


@pytest.mark.parametrize("argv", [
    ["/venv/bin/twistd", f"--python={PORTAL_PY}",
     "--logger=evennia.utils.logger.GetPortalLogObserver"],  # the Portal
    ["/venv/bin/evennia", "migrate"],
    ["/venv/bin/evennia", "shell"],
    ["/venv/bin/evennia", "start"],  # the launcher, before it starts the Portal
    ["/venv/bin/evennia", "test", "--settings", "settings.py", "evennia"],
    ["/venv/bin/pytest", "tests/shell", "-x"],
    ["twistd", "--python=/elsewhere/server.py"],  # another program's server.py
    [],
])
def test_no_other_process_is_taken_for_the_server(argv):
    assert not server_warm_up.is_server_process(argv)


def test_a_link_to_the_server_module_is_still_the_server(tmp_path):
    link = tmp_path / "server.py"
    os.symlink(SERVER_PY, link)
    assert server_warm_up.is_server_process(["twistd", f"--python={link}"])


def test_outside_the_server_process_the_app_starts_nothing(monkeypatch):
    """`ready()` runs in every process that sets Django up (this test run too)."""
    from django.apps import apps

    monkeypatch.setattr(warmup, "_started", [])
    monkeypatch.setattr(warmup, "_early", [])
    apps.get_app_config("ai_assistant_web").ready()
    assert warmup._started == [] and warmup._early == []
    assert server_warm_up.start_in_server_process(["/venv/bin/evennia", "migrate"]) is None
    assert warmup._started == []


def test_in_the_server_process_the_app_starts_the_warm_up_thread(monkeypatch):
    calls = []
    monkeypatch.setattr(warmup, "start_early",
                        lambda settings, prepare, log=None: calls.append((settings, prepare)))
    monkeypatch.setattr(sys, "argv", ["twistd", f"--python={SERVER_PY}"])
    from django.apps import apps

    apps.get_app_config("ai_assistant_web").ready()
    [(settings, prepare)] = calls
    assert prepare is server_warm_up.import_tick_modules
    assert settings.get("threads.switch_interval") == 0.001  # the game's own AI_ASSISTANT


def test_the_tick_modules_are_the_ones_the_awake_tick_imports():
    import inspect

    from ai_assistant.handler import AssistantHandler

    def module_of(line):  # `from a.b import c`: a.b.c when that is a module, else a.b
        _, package, _, name = line.split()[:4]
        is_package = hasattr(importlib.import_module(package), "__path__")
        return f"{package}.{name}" if is_package else package

    source = inspect.getsource(AssistantHandler._awake_tick)
    imported = {module_of(line.strip()) for line in source.splitlines()
                if line.strip().startswith("from ai_assistant.")}
    warmed = {line.split()[1] for line in
              inspect.getsource(server_warm_up.import_tick_modules).splitlines()
              if line.strip().startswith("import ai_assistant.")}
    assert imported <= warmed
    assert "ai_assistant.sleep.compaction" in imported
