"""``parse_json``: the final text of a structured answer as a JSON value.

Contracts callers may rely on:

- The text is the response's text blocks joined (or the string given); leading
  and trailing whitespace is ignored, and one Markdown code fence around the
  whole text (```` ```json ... ``` ````, which models without a JSON mode like
  to add) is unwrapped. Nothing else is repaired.
- Text that is not one JSON document raises ``LlmError`` with code
  ``INVALID_JSON_OUTPUT`` naming the line and column.
- With a schema (a JSON Schema mapping or a ``ResponseFormat``), the value is
  checked against the subset of ``dsh_llm.structured.schema``; the first
  problems are named in the ``INVALID_JSON_OUTPUT`` message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from dsh_llm.assembler import AssembledResponse
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import Message, ResponseFormat
from dsh_llm.structured.schema import check_schema

__all__ = ["parse_json"]

_FENCE: Final = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)\r?\n?```\Z", re.S)
_SHOWN_PROBLEMS: Final = 3


def _text(response: AssembledResponse | Message | str) -> str:
    if isinstance(response, str):
        return response
    if isinstance(response, AssembledResponse | Message):
        return response.text
    raise TypeError(
        "parse_json needs an AssembledResponse, a Message or a str, got "
        f"{type(response).__name__}"
    )


def parse_json(
    response: AssembledResponse | Message | str,
    schema: Mapping[str, Any] | ResponseFormat | None = None,
) -> Any:
    """The JSON value of ``response``'s final text (see the module docstring).

    Args:
        response: What ``collect`` returned, a message, or the text itself.
        schema: The schema to check the value against, or ``None``.

    Raises:
        LlmError: ``INVALID_JSON_OUTPUT`` when the text is not JSON or the value
            does not match ``schema``.
        TypeError: for a ``response`` of another type.
    """
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
    if schema is not None:
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
