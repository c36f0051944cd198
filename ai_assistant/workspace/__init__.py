"""The assistant's cognitive workspace: goals, projects, session memory, system status."""
