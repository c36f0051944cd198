"""
The settings table in words: the README's configuration table and `@assistant/config <npc>/all`
are both made here from the rows of `plumbing/setting_table.py`, so neither can drift from it.

Regenerate the README's table after changing a row:

    .venv/bin/python -m ai_assistant.plumbing.settings_reference README.md

(`tests/test_settings_table.py` fails while the README disagrees.)
"""

import json
import sys
from pathlib import Path

from ai_assistant.plumbing.settings import SETTINGS, accepted

README_START = ("<!-- settings-table:start (generated from "
                "ai_assistant/plumbing/setting_table.py) -->")
README_END = "<!-- settings-table:end -->"


def shown(value):
    """A value as JSON text (null, true, 0.7, "gpt-4o-mini"), as a game writes it in JSON."""
    return json.dumps(value, sort_keys=True, default=str)


def setting_rows(settings=None, overrides=None):
    """
    Every setting, in the table's order.

    Args:
        settings (Settings, optional): An assistant's settings, for its values.
        overrides (dict, optional): Its per-NPC overrides, to mark what it changed.

    Returns:
        list[dict]: `{"key", "default", "accepts", "doc"}`, plus `"value"` and `"overridden"`
        when `settings` is given.
    """
    rows = []
    for row in SETTINGS:
        item = {"key": row.key, "default": row.default, "accepts": accepted(row.key),
                "doc": row.doc}
        if settings is not None:
            item["value"] = settings.get(row.key)
            item["overridden"] = row.key in (overrides or {})
        rows.append(item)
    return rows


def markdown_table():
    """The README's table of every setting: key, default, what it accepts, what it does."""
    lines = ["| key | default | accepts | what it does |", "|---|---|---|---|"]
    for item in setting_rows():
        cells = (f"`{item['key']}`", f"`{shown(item['default'])}`", item["accepts"],
                 item["doc"])
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def with_table(readme):
    """
    `readme` with the text between its settings-table markers replaced by `markdown_table()`.

    Raises:
        ValueError: When the README has no markers.
    """
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no {README_START!r} ... {README_END!r} section")
    return f"{readme[:start]}{README_START}\n{markdown_table()}\n{readme[end:]}"


def main(argv=None):
    """Rewrite the settings table of the README given on the command line."""
    path = Path((argv if argv is not None else sys.argv[1:])[0])
    path.write_text(with_table(path.read_text()))


if __name__ == "__main__":
    main()
