"""Structured output: reading a JSON answer, whole or while it streams.

- ``parse_json(response, schema=None)``: the final text as a JSON value,
  checked against a schema (a documented subset), or ``INVALID_JSON_OUTPUT``.
- ``PartialJson``: feed text or tool-argument deltas, read the best-effort
  value so far (never final too early).
- ``check_schema``: the subset validator itself.

Ask for JSON with ``GenerateOptions(response_format=...)`` (see
``docs/structured-output.md`` for what each provider does with it).
"""

from __future__ import annotations

from dsh_llm.structured.parse import parse_json
from dsh_llm.structured.partial import PartialJson
from dsh_llm.structured.schema import SUPPORTED_KEYWORDS, check_schema

__all__ = ["SUPPORTED_KEYWORDS", "PartialJson", "check_schema", "parse_json"]
