"""Prompt blocks: each renders one part of what the assistant knows into its prompt."""
