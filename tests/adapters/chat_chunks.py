"""Builders for OpenAI-style chat-completion stream payloads (test helpers)."""

from __future__ import annotations

from typing import Any

from dsh_llm.assembler import BlockAssembler
from dsh_llm.protocol import StreamChunk
from dsh_llm.validator import validate_stream

_UNSET: Any = object()


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    usage: Any = _UNSET,
    *,
    index: int = 0,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with one choice."""
    payload: dict[str, Any] = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "deepseek-v4-flash",
        "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish}],
    }
    if usage is not _UNSET:
        payload["usage"] = usage
    return payload


FIRST = chunk({"role": "assistant", "content": None, "reasoning_content": ""})
"""The live first chunk: role, null content, EMPTY reasoning."""


def text(value: str) -> dict[str, Any]:
    return chunk({"content": value, "reasoning_content": None})


def reasoning(value: str) -> dict[str, Any]:
    return chunk({"content": None, "reasoning_content": value})


def tool(
    index: int | None,
    *,
    id: str | None = None,
    name: str | None = None,
    args: Any = None,
    function: bool = True,
) -> dict[str, Any]:
    call: dict[str, Any] = {}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    if function:
        fn: dict[str, Any] = {}
        if name is not None:
            fn["name"] = name
        if args is not None:
            fn["arguments"] = args
        call["function"] = fn
    return chunk({"tool_calls": [call]})


def finish(reason: str | None = "stop", usage: Any = _UNSET) -> dict[str, Any]:
    return chunk({"content": ""}, reason, usage)


def usage(prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, **extra}


def only_usage(value: dict[str, Any]) -> dict[str, Any]:
    return {"id": "c1", "choices": [], "usage": value}


def valid(chunks: list[StreamChunk]) -> list[StreamChunk]:
    """``chunks`` after strict validation (raises ``INVARIANT`` on a violation)."""
    return list(validate_stream(chunks, strict=True))


def assemble(chunks: list[StreamChunk]) -> BlockAssembler:
    assembler = BlockAssembler()
    for item in valid(chunks):
        assembler.push(item)
    return assembler
