"""Closing a served connection without waiting on its client (issue 53, defect 1).

After the last answer on a connection, HTTP/1.1 asks the server to close in two steps (RFC 9112
section 9.6): half-close its side (FIN after the answer), then keep reading until the client
closes too, so that request bytes still arriving do not make the kernel reset the connection
and cut the answer short. gunicorn's gthread worker does the second step with a blocking read
of up to 2 s (`gunicorn.util.close_graceful`) on the worker's main loop, the loop that accepts
connections and tells the arbiter the worker is alive. A client that never reads its answer nor
closes held that loop for the whole 2 s; 25 such clients held it past the arbiter's 30 s
timeout and the worker was killed with every request in flight.

`LingeringCloses` does the same two steps in the event loop instead: the half-close at once, then
the socket waits in the worker's selector, like a kept-alive connection, for the client's close
or more bytes (read and discarded, `LINGER_DRAIN_BYTES` at most), and is closed when the client
has closed, the drain is full, or `LINGER_S` has passed. Nothing on the loop blocks. A worker
lingers on at most `LINGER_MAX` sockets; past that the oldest is closed at once (its answer was
already sent; a client that sent nothing after its request loses nothing).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import time
from collections import OrderedDict
from functools import partial

# As gunicorn's close_graceful: how long a closing connection waits for the client's close, and
# how much of what the client still sends is read (and discarded) meanwhile.
LINGER_S = 2.0
LINGER_DRAIN_BYTES = 65536
# Sockets one worker lingers on at once (open file descriptors); past it the oldest closes at once.
LINGER_MAX = 256


class LingeringCloses:
    """Graceful closes of a worker's connections, waited for in its selector (main thread only)."""

    def __init__(self, poller: selectors.BaseSelector, linger_s: float = LINGER_S, limit: int = LINGER_MAX) -> None:
        self.poller, self.linger_s, self.limit = poller, linger_s, limit
        # socket -> (deadline, bytes drained so far); insertion order is deadline order.
        self._lingering: OrderedDict[socket.socket, tuple[float, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lingering)

    def close(self, sock: socket.socket) -> None:
        """Half-close `sock` now and close it fully once its client has closed, or later."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.setblocking(False)
            if len(self._lingering) >= self.limit:
                self._close(next(iter(self._lingering)))
            self.poller.register(sock, selectors.EVENT_READ, partial(self._readable, sock))
        except (OSError, ValueError, KeyError):  # the client is gone (or the socket already closed)
            self._lingering.pop(sock, None)
            _close_quietly(sock)
            return
        self._lingering[sock] = (time.monotonic() + self.linger_s, 0)

    def reap(self) -> None:
        """Close every socket whose linger has run out (called on each turn of the worker's loop)."""
        now = time.monotonic()
        for sock, (deadline, _) in list(self._lingering.items()):
            if deadline > now:
                break
            self._close(sock)

    def close_all(self) -> None:
        """Close every lingering socket at once (the worker is stopping)."""
        for sock in list(self._lingering):
            self._close(sock)

    def _readable(self, sock: socket.socket, _fileobj: object = None) -> None:
        entry = self._lingering.get(sock)
        if entry is None:  # closed by an earlier callback of the same poll (the limit): nothing to read
            return
        deadline, drained = entry
        try:
            data = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # reset by the client: nothing left to wait for
            data = b""
        drained += len(data)
        if not data or drained >= LINGER_DRAIN_BYTES:
            self._close(sock)
        else:
            self._lingering[sock] = (deadline, drained)

    def _close(self, sock: socket.socket) -> None:
        self._lingering.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(sock)
        _close_quietly(sock)


def _close_quietly(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
