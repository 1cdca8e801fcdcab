"""Benchmark: BedrockAdapter's cost per streamed event, over HTTP.

Run ``python benchmarks/bench_bedrock.py`` (options: ``--events N``,
``--repeat R``). It prints one table and is not a test.

A ConverseStream-shaped response in the binary AWS event stream
(``messageStart``, ``--events`` ``contentBlockDelta`` text frames of about 140
bytes each, ``contentBlockStop``, ``messageStop``, ``metadata``) is served by
``dsh_llm.testing.LoopbackServer`` in a child process, once chunked with one
HTTP chunk per frame and once close-delimited. Each client streams it whole and
counts text deltas:

- ``raw floor``: a plain socket, ``recv``, chunk framing stripped, each frame cut
  by its prelude's length, both CRC32s checked, its headers read for
  ``:event-type``, ``json.loads`` of its payload; nothing else.
- ``BedrockAdapter``: ``adapter.stream(options)`` to the last chunk (a Bedrock
  API key, so no signing: a signature is per request, not per event).

Clients run in interleaved rounds; the best of ``--repeat`` rounds is kept
(wall clock, and this process's CPU time, which a loaded machine disturbs less).
Target (issue 28): at most 2x the raw floor per event.
"""

from __future__ import annotations

import json
import socket
import struct
import zlib

from _harness import FLOOR
from _harness import Client
from _harness import Clients
from _harness import Row
from _harness import arguments
from _harness import both_kinds
from _harness import print_throughput
from _harness import text_deltas
from _harness import throughput
from _harness import version_line

from dsh_llm.adapters.bedrock import PROVIDER_ROUTE
from dsh_llm.adapters.bedrock import BedrockAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Reply

MODEL = "m"
PATH = "/model/m/converse-stream"
READ_SIZE = 65536


# --- the server process -----------------------------------------------------------


def _frame(event_type: str, payload: dict[str, object]) -> bytes:
    headers = b""
    for name, value in (
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07"
        headers += struct.pack(">H", len(raw)) + raw
    body = json.dumps(payload, separators=(",", ":")).encode()
    prelude = struct.pack(">II", 16 + len(headers) + len(body), len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


def bedrock_events(count: int) -> list[bytes]:
    """A ConverseStream body of ``count`` text deltas, one frame per value."""
    frames = [_frame("messageStart", {"role": "assistant"})]
    frames += [
        _frame(
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"text": f" tok{i % 1000}"}, "p": "abcd"},
        )
        for i in range(count)
    ]
    frames.append(_frame("contentBlockStop", {"contentBlockIndex": 0}))
    frames.append(_frame("messageStop", {"stopReason": "end_turn"}))
    frames.append(
        _frame(
            "metadata",
            {
                "usage": {"inputTokens": 20, "outputTokens": count, "totalTokens": 20},
                "metrics": {"latencyMs": 900},
            },
        )
    )
    return frames


def _replies(count: int) -> dict[str, Reply]:
    replies = both_kinds(PATH, bedrock_events(count))
    return {
        path: Reply(
            body=reply.body,
            framing=reply.framing,
            headers={"content-type": "application/vnd.amazon.eventstream"},
        )
        for path, reply in replies.items()
    }


# --- clients ----------------------------------------------------------------------


def _frames(body: bytearray, out: list[tuple[str, bytes]]) -> int:
    """Cut the complete frames off ``body`` into ``out``; the bytes used."""
    pos = 0
    size = len(body)
    crc32 = zlib.crc32
    while size - pos >= 12:
        total, headers = struct.unpack_from(">II", body, pos)
        if size - pos < total:
            break
        view = memoryview(body)[pos : pos + total]
        if crc32(view[:8]) != struct.unpack_from(">I", view, 8)[0]:
            raise ValueError("prelude CRC")
        if crc32(view[:-4]) != struct.unpack_from(">I", view, total - 4)[0]:
            raise ValueError("message CRC")
        event_type = ""
        at = 12
        end = 12 + headers
        while at < end:
            length = view[at]
            name = bytes(view[at + 1 : at + 1 + length])
            at += 2 + length
            size_of = struct.unpack_from(">H", view, at)[0]
            if name == b":event-type":
                event_type = str(view[at + 2 : at + 2 + size_of], "utf-8")
            at += 2 + size_of
        out.append((event_type, bytes(view[end : total - 4])))
        view.release()
        pos += total
    return pos


def _raw_floor(port: int, path: str) -> int:
    deltas = 0
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
        body = bytearray()
        while True:
            if chunked:
                pos = 0
                while True:
                    line_end = raw.find(b"\r\n", pos)
                    if line_end < 0:
                        break
                    size = int(raw[pos:line_end], 16)
                    if len(raw) < line_end + 4 + size:
                        break
                    body += raw[line_end + 2 : line_end + 2 + size]
                    pos = line_end + 4 + size
                del raw[:pos]
            else:
                body += raw
                raw.clear()
            frames: list[tuple[str, bytes]] = []
            del body[: _frames(body, frames)]
            for event_type, payload in frames:
                value = json.loads(payload)
                if event_type == "metadata":
                    return deltas
                if event_type == "contentBlockDelta" and value["delta"]["text"]:
                    deltas += 1
            piece = sock.recv(READ_SIZE)
            if not piece:
                return deltas
            raw += piece


def _adapter_client(base: str) -> Client:
    adapter = BedrockAdapter("ABSK-bench-key", base_url=base, region="us-east-1")
    options = GenerateOptions(
        provider=PROVIDER_ROUTE, model=MODEL, messages=(create_user_message("hi"),)
    )
    return text_deltas(adapter.stream, options)


def _clients(port: int, kind: str) -> Clients:
    base = f"http://127.0.0.1:{port}/{kind}"
    return [
        (FLOOR, lambda: _raw_floor(port, f"/{kind}{PATH}")),
        ("BedrockAdapter", _adapter_client(base)),
    ]


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], 50_000, 5, argv)
    version_line(args.events, args.repeat)
    rows = throughput(args.events, args.repeat, _replies, _clients)

    def cpu(row: Row, floor: Row) -> str:
        used = row.timing.cpu
        return f" {used / args.events * 1e6:>7.2f} {used / floor.timing.cpu:>11.2f}"

    print_throughput(args.events, rows, [("body", 9)], ("  cpu µs cpu x floor", cpu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
