"""
The layout holds: arrows point one way, the core needs neither Django nor Evennia, modules stay
small enough to read.

Layers, top to bottom (a module may import its own layer and the layers below it):

- the Evennia shell: `typeclasses`, `handler`, `commands`, `adapters`, `reports`;
- the processes: `agent` (perception, awake tick, ReAct loop, prompt), then `tools`, then
  `sleep` (modes, the cycle and its steps);
- the stores and their pure logic: `workspace`, then `memory`;
- the plumbing: settings, documents, ports, LLM I/O, reply parsing, quoting, tokens, threads.
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ai_assistant"

SHELL = 6
LAYERS = {
    "ai_assistant.agent": 5,
    "ai_assistant.tools": 4,
    "ai_assistant.sleep": 3,
    "ai_assistant.workspace": 2.5,
    "ai_assistant.memory": 2,
    "ai_assistant.plumbing": 1,
}
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer(name):
    for prefix, rank in LAYERS.items():
        if name == prefix or name.startswith(prefix + "."):
            return rank
    return SHELL


def imported_modules(name, path):
    """Every ai_assistant module and every outside top-level package `name` imports, anywhere."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return found


GRAPH = {name: imported_modules(name, path) for name, path in MODULES.items()}


def test_no_module_imports_from_a_layer_above_it():
    upward = [
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if target in MODULES and layer(target) > layer(name)
    ]
    assert not upward, "imports that run back up:\n" + "\n".join(sorted(upward))


def test_no_django_or_evennia_below_the_shell():
    leaks = [
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if layer(name) < SHELL
        for target in targets
        if target.split(".")[0] in ("django", "evennia")
    ]
    assert not leaks, "\n".join(sorted(leaks))


def test_no_import_circles():
    edges = {name: {t for t in targets if t in MODULES and t != name}
             for name, targets in GRAPH.items()}
    # a package's __init__ that only hands names on does not make a circle with its children
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for name in edges:
        if name not in index:
            visit(name)
    assert not circles, f"import circles: {circles}"


def test_steps_blocks_and_tools_are_registered_by_reference():
    by_name = [
        str(path.relative_to(ROOT))
        for path in MODULES.values()
        if "import_module" in path.read_text() or "__import__(" in path.read_text()
    ]
    assert not by_name, f"modules that load code by name: {by_name}"


def test_modules_and_functions_are_small_enough_to_read():
    big_modules, big_functions = [], []
    for name, path in MODULES.items():
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            big_modules.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    big_functions.append(f"{name}.{node.name}: {length} lines")
    assert not big_modules and not big_functions, "\n".join(big_modules + big_functions)


def test_comments_name_concepts_not_documents_or_emoji():
    jargon = []
    for name, path in MODULES.items():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            lowered = line.lower()
            if "seed 00" in lowered or "seeds 00" in lowered or any(
                    mark in line for mark in "❶❷❸❹❺❻❼❽❾"):
                jargon.append(f"{name}:{number}: {line.strip()}")
    assert not jargon, "\n".join(jargon)


# One test file of each layer below the shell, run again with Django and Evennia unimportable
# (the whole core suite runs once, in the main run).
CORE_SAMPLE = (
    "tests/core/plumbing/test_settings_and_documents.py",
    "tests/core/memory/test_journal.py",
    "tests/core/workspace/test_goals.py",
    "tests/core/sleep/test_sleep_modes.py",
    "tests/core/tools/test_registry.py",
    "tests/core/agent/test_react.py",
)
# Makes `import django` and `import evennia` (and their submodules) fail, then imports every
# module below the shell and runs the sample; argv: the modules, "--", pytest's arguments.
CORE_ONLY_RUN = """
import importlib, importlib.abc, sys

class Unimportable(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("django", "evennia"):
            raise ImportError(f"{name} is not importable in a core-only run")
        return None

sys.meta_path.insert(0, Unimportable())
split = sys.argv.index("--")
for name in sys.argv[1:split]:
    importlib.import_module(name)
import pytest
sys.exit(pytest.main(sys.argv[split + 1:]))
"""


def test_the_core_runs_without_django_or_evennia():
    """Every module below the shell imports, and a sample of each layer's tests passes, where
    Django and Evennia cannot be imported."""
    core = sorted(name for name in MODULES if layer(name) < SHELL)
    assert {name.split(".")[1] for name in core} == {prefix.split(".")[1] for prefix in LAYERS}
    assert all((ROOT / path).exists() for path in CORE_SAMPLE), CORE_SAMPLE
    env = {**os.environ, "AI_ASSISTANT_CORE_ONLY": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "-c", CORE_ONLY_RUN, *core, "--", "-q", "-p", "no:django",
         "-p", "no:xdist", "-o", "addopts=", "-x", *CORE_SAMPLE],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    tail = (result.stdout + result.stderr)[-3000:]
    assert result.returncode == 0, tail
    assert " passed" in tail and "CORE-ONLY RUN IMPORTED" not in tail, tail


pytestmark = pytest.mark.filterwarnings("ignore")
