"""The provider-shaped streams that more than one benchmark sends or decodes.

- ``anthropic_events(count, model)``: a Messages stream of one text block of
  ``count`` ``text_delta`` events (about 130 bytes each, a ``ping`` every 100),
  ``message_delta`` and ``message_stop``; one ``bytes`` value per SSE event.
- ``gemini_events(count, model)``: ``count`` SSE events with CRLF framing, one
  text part and the running ``usageMetadata`` each, ``STOP`` on the last.
- ``ollama_events(count, model)``: ``count`` NDJSON lines of one content
  increment each, then the ``done: true`` line with its counts.
- ``cut(body, size)``: a body as the reads of ``size`` bytes a socket would give.

The HTTP benchmarks serve the events one HTTP chunk each; the translator
benchmarks join them and decode them in memory.
"""

from __future__ import annotations

import json
from typing import Any


def _anthropic_event(name: str, payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"))
    return f"event: {name}\ndata: {data}\n\n".encode()


def anthropic_events(count: int, model: str) -> list[bytes]:
    """A Messages stream of ``count`` text deltas, one SSE event per value."""
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_01Bench",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 20,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 1,
            },
        },
    }
    events = [
        _anthropic_event("message_start", start),
        _anthropic_event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    for i in range(count):
        if i % 100 == 99:
            events.append(b'event: ping\ndata: {"type": "ping"}\n\n')
        events.append(
            _anthropic_event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": f" tok{i % 1000}"},
                },
            )
        )
    events.append(
        _anthropic_event(
            "content_block_stop", {"type": "content_block_stop", "index": 0}
        )
    )
    events.append(
        _anthropic_event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": count},
            },
        )
    )
    events.append(_anthropic_event("message_stop", {"type": "message_stop"}))
    return events


def gemini_events(count: int, model: str) -> list[bytes]:
    """``count`` streamGenerateContent SSE events, one text part each."""
    events = []
    for i in range(count):
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": f" tok{i % 1000}"}], "role": "model"},
            "index": 0,
        }
        if i == count - 1:
            candidate["finishReason"] = "STOP"
        payload = {
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": 20,
                "candidatesTokenCount": i + 1,
                "totalTokenCount": 21 + i,
            },
            "modelVersion": model,
            "responseId": "Zb1taZ7nLNmOz7IPk6f9-Ag",
        }
        data = json.dumps(payload, separators=(",", ": ")).encode()
        events.append(b"data: " + data + b"\r\n\r\n")
    return events


def ollama_events(count: int, model: str) -> list[bytes]:
    """``count`` /api/chat NDJSON lines, then the ``done`` line."""
    lines = [
        json.dumps(
            {
                "model": model,
                "created_at": "2026-01-01T10:00:00.000000Z",
                "message": {"role": "assistant", "content": f" tok{i % 1000}"},
                "done": False,
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
        for i in range(count)
    ]
    done = json.dumps(ollama_done(count, model), separators=(",", ":"))
    lines.append(done.encode() + b"\n")
    return lines


def ollama_done(count: int, model: str) -> dict[str, Any]:
    """Ollama's last ``/api/chat`` line after ``count`` answer lines."""
    return {
        "model": model,
        "created_at": "2026-01-01T10:00:01Z",
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 20,
        "eval_count": count,
    }


def cut(body: bytes, size: int) -> list[bytes]:
    """``body`` in reads of ``size`` bytes (the last one may be shorter)."""
    return [body[at : at + size] for at in range(0, len(body), size)]
