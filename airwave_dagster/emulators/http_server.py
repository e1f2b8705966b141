"""The threading HTTP server behind the project's local test servers (Plex emulator, LLM stub).

Both must stop answering the moment `stop` is called, including on keep-alive connections a
client still holds, and both treat a client hanging up mid-reply as routine.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)


class TrackedThreadingServer(ThreadingHTTPServer):
    """A threading server that remembers its open connections so they can be cut on stop."""

    daemon_threads = True
    label = "local server"
    """Named in the log when a request fails."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Remember the connection before a worker thread takes it."""
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        """Forget a connection its worker has finished with."""
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut every open connection, so a stopped server stops answering at once."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                logger.debug("connection already closed")

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that give up (timeouts) hang up mid-reply; that is routine, not a failure."""
        error = sys.exc_info()[1]
        if isinstance(error, BrokenPipeError | ConnectionResetError):
            logger.debug("client %s hung up before the reply was sent", client_address)
        else:
            logger.exception("%s failed on a request from %s", self.label, client_address)
