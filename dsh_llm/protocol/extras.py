"""Structured output and the provider escape hatches of one request.

Three ``GenerateOptions`` fields are defined here, each checked at construction:

- ``ResponseFormat``: the JSON Schema the final text must follow, with a name
  (``^[A-Za-z0-9_-]{1,64}$``, as OpenAI requires) and ``strict`` (whether the
  provider must enforce the schema; a provider that cannot refuses a strict one
  with ``UNSUPPORTED_OPTION``). A bare JSON Schema mapping converts to
  ``ResponseFormat(schema=mapping)``; a pydantic model, dataclass or
  ``TypedDict`` class to ``ResponseFormat.from_type(cls)`` (its schema, named
  after it; ``dsh_llm.protocol.pytypes``).
- ``extra_body``: string-keyed JSON merged last into the request body by the
  adapters that honour it; its content is NOT checked (it is the way to send a
  field this library does not know yet).
- ``extra_headers``: header names and values checked like the transport's
  (an RFC 9110 token; visible ASCII with inner spaces or tabs only), no name
  twice case-insensitively.

Mappings are private deep copies (a later change by the caller does not leak
in); they take part in equality but not in the hash.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from typing import Final

import attrs

from dsh_llm.protocol import checks as c
from dsh_llm.protocol import pytypes
from dsh_llm.protocol.content import detached_json
from dsh_llm.protocol.content import schema_field

__all__ = [
    "DEFAULT_FORMAT_NAME",
    "ResponseFormat",
    "check_extra_body",
    "check_extra_headers",
    "check_response_format",
    "is_header_name",
    "is_header_value",
    "to_extra_body",
    "to_extra_headers",
    "to_response_format",
]

DEFAULT_FORMAT_NAME: Final = "response"
"""The schema name sent when a ``ResponseFormat`` names none."""

_FORMAT_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_BAD_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE: Final = re.compile(r"(?:[\x21-\x7E](?:[\x21-\x7E \t]*[\x21-\x7E])?)?")


def is_header_name(name: object) -> bool:
    """Whether ``name`` is a non-empty HTTP header name (an RFC 9110 token)."""
    return isinstance(name, str) and _HEADER_NAME.fullmatch(name) is not None


def is_header_value(value: object) -> bool:
    """Whether ``value`` is sent exactly as given: visible ASCII with spaces and
    tabs only between visible characters, or empty."""
    return isinstance(value, str) and _HEADER_VALUE.fullmatch(value) is not None


def _name(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    c.is_str(inst, attribute, value)
    assert isinstance(value, str)
    if _FORMAT_NAME.fullmatch(value) is None:
        raise c.bad_value(
            inst,
            attribute.name,
            f"must be 1 to 64 letters, digits, '_' or '-', got {value!r}",
        )


@attrs.frozen(kw_only=True)
class ResponseFormat:
    """The JSON Schema a response's final text must follow."""

    schema: dict[str, Any] = schema_field()  # noqa: RUF009
    """The JSON Schema of the whole answer, sent verbatim (a private deep copy)."""
    name: str = attrs.field(default=DEFAULT_FORMAT_NAME, validator=_name)
    """The schema's name, for providers that want one."""
    strict: bool = attrs.field(default=False, validator=c.is_bool)
    """Whether the provider must enforce the schema exactly (OpenAI's strict
    mode: every property required, no additional properties). A provider that
    cannot enforce schemas refuses ``strict=True`` with ``UNSUPPORTED_OPTION``."""

    @classmethod
    def from_type(
        cls, tp: Any, *, name: str | None = None, strict: bool = False
    ) -> ResponseFormat:
        """The format of a pydantic model, a dataclass or a ``TypedDict``: the
        JSON Schema it defines, named after the class unless ``name`` is given
        (characters a name cannot hold become ``_``).

        Raises:
            TypeError: for another type, or one ``json_schema_of`` refuses.
        """
        if not pytypes.is_schema_type(tp):
            raise TypeError(
                "ResponseFormat.from_type needs a pydantic model, a dataclass or "
                f"a TypedDict class, got {pytypes.type_label(tp)}"
            )
        if name is None:
            name = _BAD_NAME_CHARS.sub("_", tp.__name__)[:64]
        return cls(schema=pytypes.json_schema_of(tp), name=name, strict=strict)

    def __repr__(self) -> str:
        """``ResponseFormat(name='City', strict=False, schema=<object, 2
        properties>)``: the schema summed up, not printed."""
        kind = self.schema.get("type", "schema")
        properties = self.schema.get("properties")
        inner = (
            f"{kind}, {len(properties)} properties"
            if isinstance(properties, dict)
            else str(kind)
        )
        return (
            f"ResponseFormat(name={self.name!r}, strict={self.strict}, "
            f"schema=<{inner}>)"
        )


def to_response_format(value: object) -> object:
    """Convert a JSON Schema mapping, or a pydantic model, dataclass or
    ``TypedDict`` class, to a ``ResponseFormat``; leave the rest (a
    ``ResponseFormat``, ``None``, or a wrong type the validator reports)."""
    if isinstance(value, Mapping):
        return ResponseFormat(schema=dict(value))
    if pytypes.is_schema_type(value):
        return ResponseFormat.from_type(value)
    return value


def check_response_format(
    inst: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    """Require ``None`` or a ``ResponseFormat`` (what the converter made)."""
    if value is not None and not isinstance(value, ResponseFormat):
        got = (
            f"the class {pytypes.type_label(value)}"
            if isinstance(value, type)
            else type(value).__name__
        )
        raise c.bad_type(
            inst,
            attribute.name,
            "must be a ResponseFormat, a JSON Schema mapping, or a pydantic "
            f"model, dataclass or TypedDict class, got {got}",
        )


def to_extra_body(value: object) -> object:
    """A private deep copy of a mapping as a ``dict``; leave the rest."""
    if isinstance(value, Mapping):
        return detached_json(dict(value))
    return value


def to_extra_headers(value: object) -> object:
    """A ``dict`` copy of a mapping; leave the rest."""
    if isinstance(value, Mapping):
        return dict(value)
    return value


def check_extra_body(
    inst: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    """Require ``None`` or a ``dict`` with ``str`` keys (values are not checked)."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise c.bad_type(
            inst, attribute.name, f"must be a mapping, got {type(value).__name__}"
        )
    for key in value:
        if not isinstance(key, str) or key == "":
            raise c.bad_type(inst, attribute.name, "keys must be non-empty strings")


def check_extra_headers(
    inst: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    """Require ``None`` or a ``dict`` of valid header names to valid values, no
    name twice (case-insensitively). Values are never shown in a message."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise c.bad_type(
            inst, attribute.name, f"must be a mapping, got {type(value).__name__}"
        )
    seen: set[str] = set()
    for name, text in value.items():
        if not is_header_name(name):
            raise c.bad_value(
                inst, attribute.name, f"has an invalid header name {name!r}"
            )
        assert isinstance(name, str)
        if not is_header_value(text):
            raise c.bad_value(
                inst,
                attribute.name,
                f"[{name!r}] must be a string of printable ASCII without leading "
                "or trailing whitespace, line breaks or control characters",
            )
        if name.lower() in seen:
            raise c.bad_value(
                inst,
                attribute.name,
                f"names {name!r} twice (header names are case-insensitive)",
            )
        seen.add(name.lower())
