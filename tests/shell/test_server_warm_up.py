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
    assert prepare.func is server_warm_up.prepare_early and prepare.args == (settings,)
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


def test_the_early_thread_imports_the_store_library_without_opening_a_store(tmp_path):
    """mem0 imported with the store's environment (telemetry off, its folder the game's), and
    no store opened: no file of a store is made before the fork."""
    import subprocess
    import textwrap

    script = textwrap.dedent(f"""
        import os, sys, threading
        from django.conf import settings
        settings.configure(AI_ASSISTANT_DATA_DIR={str(tmp_path / "data")!r})
        from ai_assistant.plumbing.settings import Settings, settings_tree
        from ai_assistant import server_warm_up
        from ai_assistant.memory.longterm import mem0_store
        assert "mem0" not in sys.modules
        server_warm_up.import_store_library(Settings(settings_tree({{}})))
        assert "mem0" in sys.modules
        assert os.environ["MEM0_TELEMETRY"] == "False"
        assert os.environ["MEM0_DIR"] == os.path.join({str(tmp_path / "data")!r}, "mem0")
        assert mem0_store._stores == {{}}
        assert not os.path.exists(os.path.join({str(tmp_path / "data")!r}, "qdrant"))
        assert threading.active_count() == 1, threading.enumerate()
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("MEM0_DIR", "DJANGO_SETTINGS_MODULE")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


def test_the_early_thread_leaves_mem0_alone_when_memory_is_off(monkeypatch):
    from ai_assistant.plumbing.settings import Settings, settings_tree

    imported = []
    monkeypatch.setattr(server_warm_up, "import_tick_modules", lambda: imported.append("tick"))
    monkeypatch.setattr(sys, "modules", {**sys.modules, "mem0": None})  # an import would fail
    server_warm_up.prepare_early(Settings(settings_tree({"memory": {"enabled": False}})))
    assert imported == ["tick"]
