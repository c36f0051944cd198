"""
TCP_NODELAY for the demo game's connections: the contrib ships the helper
(`ai_assistant.tcp_nodelay`); this module keeps the demo's old import path working.
"""

from ai_assistant.tcp_nodelay import no_delay, portal_no_delay, server_no_delay  # noqa: F401
