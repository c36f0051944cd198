"""ReAct tools: the registry and one module per tool family."""
