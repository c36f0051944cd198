"""
The agent and the tools never import the sleep layer: what they share with it (the conversation,
the perception queue, the loop's record) is a store below both, and what the awake tick needs of
sleep (the emergency compaction) is handed to it by the shell.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ai_assistant"

# Still importing sleep/ (remove a name once it no longer does; the last test keeps this honest).
STILL_IMPORTING = set()


def imports_sleep(path):
    """True when the module imports `ai_assistant.sleep` or anything in it, anywhere."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        if any(name == "ai_assistant.sleep" or name.startswith("ai_assistant.sleep.")
               for name in names):
            return True
    return False


def sleep_importers():
    found = set()
    for package in ("agent", "tools"):
        for path in (PACKAGE / package).rglob("*.py"):
            if imports_sleep(path):
                found.add(".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    return found


def test_neither_the_agent_nor_the_tools_import_sleep():
    strangers = sleep_importers() - STILL_IMPORTING
    assert not strangers, f"{sorted(strangers)} import ai_assistant.sleep"


def test_the_list_of_modules_still_importing_sleep_is_honest():
    done = STILL_IMPORTING - sleep_importers()
    assert not done, f"no longer importing sleep: drop {sorted(done)} from STILL_IMPORTING"


def test_the_check_sees_an_import_of_sleep(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("def later():\n    from ai_assistant import sleep\n")
    assert imports_sleep(module)
    module.write_text("from ai_assistant.memory import conversation\n")
    assert not imports_sleep(module)
