"""
AI Assistant - an LLM-driven NPC with long-term memory for Evennia.

The package has a core that knows nothing of Evennia (memory, agent loop, tools, workspace,
sleep logic) and a thin Evennia shell (`typeclasses`, `commands`, `conf`, `threads`).
Import the shell pieces from their modules, e.g.
`from ai_assistant.typeclasses import AssistantCharacter`.
"""

__version__ = "0.1.0"
