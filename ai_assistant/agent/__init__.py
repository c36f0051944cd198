"""The agent core: LLM client, token counting, prompt context, perception and the ReAct loop."""
