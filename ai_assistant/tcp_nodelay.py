"""
TCP_NODELAY for a game's connections (telnet and the Portal-Server AMP link).

Evennia leaves Nagle's algorithm on. A busy room sends players many small writes, and with
Nagle a write that follows an unacknowledged one waits for the peer's delayed ACK - about 40 ms
on Linux - so a `look` in a room full of chatting assistants came back in 3 ms or in 40 ms,
whatever the reactor was doing (`bench/README.md`). Interactive servers turn Nagle off.

A game enables it from its two service plugin modules (both exist in every game made by
`evennia --init`)::

    # server/conf/portal_services_plugins.py
    def start_plugin_services(portal):
        from ai_assistant.tcp_nodelay import portal_no_delay

        portal_no_delay()

    # server/conf/server_services_plugins.py
    def start_plugin_services(server):
        from ai_assistant.tcp_nodelay import server_no_delay

        server_no_delay()
"""


def no_delay(protocol_class):
    """
    Make `protocol_class` switch Nagle off on every connection it makes or accepts.

    Idempotent: a class already patched is left as it is.

    Args:
        protocol_class (type): A Twisted protocol class.
    """
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


def portal_no_delay():
    """In the Portal: players' telnet connections and the AMP link to the Server."""
    from evennia.server.portal.amp import AMPMultiConnectionProtocol
    from evennia.server.portal.telnet import TelnetProtocol

    no_delay(TelnetProtocol)
    no_delay(AMPMultiConnectionProtocol)


def server_no_delay():
    """In the Server: the AMP link to the Portal, the one made already and any reconnection."""
    import evennia
    from evennia.server.amp_client import AMPServerClientProtocol

    no_delay(AMPServerClientProtocol)  # reconnections after a Portal restart
    protocol = getattr(evennia.EVENNIA_SERVER_SERVICE, "amp_protocol", None)
    transport = getattr(protocol, "transport", None)
    if transport is not None and hasattr(transport, "setTcpNoDelay"):
        transport.setTcpNoDelay(True)  # the link made before plugins start
