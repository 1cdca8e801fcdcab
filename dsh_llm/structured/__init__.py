"""Structured output: reading a JSON answer, whole or while it streams.

- ``parse_json(response, schema=None)``: the final text as a JSON value,
  checked against a schema (a documented subset), or read into a type (a
  pydantic model, a dataclass, a ``TypedDict``...), or ``INVALID_JSON_OUTPUT``
  with the path of the first mismatch; ``reply.parsed(City)`` is the same.
- ``read_as(tp, value)``: an already parsed value read into a type.
- ``json_schema_of(tp)``: the JSON Schema a type defines (what
  ``GenerateOptions(response_format=City)`` sends).
- ``PartialJson``: feed text or tool-argument deltas, read the best-effort
  value so far (never final too early).
- ``check_schema``: the subset validator itself.

Ask for JSON with ``GenerateOptions(response_format=...)`` (see
``docs/structured-output.md`` for what each provider does with it). The
package is pure (no I/O): it sits in the contract layer, beside the assembler.
"""

from __future__ import annotations

from dsh_llm.protocol.pytypes import json_schema_of
from dsh_llm.structured.parse import parse_json
from dsh_llm.structured.parse import read_as
from dsh_llm.structured.partial import PartialJson
from dsh_llm.structured.schema import SUPPORTED_KEYWORDS
from dsh_llm.structured.schema import check_schema

__all__ = [
    "SUPPORTED_KEYWORDS",
    "PartialJson",
    "check_schema",
    "json_schema_of",
    "parse_json",
    "read_as",
]
