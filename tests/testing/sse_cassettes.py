"""The hand-written ``.sse`` fixtures as cassettes: how the files under
``tests/fixtures/cassettes/{deepseek,openai_compat}`` were made, and what keeps
them in step with their ``.sse`` (run this module to rewrite them)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Final

from dsh_llm.testing.cassette import BodyRead
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.cassette import CassetteRequest
from dsh_llm.testing.cassette import CassetteResponse

FIXTURES: Final = Path(__file__).resolve().parent.parent / "fixtures"
CASSETTES: Final = FIXTURES / "cassettes"

CONVERTED: Final = {
    "deepseek": (
        "thinking_text",
        "tool_calls",
        "max_tokens",
        "in_stream_error",
        "usage_zeros_then_trailing",
        "crlf_done_without_blank_line",
    ),
    "openai_compat": (
        "openai_parallel_tool_calls",
        "openai_length",
        "llamacpp_repeated_id_and_name",
        "openrouter_processing_comments",
        "ollama_v1_reasoning_and_whole_calls",
        "vllm_bare_done",
    ),
}
"""The fixtures converted, per family."""

_ROOTS: Final = {
    "deepseek": ("https://api.deepseek.com", "", "deepseek-v4-flash"),
    "openai_compat": ("http://127.0.0.1:8080", "/v1", "local-model"),
}
_ADAPTERS: Final = {
    "deepseek": "dsh_llm.adapters.deepseek:DeepSeekAdapter",
    "openai_compat": "dsh_llm.adapters.openai_compat:OpenAICompatAdapter",
}
_EVENT_END: Final = re.compile(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)")
# Synthetic arrival times: the head after 40 ms, then one event every 15 ms.
_HEAD_MS: Final = 40.0
_STEP_MS: Final = 15.0


def events_of(body: bytes) -> list[bytes]:
    """``body`` cut after each blank line (the last piece may lack one)."""
    pieces, start = [], 0
    for match in _EVENT_END.finditer(body):
        pieces.append(body[start : match.end()])
        start = match.end()
    if start < len(body):
        pieces.append(body[start:])
    return pieces


def cassette_for(family: str, name: str) -> Cassette:
    """The cassette of fixture ``<family>/<name>.sse``: one read per event."""
    origin, base_path, model = _ROOTS[family]
    body = (FIXTURES / family / f"{name}.sse").read_bytes()
    request_body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        separators=(",", ":"),
    ).encode()
    headers = [("content-type", "application/json"), ("accept", "text/event-stream")]
    if family == "deepseek":
        headers.append(("authorization", "***"))
    reads = [
        BodyRead(at_ms=_HEAD_MS + _STEP_MS * (i + 1), data=piece)
        for i, piece in enumerate(events_of(body))
    ]
    return Cassette(
        request=CassetteRequest(
            method="POST",
            url=f"{origin}{base_path}/chat/completions",
            headers=headers,
            body=request_body,
        ),
        response=CassetteResponse(
            status=200,
            headers=[("content-type", "text/event-stream; charset=utf-8")],
            at_ms=_HEAD_MS,
            framing="chunked",
            reads=reads,
            end_ms=reads[-1].at_ms + 1 if reads else _HEAD_MS,
        ),
        base_path=base_path,
        adapter=_ADAPTERS[family],
    )


def cassette_path(family: str, name: str) -> Path:
    """Where the converted cassette of ``<family>/<name>`` is committed."""
    return CASSETTES / family / f"{name}.jsonl"


if __name__ == "__main__":
    for family, names in CONVERTED.items():
        for name in names:
            cassette_for(family, name).dump(cassette_path(family, name))
