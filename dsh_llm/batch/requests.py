"""Batch request lines: one JSON object per line, read into ``GenerateOptions``.

This module owns the request line format. Contracts callers may rely on:

- A line is ``{"id", "provider", "model", "messages" | "prompt", "system"?,
  "max_tokens"?, "temperature"?, "reasoning_effort"?, "stop"?, "tools"?,
  "tool_choice"?}``. ``id`` is a non-empty string or an integer, kept as given;
  ``messages`` is a list of protocol messages (``dsh_llm.serde`` JSON) and
  ``prompt`` a string sent as one user message; exactly one of the two.
  ``tools`` holds ``{"name", "description", "parameters"}`` objects.
- ``parse_request_line`` never raises for bad input: a line that is not UTF-8
  JSON, not an object, or has an unknown, missing or ill-typed key gives a
  ``RequestLineError`` whose failure has code ``INVALID_BATCH_REQUEST`` and a
  message naming the line number and the key (``line 7: $.messages[0].role ...``).
- ``read_requests`` yields one item per non-blank line, numbered from 1 as in
  the file, lazily; blank lines are skipped.
- ``id_key`` is the identity resume and duplicate checks compare: ``1`` and
  ``"1"`` are different ids.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs

from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import (
    GenerateOptions,
    LlmFailure,
    Message,
    ToolSchema,
    create_user_message,
)
from dsh_llm.serde import compact_json, message_from_dict
from dsh_llm.structure import value_kind

__all__ = [
    "REQUEST_KEYS",
    "BatchRequest",
    "RequestId",
    "RequestLineError",
    "id_key",
    "parse_request_line",
    "parse_request_object",
    "peek_id",
    "read_requests",
    "request_lines",
]

RequestId = str | int
"""A request's id as written in its line."""

REQUEST_KEYS: Final = frozenset(
    {
        "id",
        "provider",
        "model",
        "messages",
        "prompt",
        "system",
        "max_tokens",
        "temperature",
        "reasoning_effort",
        "stop",
        "tools",
        "tool_choice",
    }
)
"""The keys a request line may hold."""

_TOOL_KEYS: Final = frozenset({"name", "description", "parameters"})


@attrs.frozen(kw_only=True)
class BatchRequest:
    """One valid request line."""

    id: RequestId
    """The line's ``id``."""
    line: int
    """Where the line is in the requests file (from 1)."""
    options: GenerateOptions
    """The request, without a signal (the runner adds its own)."""


@attrs.frozen(kw_only=True)
class RequestLineError:
    """A request line that cannot be sent; it becomes a failed result."""

    id: RequestId | None
    """The line's ``id`` when it had a usable one, else ``None``."""
    line: int
    """Where the line is in the requests file (from 1)."""
    failure: LlmFailure
    """Code ``INVALID_BATCH_REQUEST``; the message names the line and the key."""


def id_key(request_id: RequestId) -> str:
    """The identity of ``request_id`` for resume and duplicate checks."""
    return compact_json(request_id)


class _Bad(Exception):
    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{key} {detail}")


def _failure(line: int, detail: str) -> LlmFailure:
    return LlmFailure(
        message=f"line {line}: {detail}", code=ErrorCode.INVALID_BATCH_REQUEST.value
    )


def _request_id(data: Mapping[str, Any]) -> RequestId | None:
    value = data.get("id")
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, str) and value != ""):
        return value
    return None


def peek_id(text: str | bytes) -> RequestId | None:
    """The id ``parse_request_line`` would give the line, read without building
    the request (for counting what a results file already holds)."""
    try:
        data = json.loads(text)
    except ValueError:  # UnicodeDecodeError included
        return None
    return _request_id(data) if isinstance(data, dict) else None


def parse_request_line(text: str | bytes, line: int) -> BatchRequest | RequestLineError:
    """Read one request line (JSON text, UTF-8 when bytes); never raises for bad
    input (see the module docstring)."""
    try:
        if isinstance(text, bytes | bytearray):
            text = bytes(text).decode("utf-8")
        data = json.loads(text)
    except UnicodeDecodeError:
        return RequestLineError(
            id=None, line=line, failure=_failure(line, "$ is not UTF-8")
        )
    except ValueError as exc:
        return RequestLineError(
            id=None, line=line, failure=_failure(line, f"$ is not JSON: {exc}")
        )
    return parse_request_object(data, line)


def parse_request_object(data: object, line: int) -> BatchRequest | RequestLineError:
    """Read one request from its decoded JSON value; never raises for bad input."""
    if not isinstance(data, dict):
        return RequestLineError(
            id=None,
            line=line,
            failure=_failure(line, f"$ must be a mapping, got {value_kind(data)}"),
        )
    request_id = _request_id(data)
    try:
        if request_id is None:
            raise _Bad("$.id", "must be a non-empty string or an integer")
        options = _options(data)
    except _Bad as exc:
        return RequestLineError(
            id=request_id, line=line, failure=_failure(line, str(exc))
        )
    return BatchRequest(id=request_id, line=line, options=options)


