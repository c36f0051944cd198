"""
TCP_NODELAY for the demo game's connections (telnet and the Portal-Server AMP link).

Evennia leaves Nagle's algorithm on. A busy room sends players many small writes, and with
Nagle a write that follows an unacknowledged one waits for the peer's delayed ACK - about 40 ms
on Linux - so a `look` in a room full of chatting assistants came back in 3 ms or in 40 ms,
whatever the reactor was doing. Interactive servers turn Nagle off.
"""


def no_delay(protocol_class):
    """Make `protocol_class` switch Nagle off on every connection it makes or accepts."""
    original = protocol_class.connectionMade
    if getattr(original, "no_delay", False):
        return

    def connectionMade(self, *args, **kwargs):
        transport = getattr(self, "transport", None)
        if transport is not None and hasattr(transport, "setTcpNoDelay"):
            transport.setTcpNoDelay(True)
        return original(self, *args, **kwargs)

    connectionMade.no_delay = True
    protocol_class.connectionMade = connectionMade
