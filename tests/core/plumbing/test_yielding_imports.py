"""
Imports that step aside for a reply (issue 34): a background import pauses between modules while
a reply is in flight, and never for longer than its bounds.
"""

import sys
import threading
import time

import pytest

from ai_assistant.plumbing.yielding_imports import stepping_aside


@pytest.fixture
def package(tmp_path, monkeypatch):
    """An importable package of three modules, each noting when it ran."""
    root = tmp_path / "harbour_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("import time\nRAN = [time.monotonic()]\n"
                                      "from harbour_pkg import pier, lamp\n")
    for name in ("pier", "lamp"):
        (root / f"{name}.py").write_text("import time\nimport harbour_pkg\n"
                                         "harbour_pkg.RAN.append(time.monotonic())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "harbour_pkg"
    for name in [each for each in sys.modules if each.startswith("harbour_pkg")]:
        del sys.modules[name]


def test_a_background_import_waits_while_a_reply_is_in_flight(package):
    replying = threading.Event()
    replying.set()
    done, paused = threading.Event(), []

    def open_store():
        with stepping_aside(replying.is_set, max_pause=5.0) as finder:
            import harbour_pkg  # noqa: F401
        paused.append(finder.paused)
        done.set()

    threading.Thread(target=open_store).start()
    time.sleep(0.2)
    assert package not in sys.modules and not done.is_set()  # paused before its first module
    replying.clear()
    assert done.wait(5.0)
    assert len(sys.modules[package].RAN) == 3 and paused[0] >= 0.2


def test_pauses_are_bounded_each_and_in_all(package):
    """A reply that never ends (or that waits for a module the paused import holds) does not
    stop the import for ever."""
    with stepping_aside(lambda: True, max_pause=0.05, max_total=0.12) as finder:
        import harbour_pkg  # noqa: F401
    assert len(sys.modules[package].RAN) == 3
    # (a pause may oversleep under load: two of 0.05+ s can use up the 0.12 s)
    assert 2 <= finder.pauses <= 3 and 0.12 <= finder.paused < 0.5


def test_other_threads_imports_never_pause_and_the_finder_is_removed(package):
    before = list(sys.meta_path)
    imported = []
    with stepping_aside(lambda: True, max_pause=5.0) as finder:
        other = threading.Thread(target=lambda: imported.append(__import__(package)))
        started = time.monotonic()
        other.start()
        other.join(5.0)
        assert imported and time.monotonic() - started < 1.0 and finder.pauses == 0
    assert sys.meta_path == before


def test_a_store_opening_in_a_fresh_process_pauses_while_a_reply_is_in_flight(tmp_path):
    """The real opening (mem0 and qdrant imported for the first time): held at each module while
    a reply is in flight (for half a second at most), then opened once it is over."""
    import os
    import subprocess
    import textwrap

    script = textwrap.dedent(f"""
        import sys, threading, time
        from ai_assistant.memory.longterm.mem0_store import make_semantic_store
        from ai_assistant.plumbing import reply_priority
        from ai_assistant.plumbing.settings import Settings

        reply_priority.reply_started()
        opened = []
        opening = threading.Thread(target=lambda: opened.append(
            make_semantic_store(Settings(), {str(tmp_path)!r}, "Ada")))
        opening.start()
        waited = 0.0
        while waited < 60 and not any(type(each).__name__ == "_StepAside"
                                      for each in sys.meta_path):
            time.sleep(0.01)  # the embedder loads first (not an import of the opening)
            waited += 0.01
        time.sleep(1.0)
        taken = [name for name in sys.modules if name.split(".")[0] in ("mem0", "qdrant_client")]
        print("during the reply:", len(taken) <= 3, bool(opened))
        reply_priority.reply_finished()
        opening.join(120)
        print("after it:", "mem0" in sys.modules, opened[0] is not None)
        sys.stdout.flush()
        import os
        os._exit(0)
    """)
    env = {**os.environ, "AI_ASSISTANT_LLM_BASE_URL": "", "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=180, env=env)
    # each pause lasts 0.5 s at most: in a second, two or three of its ~160 modules
    assert "during the reply: True False" in result.stdout, result.stderr[-2000:]
    assert "after it: True True" in result.stdout, result.stderr[-2000:]