def _string(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Bad(f"$.{key}", f"must be a string, got {value_kind(value)}")
    return value


def _required(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or value == "":
        if key not in data:
            raise _Bad(f"$.{key}", "is required")
        raise _Bad(f"$.{key}", f"must be a non-empty string, got {value_kind(value)}")
    return value


def _messages(data: Mapping[str, Any]) -> tuple[Message, ...]:
    has_messages = data.get("messages") is not None
    has_prompt = data.get("prompt") is not None
    if has_messages == has_prompt:
        raise _Bad("$.messages", 'or "prompt" is required (exactly one of them)')
    if has_prompt:
        prompt = _string(data, "prompt")
        assert prompt is not None
        return (create_user_message(prompt),)
    raw = data["messages"]
    if not isinstance(raw, list) or not raw:
        raise _Bad("$.messages", f"must be a non-empty list, got {value_kind(raw)}")
    messages = []
    for position, item in enumerate(raw):
        if not isinstance(item, dict):
            raise _Bad(
                f"$.messages[{position}]", f"must be a mapping, got {value_kind(item)}"
            )
        try:
            messages.append(message_from_dict(item))
        except LlmError as exc:
            # serde says "invalid message: $.content[0].text: must be ...", the
            # path from the message's root.
            text = exc.message
            path, _, detail = text[text.find("$") :].partition(": ")
            key = f"$.messages[{position}]{path[1:]}"
            raise _Bad(key, detail or text) from None
    return tuple(messages)


def _tools(data: Mapping[str, Any]) -> tuple[ToolSchema, ...] | None:
    raw = data.get("tools")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise _Bad("$.tools", f"must be a list, got {value_kind(raw)}")
    tools = []
    for position, item in enumerate(raw):
        where = f"$.tools[{position}]"
        if not isinstance(item, dict):
            raise _Bad(where, f"must be a mapping, got {value_kind(item)}")
        for key in item:
            if key not in _TOOL_KEYS:
                raise _Bad(f"{where}.{key}", "is not a tool key")
        try:
            tools.append(
                ToolSchema(
                    name=item.get("name", ""),
                    description=item.get("description", ""),
                    parameters=item.get("parameters", {"type": "object"}),
                )
            )
        except (TypeError, ValueError) as exc:
            field = str(exc).partition(" ")[0].rpartition(".")[2]
            key = f"{where}.{field}" if field in _TOOL_KEYS else where
            raise _Bad(key, _detail(exc)) from None
    return tuple(tools)


def _number(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(f"$.{key}", f"must be a number, got {value_kind(value)}")
    return value


def _positive_int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _Bad(f"$.{key}", "must be a positive integer")
    return value


def _stop(data: Mapping[str, Any]) -> tuple[str, ...] | None:
    value = data.get("stop")
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(
        isinstance(item, str) and item for item in value
    ):
        raise _Bad("$.stop", "must be a non-empty string or a list of them")
    return tuple(value)


def _detail(exc: Exception) -> str:
    """A value class's message without its ``Class.field`` prefix."""
    head, _, rest = str(exc).partition(" ")
    return rest if rest and "." in head else str(exc)


def _options(data: Mapping[str, Any]) -> GenerateOptions:
    for key in data:
        if key not in REQUEST_KEYS:
            raise _Bad(f"$.{key}", "is not a request key")
    provider = _required(data, "provider")
    model = _required(data, "model")
    fields: dict[str, Any] = {
        "system": _string(data, "system"),
        "reasoning_effort": _string(data, "reasoning_effort"),
        "tool_choice": _string(data, "tool_choice"),
        "temperature": _number(data, "temperature"),
        "max_tokens": _positive_int(data, "max_tokens"),
        "stop": _stop(data),
        "tools": _tools(data),
    }
    messages = _messages(data)
    try:
        return GenerateOptions(
            provider=provider, model=model, messages=messages, **fields
        )
    except (TypeError, ValueError) as exc:
        # The value classes name the field: "GenerateOptions.temperature ...".
        field = str(exc).partition(" ")[0].rpartition(".")[2]
        key = f"$.{field}" if field in REQUEST_KEYS else "$"
        raise _Bad(key, _detail(exc)) from None


def request_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """Every non-blank line of ``path`` as bytes, with its number from 1 (a UTF-8
    byte order mark at the start is dropped).

    Raises:
        OSError: when the file cannot be opened or read.
    """
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if raw.strip():
                yield number, raw


def read_requests(
    path: str | os.PathLike[str],
) -> Iterator[BatchRequest | RequestLineError]:
    """Every non-blank line of ``path``, parsed, with its number from 1.

    Raises:
        OSError: when the file cannot be opened or read.
    """
    for number, raw in request_lines(path):
        yield parse_request_line(raw, number)
