"""
Settings are one table of rows (issue 28.4, issue 34.3): key, default, type, range and one line
of doc. The defaults, validation, `@assistant/config/keys` and the README's configuration table
all come from it.
"""

from pathlib import Path

import pytest

from ai_assistant.plumbing import settings
from ai_assistant.plumbing.setting_table import SETTINGS, Setting
from ai_assistant.plumbing.settings import DEFAULTS, SettingError, Settings, validate
from ai_assistant.plumbing.settings_reference import (
    README_END,
    README_START,
    markdown_table,
    setting_rows,
    with_table,
)

pytestmark = pytest.mark.core

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_table_is_the_settings_table():
    text = README.read_text()
    assert with_table(text) == text, (
        "README.md's settings table is stale: run "
        "`.venv/bin/python -m ai_assistant.plumbing.settings_reference README.md`")
    table = text[text.index(README_START):text.index(README_END)]
    assert table.count("\n| `") == len(SETTINGS)


def test_a_changed_row_makes_the_readme_disagree(monkeypatch):
    text = README.read_text()
    changed = tuple(Setting(row.key, row.default, row.doc + " (changed)", row.range, row.type,
                            row.nullable, row.free_form, row.form) if row.key == "ticks.awake"
                    else row for row in SETTINGS)
    from ai_assistant.plumbing import settings_reference

    monkeypatch.setattr(settings_reference, "SETTINGS", changed)
    assert with_table(text) != text
    assert "(changed)" in markdown_table()


def test_every_row_has_a_one_line_doc_and_a_range_where_it_counts():
    keys = [row.key for row in SETTINGS]
    assert len(keys) == len(set(keys)) >= 160
    for row in SETTINGS:
        assert row.doc and "\n" not in row.doc and len(row.doc) <= 100, row.key
        if row.kind in (int, float) and not row.free_form:
            assert row.range is not None, f"{row.key} has no range"
        assert validate(row.key, row.default) == row.default or row.default is None


def test_the_defaults_tree_is_built_from_the_rows():
    assert DEFAULTS["llm"]["model"] == "gpt-4o-mini"
    assert DEFAULTS["workspace"]["goals"]["max_subtasks"] == 7
    assert Settings().get("journal.max_entries") == 100
    assert list(settings.leaf_keys()) == [row.key for row in SETTINGS]


@pytest.mark.parametrize("value", ["not a url", "ftp://example.com/v1", "http://", "localhost"])
def test_a_base_url_that_is_not_a_url_is_refused_clearly(value):
    with pytest.raises(SettingError) as refused:
        validate("llm.base_url", value)
    assert str(refused.value) == (
        f"llm.base_url takes an http(s) URL such as http://127.0.0.1:11434/v1, or null; "
        f"got {value!r}")


@pytest.mark.parametrize("value", ["http://127.0.0.1:11434/v1", "https://api.openai.com/v1"])
def test_a_url_is_accepted(value):
    assert validate("llm.base_url", value) == value


def test_a_bad_url_in_the_games_settings_is_ignored_and_listed():
    view = Settings(settings.settings_tree({"llm": {"base_url": "not a url"}}, environ={}))
    assert view.get("llm.base_url") is None
    assert [problem["key"] for problem in view.problems] == ["llm.base_url"]


def test_free_form_subtrees_take_any_key_below_them():
    assert Settings.known_key("memory.mem0.vector_store") and Settings.known_key("llm.extra.x")
    assert not Settings.known_key("llm") and not Settings.known_key("llm.nope")
    assert validate("llm.extra.seed", 7) == 7


def test_the_rows_of_an_assistant_show_value_default_range_and_override():
    view = Settings(overrides={"ticks.awake": 9})
    rows = {row["key"]: row for row in setting_rows(view, {"ticks.awake": 9})}
    assert rows["ticks.awake"] == {"key": "ticks.awake", "default": 5, "value": 9,
                                   "accepts": "a whole number from 1 to 86400",
                                   "doc": "Seconds between awake ticks.", "overridden": True}
    assert rows["react.fallback_line"]["overridden"] is False
