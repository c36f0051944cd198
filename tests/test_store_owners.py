"""
Every store has one owner: a state document is named only by the module that owns it.

A store's documents (`plumbing/documents.py`) are read and written by its owner class alone; the
rest of the house goes through that owner's verbs (`journal.add`, `people.observe`, ...). The
test reads every module under `ai_assistant` and fails when one names a document (`documents.X`
or `from ...documents import X`) that another module owns.
"""

import ast
from pathlib import Path

import pytest

from ai_assistant.plumbing import documents

pytestmark = pytest.mark.core

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ai_assistant"
CONSTANTS = {name: value for name, value in vars(documents).items()
             if isinstance(value, documents.Document)}

def module_name(path):
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def named_documents(path):
    """The document constants a module names, by attribute or by import."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "documents" and node.attr in CONSTANTS):
            found.add(node.attr)
        elif (isinstance(node, ast.ImportFrom) and node.module
              and node.module.endswith("plumbing.documents")):
            found.update(alias.name for alias in node.names if alias.name in CONSTANTS)
    return found


def namers():
    """{document constant: the modules that name it}, documents.py itself left out."""
    result = {name: set() for name in CONSTANTS}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if module == "plumbing.documents":
            continue
        for name in named_documents(path):
            result[name].add(module)
    return result


NAMERS = namers()


@pytest.mark.parametrize("name", sorted(CONSTANTS))
def test_only_its_owner_names_a_document(name):
    document = CONSTANTS[name]
    strangers = NAMERS[name] - {document.owner}
    assert not strangers, (
        f"documents.{name} is owned by {document.owner}, but {sorted(strangers)} name it: "
        f"go through the owner's verbs")
    assert not document.writers, f"documents.{name} has one owner; drop its writers"


def test_every_owner_is_a_module():
    modules = {module_name(path) for path in PACKAGE.rglob("*.py")}
    missing = {name: doc.owner for name, doc in CONSTANTS.items() if doc.owner not in modules}
    assert not missing
