"""Batch request lines: one JSON object per line, read into ``GenerateOptions``.

This module owns the request line format. Contracts callers may rely on:

- A line is ``{"id", "provider", "model", "messages" | "prompt", "system"?,
  "max_tokens"?, "temperature"?, "reasoning_effort"?, "stop"?, "tools"?,
  "tool_choice"?}``. ``id`` is a non-empty string or an integer, kept as given;
  ``messages`` is a list of protocol messages (``dsh_llm.serde`` JSON) and
  ``prompt`` a string sent as one user message; exactly one of the two.
  ``tools`` holds ``{"name", "description", "parameters"}`` objects.
- The keys are read by the one config mechanism (``dsh_llm.config``), in its
  wording, and the messages by ``dsh_llm.serde``; every problem is read as data.
- ``parse_request_line`` never raises for bad input, however hostile: a line
  that is not UTF-8 JSON, is nested too deeply, is not an object, or has an
  unknown, missing or ill-typed key gives a ``RequestLineError`` whose failure
  has code ``INVALID_BATCH_REQUEST`` and a message naming the line number and
  the key (``line 7: $.messages[0].role ...``).
- ``read_requests`` yields one item per non-blank line, numbered from 1 as in
  the file, lazily; blank lines are skipped.
- ``id_key`` is the identity resume and duplicate checks compare: ``1`` and
  ``"1"`` are different ids.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import Final

import attrs

from dsh_llm.config import KEY_METADATA
from dsh_llm.config import ConfigError
from dsh_llm.config import check_non_empty_str
from dsh_llm.config import check_positive_int
from dsh_llm.config import field_error
from dsh_llm.config import structure_config
from dsh_llm.config import value_kind
from dsh_llm.errors import ErrorCode
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_user_message
from dsh_llm.protocol.checks import FieldError
from dsh_llm.serde import InvalidValueError
from dsh_llm.serde import compact_json
from dsh_llm.serde import message_from_dict
from dsh_llm.signal import AbortSignal

__all__ = [
    "REQUEST_KEYS",
    "BatchRequest",
    "RequestId",
    "RequestLineError",
    "decode_request_line",
    "id_key",
    "parse_request_line",
    "parse_request_object",
    "peek_id",
    "read_requests",
    "request_id_of",
    "request_lines",
]

RequestId = str | int
"""A request's id as written in its line."""


@attrs.frozen(kw_only=True)
class BatchRequest:
    """One valid request line."""

    id: RequestId
    """The line's ``id``."""
    line: int
    """Where the line is in the requests file (from 1)."""
    options: GenerateOptions
    """The request, with the signal the line was read with (the runner's own),
    if any."""


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
    if type(request_id) is int:
        return str(request_id)  # what compact_json writes, without its cost
    return compact_json(request_id)


# --- the line as the config mechanism reads it ------------------------------------


def _exact(key: str) -> dict[str, str]:
    # Request lines spell their keys in snake_case (``max_tokens``), as written.
    return {KEY_METADATA: key}


