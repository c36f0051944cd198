"""
AI Assistant - an LLM-driven NPC with long-term memory for Evennia.

The package has a core that knows nothing of Evennia (`agent`, `tools`, `sleep`, `workspace`,
`memory`, `plumbing`) and a thin Evennia shell (`handler`, `typeclasses`, `commands`,
`adapters`, `reports`). The public names are importable from here:

    from ai_assistant import AssistantMixin, AssistantCmdSet

They are loaded on first use (PEP 562 `__getattr__`), so importing a core module, e.g.
`import ai_assistant.memory.journal`, never imports Django or Evennia.
"""

__version__ = "0.1.0"

__all__ = [
    "AssistantCharacter",
    "AssistantScript",
    "AssistantHandler",
    "AssistantMixin",
    "AssistantCmdSet",
    "AssistantToolCmdSet",
    "AssistantPorts",
    "AssistantRuntime",
    "Settings",
    "DEFAULTS",
]


def __getattr__(name):
    """Load a public name from its module the first time it is asked for."""
    if name in ("AssistantCharacter", "AssistantScript"):
        from ai_assistant import typeclasses as module
    elif name in ("AssistantHandler", "AssistantMixin"):
        from ai_assistant import handler as module
    elif name in ("AssistantCmdSet", "AssistantToolCmdSet"):
        from ai_assistant import commands as module
    elif name == "AssistantPorts":
        from ai_assistant.plumbing import ports as module
    elif name == "AssistantRuntime":
        from ai_assistant.plumbing import runtime as module
    elif name in ("Settings", "DEFAULTS"):
        from ai_assistant.plumbing import settings as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


def __dir__():
    return sorted([*globals(), *__all__])
