"""
Assistants from Evennia prototypes: `spawn` makes a whole assistant - persona, description and
per-NPC settings - in one step.

`assistant_prototype` builds the prototype dict; put it in one of the game's prototype modules
(`world/prototypes.py` is one by default) and spawn it by its key::

    # world/prototypes.py
    from ai_assistant.prototypes import assistant_prototype

    ARCHIVIST = assistant_prototype(
        "Ada",
        prototype_key="archivist",
        persona="You are Ada, the archivist of the harbour library...",
        desc="A calm woman with ink-stained fingers.",
        config={"ticks.awake": 10, "llm.temperature": 0.5},
    )

    > spawn archivist

The persona is the admins' `user_system_prompt` (`@assistant/persona` shows it), the settings
are the NPC's `config_overrides` (`@assistant/config`), checked here against their ranges. A
spawned assistant is made like one from `@assistant/create`: `at_object_creation` tags it and
gives it its script and tool commands, and `at_object_post_creation` (which runs after the
prototype's Attributes are written) renews its ticker for the prototype's settings.
"""

from ai_assistant.memory.persona import admin_instructions_attribute
from ai_assistant.plumbing.settings import DEFAULTS, validate


def assistant_prototype(key, *, persona=None, desc=None, config=None, typeclass=None,
                        prototype_key=None, **fields):
    """
    A prototype for `spawn` that makes an assistant.

    Args:
        key (str): The NPC's name.
        persona (str, optional): The admins' persona of it.
        desc (str, optional): Its description (what `look` shows).
        config (dict, optional): Per-NPC settings, `{"dotted.key": value}`.
        typeclass (str, optional): Its typeclass (needs `AssistantMixin`); default the
            setting `typeclass`, `ai_assistant.typeclasses.AssistantCharacter`.
        prototype_key (str, optional): What `spawn` calls it; default `key` in lower case.
        **fields: Any other prototype keys (`prototype_desc`, `aliases`, `tags`, `location`...).

    Returns:
        dict: The prototype.

    Raises:
        SettingError: For a setting in `config` outside its type or range.
    """
    from ai_assistant.adapters import overrides_attribute  # the shell's owner of overrides

    overrides = {name: validate(name, value) for name, value in (config or {}).items()}
    attrs = [overrides_attribute(overrides)]
    if persona:
        attrs.append(admin_instructions_attribute(str(persona).strip()))
    prototype = {
        "prototype_key": prototype_key or key.lower(),
        "prototype_tags": ["ai_assistant"],
        "key": key,
        "typeclass": typeclass or DEFAULTS["typeclass"],
        "attrs": [*attrs, *fields.pop("attrs", [])],
        **fields,
    }
    if desc:
        prototype["desc"] = str(desc).strip()
    return prototype
