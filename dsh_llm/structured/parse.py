"""``parse_json``: the final text of a structured answer as a JSON value, or as
an instance of the caller's type.

Contracts callers may rely on:

- The text is the response's text blocks joined (anything with a ``text``
  string: what ``collect`` returns, a ``Message``, a ``ToolLoopResult``) or the
  string given; leading and trailing whitespace is ignored, and one Markdown
  code fence around the whole text (```` ```json ... ``` ````, which models
  without a JSON mode like to add) is unwrapped. Nothing else is repaired.
- Text that is not one JSON document raises ``LlmError`` with code
  ``INVALID_JSON_OUTPUT`` naming the line and column.
- With a schema (a JSON Schema mapping or a ``ResponseFormat``), the value is
  checked against the subset of ``dsh_llm.structured.schema``; the first
  problems are named in the ``INVALID_JSON_OUTPUT`` message.
- With a type (a pydantic model, a dataclass, a ``TypedDict``, or any
  annotation ``dsh_llm.protocol.pytypes`` reads, such as ``list[City]``), the
  value is read into it and that instance is returned; a value that does not
  fit raises ``INVALID_JSON_OUTPUT`` naming the type and the path of the first
  mismatch (``the answer does not fit City: $.population: must be integer, got
  string``).
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import TypeVar
from typing import overload

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol.pytypes import ValueMismatch
from dsh_llm.protocol.pytypes import from_json
from dsh_llm.protocol.pytypes import type_label
from dsh_llm.structured.schema import check_schema

__all__ = ["parse_json", "read_as"]

_FENCE: Final = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)\r?\n?```\Z", re.S)
_SHOWN_PROBLEMS: Final = 3

T = TypeVar("T")


def _text(response: object) -> str:
    if isinstance(response, str):
        return response
    text = getattr(response, "text", None)
    if isinstance(text, str):
        return text
    raise TypeError(
        "parse_json needs an AssembledResponse, a Message or a str, got "
        f"{type(response).__name__}"
    )


def _is_type(schema: object) -> bool:
    return isinstance(schema, type) or typing.get_origin(schema) is not None


def read_as(tp: type[T] | Any, value: Any) -> T:
    """``value`` (parsed JSON) read into ``tp``, as ``parse_json`` does.

    Raises:
        LlmError: ``INVALID_JSON_OUTPUT`` naming the type and the path of the
            first mismatch.
    """
    try:
        result: T = from_json(tp, value)
    except ValueMismatch as exc:
        raise LlmError(
            f"the answer does not fit {type_label(tp)}: {exc}",
            ErrorCode.INVALID_JSON_OUTPUT,
        ) from None
    return result


@overload
def parse_json(response: object, schema: type[T]) -> T: ...


@overload
def parse_json(
    response: object, schema: Mapping[str, Any] | ResponseFormat | None = None
) -> Any: ...


def parse_json(
    response: object,
    schema: Mapping[str, Any] | ResponseFormat | type[T] | Any | None = None,
) -> Any:
    """The JSON value of ``response``'s final text, or the instance of the type
    ``schema`` names (see the module docstring).

    Args:
        response: What ``collect`` returned, a message, or the text itself.
        schema: A JSON Schema (mapping or ``ResponseFormat``) to check the value
            against, a type to read it into, or ``None``.

    Raises:
        LlmError: ``INVALID_JSON_OUTPUT`` when the text is not JSON or the value
            does not match ``schema``.
        TypeError: for a ``response`` without text, or a ``schema`` that is
            neither a schema nor a type (or a type that cannot be read).
    """
    if schema is not None and not (
        isinstance(schema, Mapping | ResponseFormat) or _is_type(schema)
    ):
        raise TypeError(
            "parse_json's schema must be a JSON Schema mapping, a ResponseFormat "
            f"or a type, got {type(schema).__name__}"
        )
    text = _text(response).strip()
    fenced = _FENCE.match(text)
    if fenced is not None:
        text = fenced.group(1).strip()
    if not text:
        raise LlmError("the answer is empty, not JSON", ErrorCode.INVALID_JSON_OUTPUT)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LlmError(
            f"the answer is not JSON: {exc.msg} at line {exc.lineno} column "
            f"{exc.colno}",
            ErrorCode.INVALID_JSON_OUTPUT,
        ) from None
    if schema is None:
        return value
    if not isinstance(schema, Mapping | ResponseFormat):
        return read_as(schema, value)
    wanted = schema.schema if isinstance(schema, ResponseFormat) else schema
    problems = check_schema(value, wanted)
    if problems:
        more = len(problems) - _SHOWN_PROBLEMS
        tail = f" (and {more} more)" if more > 0 else ""
        raise LlmError(
            "the answer does not match its schema: "
            + "; ".join(problems[:_SHOWN_PROBLEMS])
            + tail,
            ErrorCode.INVALID_JSON_OUTPUT,
        )
    return value
