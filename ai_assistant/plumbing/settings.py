"""
Settings for ai_assistant: the defaults, the game's `AI_ASSISTANT` setting, per-NPC overrides.

Every number of the specification is a default here and can be changed. The settings
themselves - key, default, type, range, one line of doc - are the rows of
`plumbing/setting_table.py`; this module builds the defaults tree from them and checks values.
A game overrides any subset in its `server/conf/settings.py`::

    AI_ASSISTANT = {
        "llm": {"base_url": "http://127.0.0.1:11434/v1", "model": "llama3.1"},
        "journal": {"max_entries": 200},
    }

and an admin can override a key per NPC with `@assistant/config Ada = llm.model gpt-4o-mini`.
Lookups use dotted keys: `settings.get("journal.max_entries")`.

This module knows nothing of Django: the shell reads the game's `AI_ASSISTANT` setting and hands
it to `settings_tree`.
"""

import copy
from collections.abc import Mapping
from urllib.parse import urlsplit

from ai_assistant.plumbing.environment import environment_values
from ai_assistant.plumbing.setting_table import BIG, SETTINGS, Setting
from ai_assistant.plumbing.setting_values import SettingError, coerce, describe

__all__ = ["BIG", "SETTINGS", "Setting", "SettingError"]  # re-exported for callers

SETTINGS_BY_KEY = {row.key: row for row in SETTINGS}
# Why `@assistant/config` refuses a game-wide setting for one assistant. (The memory move
# itself builds both stores' settings as overrides, so `Settings` does not refuse them.)
GAME_WIDE_ERROR = ("{key} is one for the whole game (opened once per game, not per assistant): "
                   "set it in the game's settings (AI_ASSISTANT) and reload")


def _defaults_tree(rows):
    """The nested defaults tree of the table's rows (`{"llm": {"model": ...}, ...}`)."""
    tree = {}
    for row in rows:
        *parents, leaf = row.key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = copy.deepcopy(row.default)
    return tree


# The defaults as a tree, as a game's AI_ASSISTANT setting is written (built from the table).
DEFAULTS = _defaults_tree(SETTINGS)


def accepted(dotted_key):
    """What a setting accepts, in words: "a whole number from 1 to 86400", "true or false"..."""
    row = SETTINGS_BY_KEY[dotted_key]
    if row.form == "url":
        return "an http(s) URL such as http://127.0.0.1:11434/v1" + (
            ", or null" if row.nullable else "")
    return describe(row.kind, row.range, nullable=row.nullable)


def validate(dotted_key, value):
    """
    Check a value for a setting and return it as the setting's type.

    Args:
        dotted_key (str): A key of the table (`SETTINGS`), a free-form subtree, or a key
            below one.
        value: The value (from JSON, from settings.py, or text).

    Returns:
        any: The value with the setting's type ("5" or 5.0 for an int setting gives 5).

    Raises:
        SettingError: For an unknown key, or a value outside the type, range or form; the
            message names what the setting accepts.
    """
    if not Settings.known_key(dotted_key):
        raise SettingError(f"unknown setting {dotted_key!r}")
    row = SETTINGS_BY_KEY.get(dotted_key)
    if row is None:
        return value  # below a free-form subtree: handed on as it is
    if value is None and row.nullable:
        return None
    limits = row.range
    try:
        typed = coerce(row.kind, value)
    except (TypeError, ValueError):
        raise SettingError(f"{dotted_key} takes {accepted(dotted_key)}; got {value!r}") from None
    if limits and not (typed in limits if row.kind is str else limits[0] <= typed <= limits[1]):
        raise SettingError(f"{dotted_key} takes {accepted(dotted_key)}; got {value!r}")
    if row.form and not FORMS[row.form](typed):
        raise SettingError(f"{dotted_key} takes {accepted(dotted_key)}; got {value!r}")
    return typed


def _is_url(text):
    """True for an http(s) URL with a host: what an OpenAI-compatible endpoint needs."""
    parsed = urlsplit(str(text).strip())
    return parsed.scheme in ("http", "https") and bool(parsed.hostname) and " " not in text


# Structured values checked beyond their type, by a row's `form`.
FORMS = {"url": _is_url}


def setting_type(dotted_key):
    """
    The type a setting takes.

    Args:
        dotted_key (str): A key of the table (`SETTINGS`).

    Returns:
        type: `str`, `int`, `float`, `bool`, `dict`...

    Raises:
        KeyError: For a key that the table does not define.
    """
    try:
        return SETTINGS_BY_KEY[dotted_key].kind
    except KeyError:
        raise KeyError(f"unknown ai_assistant setting {dotted_key!r}") from None


def leaf_keys():
    """Every settable dotted key, in the table's order (free-form subtrees as one key each)."""
    return (row.key for row in SETTINGS)


