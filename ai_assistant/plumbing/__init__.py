"""Plumbing: settings, state documents, ports, LLM I/O, reply parsing, quoting, tokens, threads."""
