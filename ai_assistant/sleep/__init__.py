"""Operating modes, wake conditions, sleep schedule and the sleep tick orchestrator."""
