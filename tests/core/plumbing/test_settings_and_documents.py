"""
Settings and state documents each have one home: `plumbing/settings.py` and
`plumbing/documents.py`.
"""

import re
from pathlib import Path

import pytest

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.settings import (
    DEFAULTS,
    Settings,
    leaf_keys,
    setting_type,
)

PACKAGE = Path(__file__).resolve().parents[3] / "ai_assistant"
SOURCES = {path: path.read_text() for path in PACKAGE.rglob("*.py")}


def test_every_setting_has_a_type_and_a_default():
    keys = list(leaf_keys())
    assert "journal.max_entries" in keys and "llm.extra" in keys
    for key in keys:
        kind = setting_type(key)
        assert kind is not type(None), key
        value = Settings(DEFAULTS).get(key)
        assert value is None or isinstance(value, kind) or (kind is float and isinstance(
            value, int)), key


def test_an_unknown_setting_raises_and_a_known_one_never_needs_a_default():
    settings = Settings(DEFAULTS, {"journal.max_entries": 7})
    assert settings.get("journal.max_entries") == 7
    with pytest.raises(KeyError):
        settings.get("journal.max_entrie")
    with pytest.raises(KeyError):
        setting_type("journal.nope")
    assert settings.get("llm.extra.top_p") is None  # free-form subtree: unset, not unknown


def test_no_call_site_repeats_a_default():
    repeated = [
        f"{path.name}: {match.group(0)}"
        for path, text in SOURCES.items()
        for match in re.finditer(r"settings\.get\(\s*f?[\"'][^\"']+[\"']\s*,", text)
    ]
    assert not repeated, repeated


def test_the_specification_places_its_documents():
    assert documents.JOURNAL.on == documents.CHARACTER
    assert documents.ENTITY_PROFILES.on == documents.CHARACTER
    assert documents.PROJECTS.on == documents.CHARACTER
    assert documents.CURRENT_GOALS.on == documents.SCRIPT
    assert documents.REFLECTION_STATE.on == documents.SCRIPT
    assert documents.on_script("memory_links") and not documents.on_script("journal")
    assert documents.JOURNAL == "journal" and isinstance(documents.JOURNAL, str)


def test_a_document_default_is_a_fresh_copy_each_time():
    first = documents.PENDING_EVENTS.default()
    first.append("x")
    assert documents.PENDING_EVENTS.default() == []


def test_documents_are_registered_once_and_unknown_names_raise():
    with pytest.raises(ValueError):
        documents.Document("journal", on=documents.CHARACTER, default=None, owner="x", shape="x")
    with pytest.raises(KeyError):
        documents.get("jounral")


def test_no_document_is_named_by_a_bare_string():
    bare = [
        f"{path.relative_to(PACKAGE)}: {match.group(0)}"
        for path, text in SOURCES.items()
        for match in re.finditer(r"\.state\.(?:get|set)\(\s*[\"'][a-z_]+[\"']", text)
    ]
    assert not bare, bare