def deep_merge(base, override):
    """
    Return a new dict with `override` merged into `base`, recursively.

    Args:
        base (Mapping): The defaults.
        override (Mapping): Values that win.

    Returns:
        dict: A fresh nested dict; neither argument is modified.
    """
    merged = copy.deepcopy(dict(base))
    for key, value in (override or {}).items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def settings_tree(configured=None, environ=None):
    """
    A game's settings merged over the defaults, with the environment variables of
    `ENVIRONMENT` read for what the game leaves unset.

    Precedence, highest first: a per-NPC override (`Settings`), the game's `AI_ASSISTANT`,
    `AI_ASSISTANT_LLM_*`, `OPENAI_API_KEY` / `OPENAI_BASE_URL`, the default.

    Args:
        configured (Mapping, optional): The game's `AI_ASSISTANT` setting.
        environ (Mapping, optional): The environment (default `os.environ`).

    Returns:
        dict: The game-wide settings tree.
    """
    tree = deep_merge(DEFAULTS, configured or {})
    for dotted_key, value in environment_values(configured, environ).items():
        _set_dotted(tree, dotted_key, value)
    return tree


def _checked_tree(tree, problems):
    """`tree` with every value its setting does not accept replaced by the default."""
    checked = tree
    for dotted_key in leaf_keys():
        node, default = tree, DEFAULTS
        for part in dotted_key.split("."):
            node = node.get(part, _MISSING) if isinstance(node, Mapping) else _MISSING
            default = default[part]
        if node is _MISSING or (node == default and type(node) is type(default)):
            continue
        try:
            value = validate(dotted_key, node)
        except SettingError as err:
            problems.append({"key": dotted_key, "value": node, "source": "game settings",
                             "error": str(err)})
            value = copy.deepcopy(default)
        if value is not node:
            if checked is tree:
                checked = copy.deepcopy(tree)
            _set_dotted(checked, dotted_key, value)
    return checked


_MISSING = object()


class Settings:
    """
    Read-only view of a settings tree with dotted-key lookup.

    Every value is checked (`validate`) when the view is made: a value its setting does not
    accept - stored by an older version, or written in the game's settings.py - is ignored
    (the default, or the game's value, is used instead) and listed in `problems`, so it never
    breaks a tick or a reload; `@assistant` shows the list.

    Args:
        tree (dict, optional): A full settings tree; defaults to `settings_tree()`.
        overrides (dict, optional): Flat `{"dotted.key": value}` per-NPC overrides.

    Attributes:
        problems (list): `{"key", "value", "source", "error"}` for every value ignored.
    """

    def __init__(self, tree=None, overrides=None):
        self.problems = []
        tree = tree if tree is not None else settings_tree()
        self._tree = _checked_tree(tree, self.problems)
        self._take_overrides(overrides)

    def _take_overrides(self, overrides):
        self._overrides = {}
        for key, value in dict(overrides or {}).items():
            try:
                self._overrides[key] = validate(key, value)
            except SettingError as err:
                self.problems.append({"key": key, "value": value, "source": "per-NPC config",
                                      "error": str(err)})

    def get(self, dotted_key):
        """
        Look up a setting. Every key has its default in `DEFAULTS`: callers never repeat it.

        Args:
            dotted_key (str): E.g. `"journal.max_entries"`.

        Returns:
            any: The per-NPC override if set, else the game setting (a subtree as a dict).

        Raises:
            KeyError: For a key that `DEFAULTS` does not define (a typo must not read as None).
        """
        if dotted_key in self._overrides:
            return self._overrides[dotted_key]
        node = self._tree
        for part in dotted_key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                if self.known_key(dotted_key):  # a free-form subtree's key nobody set
                    return None
                raise KeyError(f"unknown ai_assistant setting {dotted_key!r}")
            node = node[part]
        if isinstance(node, Mapping):
            # a subtree: apply the overrides that live below it
            node = copy.deepcopy(dict(node))
            prefix = dotted_key + "."
            for key, value in self._overrides.items():
                if key.startswith(prefix):
                    _set_dotted(node, key[len(prefix) :], value)
        return node

    def __getitem__(self, dotted_key):
        return self.get(dotted_key)

    def with_overrides(self, overrides):
        """
        Args:
            overrides (dict): More flat dotted-key overrides.

        Returns:
            Settings: A new view with these overrides on top of the current ones. It shares
            this view's tree, checked once (a game's thousand assistants each take a view of
            the game's settings), and the problems found checking it.
        """
        view = Settings.__new__(Settings)
        view._tree = self._tree
        view.problems = [problem for problem in self.problems
                         if problem["source"] == "game settings"]
        view._take_overrides({**self._overrides, **(overrides or {})})
        return view

    @staticmethod
    def game_wide(dotted_key):
        """True for a setting that is one for the whole game (`Setting.game_wide`), which
        `@assistant/config` does not set for one assistant."""
        row = SETTINGS_BY_KEY.get(dotted_key)
        return bool(row and row.game_wide)

    @staticmethod
    def known_key(dotted_key):
        """
        Args:
            dotted_key (str): A key to check.

        Returns:
            bool: True for a key of the table, or one below a free-form subtree (`llm.extra`,
            `memory.mem0` accept any key).
        """
        if dotted_key in SETTINGS_BY_KEY:
            return True
        parts = dotted_key.split(".")
        return any(getattr(SETTINGS_BY_KEY.get(".".join(parts[:i])), "free_form", False)
                   for i in range(1, len(parts)))


def _set_dotted(tree, dotted_key, value):
    parts = dotted_key.split(".")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value
