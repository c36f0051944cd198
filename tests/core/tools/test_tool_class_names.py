"""A tool class is named after its tool: `open_memory_cluster` is `OpenMemoryClusterTool`."""

import importlib
import inspect
import pkgutil

import pytest

from ai_assistant import tools
from ai_assistant.tools.catalogue import TOOLS
from ai_assistant.tools.registry import Tool


def class_name_for(tool_name):
    return "".join(part.capitalize() for part in tool_name.split("_")) + "Tool"


def tool_classes():
    """Every Tool subclass defined in a module of `ai_assistant.tools`."""
    found = set()
    for info in pkgutil.iter_modules(tools.__path__):
        module = importlib.import_module(f"ai_assistant.tools.{info.name}")
        found.update(value for value in vars(module).values()
                     if inspect.isclass(value) and issubclass(value, Tool) and value is not Tool
                     and value.__module__ == module.__name__)
    return found


@pytest.mark.parametrize("tool_class", sorted(tool_classes(), key=lambda c: c.name),
                         ids=lambda c: c.name)
def test_a_tool_class_is_named_after_its_tool(tool_class):
    assert tool_class.__name__ == class_name_for(tool_class.name)


def test_every_tool_class_is_in_the_catalogue():
    assert tool_classes() == set(TOOLS)


def test_the_name_rule():
    assert class_name_for("open_memory_cluster") == "OpenMemoryClusterTool"
    assert class_name_for("say") == "SayTool"
