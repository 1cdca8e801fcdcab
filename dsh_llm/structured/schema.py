"""A small JSON Schema validator: the subset structured output needs.

``check_schema(value, schema)`` returns the problems of ``value`` (empty when
it conforms), each ``"<path>: <what>"`` with a JSONPath-like path (``$``,
``$.city``, ``$.items[2]``). Contracts callers may rely on:

- Supported keywords: ``type`` (one name or a list; ``integer`` accepts ``2.0``
  as JSON Schema does, never ``true``), ``enum``, ``const``, ``properties``,
  ``required``, ``additionalProperties`` (``false`` or a schema), ``items`` (one
  schema), ``minItems``/``maxItems``, ``anyOf``, and the boolean schemas
  ``true``/``false``.
- Every other keyword (``$ref``, ``pattern``, ``format``, ``minimum``...) is
  ignored, not failed: this is a subset, documented as such; a provider's strict
  mode enforces the whole schema on its side.
- ``enum``/``const`` compare JSON values (``1 == 1.0``, ``True != 1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.protocol.pytypes import json_type_name

__all__ = ["SUPPORTED_KEYWORDS", "check_schema"]

SUPPORTED_KEYWORDS: Final = frozenset(
    {
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "anyOf",
    }
)
"""The keywords ``check_schema`` enforces; others are ignored."""


_TYPE_NAMES: Final = (
    "null",
    "boolean",
    "integer",
    "number",
    "string",
    "array",
    "object",
)


def _is_type(value: object, name: str) -> bool:
    kind = json_type_name(value)
    if name == "integer":
        return kind == name or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return kind in ("integer", "number")
    # An unknown type name is not this subset's to judge.
    return kind == name or name not in _TYPE_NAMES


def _json_equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(
            _json_equal(x, y) for x, y in zip(a, b, strict=True)
        )
    return a == b


def _type_name(value: object) -> str:
    for name in _TYPE_NAMES:
        if _is_type(value, name):
            return name
    return type(value).__name__


def check_schema(value: Any, schema: Any, path: str = "$") -> list[str]:
    """The problems of ``value`` against ``schema`` (the supported subset).

    Args:
        value: A parsed JSON value.
        schema: A JSON Schema (a mapping, or ``True``/``False``).
        path: The path of ``value``, prefixed to every problem.
    """
    if schema is True or not isinstance(schema, Mapping):
        return [] if schema is not False else [f"{path}: no value is allowed here"]
    problems: list[str] = []
    wanted = schema.get("type")
    if wanted is not None:
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        if not any(_is_type(value, name) for name in names):
            listed = " or ".join(map(str, names))
            problems.append(f"{path}: must be {listed}, got {_type_name(value)}")
            return problems
    if "const" in schema and not _json_equal(value, schema["const"]):
        problems.append(f"{path}: must be {schema['const']!r}")
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(_json_equal(value, item) for item in enum):
        problems.append(f"{path}: must be one of {enum!r}")
    alternatives = schema.get("anyOf")
    if (
        isinstance(alternatives, list)
        and alternatives
        and all(check_schema(value, option, path) for option in alternatives)
    ):
        problems.append(f"{path}: matches none of the anyOf schemas")
    if isinstance(value, dict):
        problems.extend(_object_problems(value, schema, path))
    if isinstance(value, list):
        problems.extend(_array_problems(value, schema, path))
    return problems


def _object_problems(
    value: dict[str, Any], schema: Mapping[str, Any], path: str
) -> list[str]:
    problems: list[str] = []
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    for name in schema.get("required") or ():
        if isinstance(name, str) and name not in value:
            problems.append(f"{path}.{name}: is required")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            problems.extend(check_schema(item, properties[key], f"{path}.{key}"))
        elif extra is False:
            problems.append(f"{path}.{key}: is not an allowed property")
        elif isinstance(extra, Mapping):
            problems.extend(check_schema(item, extra, f"{path}.{key}"))
    return problems


def _array_problems(
    value: list[Any], schema: Mapping[str, Any], path: str
) -> list[str]:
    problems: list[str] = []
    least, most = schema.get("minItems"), schema.get("maxItems")
    if isinstance(least, int) and len(value) < least:
        problems.append(f"{path}: must have at least {least} items")
    if isinstance(most, int) and len(value) > most:
        problems.append(f"{path}: must have at most {most} items")
    items = schema.get("items")
    if isinstance(items, Mapping | bool):
        for position, item in enumerate(value):
            problems.extend(check_schema(item, items, f"{path}[{position}]"))
    return problems
