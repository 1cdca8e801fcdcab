"""The JSON Schema the adapters' structured-output tests ask for."""

from __future__ import annotations

from typing import Any

CITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
"""A strict-mode-ready schema: every property required, no others allowed."""
