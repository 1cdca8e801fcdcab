"""The raw-socket floor the HTTP benchmarks compare every client with.

- ``read_floor(port, path, separator, consume)`` POSTs ``{}`` to ``path`` on
  ``127.0.0.1:port`` over a plain socket, reads the head, strips chunk framing
  when the response is chunked, splits the body on ``separator`` and hands each
  read's complete payloads to ``consume``; nothing else.
- ``consume`` is the benchmark's own: it decodes the payloads (``json.loads``),
  counts what it counts and returns ``True`` once the wire's end marker is seen;
  the read then stops. It is called once per socket read with a list, not once
  per payload, so the floor pays no per-event call over its own loop.
- The read also stops at the zero-size last chunk or at EOF.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

READ_SIZE = 65536
"""Bytes asked of each ``recv``."""


def read_floor(
    port: int,
    path: str,
    separator: bytes,
    consume: Callable[[list[bytes]], bool],
) -> None:
    """Stream ``path`` from the loopback server at ``port`` to its end, handing
    the payloads between ``separator`` to ``consume`` in order (a partial
    trailing payload is held back until it is complete)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\n{}".encode()
        )
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(READ_SIZE)
        head, _, rest = data.partition(b"\r\n\r\n")
        chunked = b"chunked" in head.lower()
        raw = bytearray(rest)
        body = b""
        while True:
            last = False
            if chunked:
                # Strip as many complete HTTP chunks as the buffer holds.
                out = []
                pos = 0
                while True:
                    line_end = raw.find(b"\r\n", pos)
                    if line_end < 0:
                        break
                    size = int(raw[pos:line_end], 16)
                    if len(raw) < line_end + 2 + size + 2:
                        break
                    out.append(bytes(raw[line_end + 2 : line_end + 2 + size]))
                    pos = line_end + 4 + size
                del raw[:pos]
                # Only the zero-size last chunk is empty: checked once per read.
                last = bool(out) and not out[-1]
                body += b"".join(out)
            else:
                body += bytes(raw)
                raw.clear()
            parts = body.split(separator)
            body = parts.pop()
            if consume(parts) or last:
                return
            piece = sock.recv(READ_SIZE)
            if not piece:
                return
            raw += piece