def _check_id(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value == "":
        raise field_error(inst, attribute.name, "must be a non-empty string")


def _check_messages(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not value:
        raise field_error(inst, attribute.name, "must be a non-empty list")


def _check_max_tokens(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    if value is not None:
        check_positive_int(inst, attribute, value)


def _check_stop(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    items = (value,) if isinstance(value, str) else value
    if items is not None and (not items or "" in items):
        raise field_error(
            inst, attribute.name, "must be a non-empty string or a list of them"
        )


@attrs.frozen(kw_only=True)
class _ToolLine:
    """One ``tools`` entry: ``{"name", "description"?, "parameters"?}``."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = attrs.field(factory=lambda: {"type": "object"})


@attrs.frozen(kw_only=True)
class _Line:
    """A request line as written (see the module docstring), read by
    ``dsh_llm.config.structure_config``; the protocol's own rules (messages,
    tools, sampling) are checked when the request is built from it."""

    id: str | int = attrs.field(validator=_check_id)
    provider: str = attrs.field(validator=check_non_empty_str)
    model: str = attrs.field(validator=check_non_empty_str)
    messages: tuple[dict[str, Any], ...] | None = attrs.field(
        default=None, validator=_check_messages
    )
    prompt: str | None = None
    system: str | None = None
    max_tokens: int | None = attrs.field(
        default=None, validator=_check_max_tokens, metadata=_exact("max_tokens")
    )
    temperature: float | None = None
    reasoning_effort: str | None = attrs.field(
        default=None, metadata=_exact("reasoning_effort")
    )
    stop: str | tuple[str, ...] | None = attrs.field(
        default=None, validator=_check_stop
    )
    tools: tuple[_ToolLine, ...] | None = None
    tool_choice: str | None = attrs.field(default=None, metadata=_exact("tool_choice"))

    def __attrs_post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise field_error(
                self, "messages", 'or "prompt" is required (exactly one of them)'
            )


REQUEST_KEYS: Final = frozenset(
    field.metadata.get(KEY_METADATA, field.name) for field in attrs.fields(_Line)
)
"""The keys a request line may hold."""
_TOOL_KEYS: Final = frozenset(field.name for field in attrs.fields(_ToolLine))


# --- reading ------------------------------------------------------------------------


class _Bad(Exception):
    """A key of the line is wrong: ``key`` (``$.tools[0].name``) and what."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(key, detail)
        self.key = key
        self.detail = detail


def _failure(line: int, detail: str) -> LlmFailure:
    return LlmFailure(
        message=f"line {line}: {detail}", code=ErrorCode.INVALID_BATCH_REQUEST.value
    )


def _bad_line(request_id: RequestId | None, line: int, detail: str) -> RequestLineError:
    return RequestLineError(id=request_id, line=line, failure=_failure(line, detail))


def request_id_of(data: object) -> RequestId | None:
    """The usable id of a decoded request line (a non-empty string or an
    integer), ``None`` when it has none."""
    if not isinstance(data, dict):
        return None
    value = data.get("id")
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, str) and value != ""):
        return value
    return None


def peek_id(text: str | bytes) -> RequestId | None:
    """The id ``parse_request_line`` would give the line, read without building
    the request (for counting what a results file already holds); ``None`` for
    a line that cannot be read, however hostile."""
    try:
        return request_id_of(json.loads(text))
    except (ValueError, RecursionError):  # UnicodeDecodeError included
        return None


def decode_request_line(text: str | bytes, line: int) -> Any:
    """The JSON value of one request line (UTF-8 when bytes), or the
    ``RequestLineError`` of a line that is not JSON; never raises, however
    hostile the line (``parse_request_line`` is this, then
    ``parse_request_object``)."""
    try:
        if isinstance(text, bytes | bytearray):
            text = bytes(text).decode("utf-8")
        return json.loads(text)
    except UnicodeDecodeError:
        return _bad_line(None, line, "$ is not UTF-8")
    except json.JSONDecodeError as exc:
        return _bad_line(None, line, f"$ is not JSON: {exc}")
    except ValueError as exc:  # a number beyond the interpreter's digit limit
        return _bad_line(None, line, f"$ cannot be read: {exc}")
    except RecursionError:
        return _bad_line(None, line, "$ is nested too deeply")


def parse_request_line(
    text: str | bytes, line: int, *, signal: AbortSignal | None = None
) -> BatchRequest | RequestLineError:
    """Read one request line (JSON text, UTF-8 when bytes); never raises for bad
    input, however hostile (see the module docstring). ``signal`` is put in the
    request's options."""
    data = decode_request_line(text, line)
    if isinstance(data, RequestLineError):
        return data
    return parse_request_object(data, line, signal=signal)


def parse_request_object(
    data: object, line: int, *, signal: AbortSignal | None = None
) -> BatchRequest | RequestLineError:
    """Read one request from its decoded JSON value; never raises for bad input,
    however hostile: what reading it raises is the line's failure. ``signal``
    is put in the request's options."""
    request_id = request_id_of(data)
    try:
        options = _options(data, signal)
    except _Bad as exc:
        return _bad_line(request_id, line, f"{exc.key} {exc.detail}")
    except RecursionError:
        return _bad_line(request_id, line, "$ is nested too deeply")
    except Exception as exc:  # any other failure of a hostile value: one bad row
        return _bad_line(request_id, line, f"$ cannot be read ({type(exc).__name__})")
    assert request_id is not None  # _Line checked it
    return BatchRequest(id=request_id, line=line, options=options)


def _at(key: str) -> str:
    """The JSON path of a config key path (``tools[0].name``: ``$.tools[0].name``)."""
    return f"$.{key}" if key else "$"


def _read(data: Mapping[str, Any]) -> _Line:
    try:
        parsed: _Line = structure_config(_Line, data)
    except ConfigError as exc:
        key, detail = exc.problems[0] if exc.problems else ("", "is invalid")
        raise _Bad(_at(key), detail) from None
    return parsed


def _messages(line: _Line) -> tuple[Message, ...]:
    if line.prompt is not None:
        return (create_user_message(line.prompt),)
    assert line.messages is not None
    messages = []
    for position, item in enumerate(line.messages):
        try:
            messages.append(message_from_dict(item))
        except InvalidValueError as exc:
            # The problem's path is from the message's root ("$.content[0]").
            path, detail = exc.problems[0]
            raise _Bad(f"$.messages[{position}]{path[1:]}", detail) from None
    return tuple(messages)


def _tools(line: _Line) -> tuple[ToolSchema, ...] | None:
    if line.tools is None:
        return None
    tools = []
    for position, item in enumerate(line.tools):
        try:
            tools.append(
                ToolSchema(
                    name=item.name,
                    description=item.description,
                    parameters=item.parameters,
                )
            )
        except FieldError as exc:
            where = f"$.tools[{position}]"
            key = f"{where}.{exc.field}" if exc.field in _TOOL_KEYS else where
            raise _Bad(key, exc.detail) from None
    return tuple(tools)


def _options(data: object, signal: AbortSignal | None) -> GenerateOptions:
    if not isinstance(data, Mapping):
        # structure_config takes None for an empty mapping; a line never is one.
        raise _Bad("$", f"must be a mapping, got {value_kind(data)}")
    line = _read(data)
    stop = line.stop
    try:
        return GenerateOptions(
            provider=line.provider,
            model=line.model,
            messages=_messages(line),
            system=line.system,
            reasoning_effort=line.reasoning_effort,
            tool_choice=line.tool_choice,
            temperature=line.temperature,
            max_tokens=line.max_tokens,
            stop=(stop,) if isinstance(stop, str) else stop,
            tools=_tools(line),
            signal=signal,
        )
    except FieldError as exc:
        # The value classes name their field as data (``GenerateOptions.stop``).
        key = f"$.{exc.field}" if exc.field in REQUEST_KEYS else "$"
        raise _Bad(key, exc.detail) from None


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
    path: str | os.PathLike[str], *, signal: AbortSignal | None = None
) -> Iterator[BatchRequest | RequestLineError]:
    """Every non-blank line of ``path``, parsed (``signal`` put in each request),
    with its number from 1.

    Raises:
        OSError: when the file cannot be opened or read.
    """
    for number, raw in request_lines(path):
        yield parse_request_line(raw, number, signal=signal)
