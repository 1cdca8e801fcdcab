"""attrs validators and converters shared by the protocol values.

Every check raises ``TypeError`` for a value of the wrong type and ``ValueError`` for
a value of the right type outside its domain, and every message starts with the
class and field it is about, so a caller can tell which argument to fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any
from typing import Final

import attrs

Check = Callable[[Any, "attrs.Attribute[Any]", Any], None]
"""An attrs validator: ``check(instance, attribute, value)`` raises or returns."""


class FieldError(Exception):
    """Mixin of the two errors below: which class and field, and what is wrong.

    ``dsh_llm.serde`` reads ``field`` to name the offending JSON key.
    """

    def __init__(self, owner: str, field: str, detail: str) -> None:
        super().__init__(f"{owner}.{field} {detail}")
        self.owner = owner
        self.field = field
        self.detail = detail


class FieldTypeError(FieldError, TypeError):
    """A field got a value of the wrong type."""


class FieldValueError(FieldError, ValueError):
    """A field got a value of the right type outside its domain."""


def bad_type(inst: object, field: str, detail: str) -> FieldTypeError:
    """The ``TypeError`` for ``inst.field``."""
    return FieldTypeError(type(inst).__name__, field, detail)


def bad_value(inst: object, field: str, detail: str) -> FieldValueError:
    """The ``ValueError`` for ``inst.field``."""
    return FieldValueError(type(inst).__name__, field, detail)


def _kind(value: object) -> str:
    return type(value).__name__


def is_str(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a ``str`` (empty allowed)."""
    if not isinstance(value, str):
        raise bad_type(inst, attribute.name, f"must be a str, got {_kind(value)}")


def non_empty_str(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a non-empty ``str``."""
    is_str(inst, attribute, value)
    if value == "":
        raise bad_value(inst, attribute.name, "must not be empty")


def optional(check: Check) -> Check:
    """Allow ``None`` besides what ``check`` accepts."""

    def run(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            check(inst, attribute, value)

    return run


def non_negative_int(
    inst: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    """Require an ``int`` (not ``bool``) that is zero or more."""
    if type(value) is not int:
        raise bad_type(inst, attribute.name, f"must be an int, got {_kind(value)}")
    if value < 0:
        raise bad_value(inst, attribute.name, f"must be >= 0, got {value}")


def positive_int(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require an ``int`` (not ``bool``) that is one or more."""
    non_negative_int(inst, attribute, value)
    if value == 0:
        raise bad_value(inst, attribute.name, "must be > 0, got 0")


MAX_SAFE_INTEGER: Final = 2**53 - 1
"""JavaScript's largest exact integer: the bound of token counts other
languages read back exactly (``dsh_llm.runtime.prepare.MAX_SAFE_INTEGER``)."""


def safe_positive_int(
    inst: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    """Require an ``int`` (not ``bool``) in ``1..MAX_SAFE_INTEGER``."""
    positive_int(inst, attribute, value)
    if value > MAX_SAFE_INTEGER:  # type: ignore[operator]
        raise bad_value(
            inst, attribute.name, f"must be at most {MAX_SAFE_INTEGER}, got {value}"
        )


def is_bool(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a ``bool``."""
    if not isinstance(value, bool):
        raise bad_type(inst, attribute.name, f"must be a bool, got {_kind(value)}")


def finite_number(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a finite ``int`` or ``float`` (not ``bool``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_type(inst, attribute.name, f"must be a number, got {_kind(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:
        # An int beyond the float range (e.g. a 400-digit JSON number).
        finite = False
    if not finite:
        shown = value if isinstance(value, float) else "an int beyond the float range"
        raise bad_value(inst, attribute.name, f"must be finite, got {shown}")


def json_number(value: object) -> object:
    """An integral ``float`` as an ``int``; anything else as it is (a converter).

    JSON has one number type: keeping integral values as ints makes the JSON text
    match ``JSON.stringify`` (``1500``, not ``1500.0``). From 1e21 on JavaScript
    prints an exponent (``1e+21``), as Python's float repr does, so those stay
    floats.
    """
    if (
        isinstance(value, float)
        and math.isfinite(value)
        and value.is_integer()
        and abs(value) < 1e21
    ):
        return int(value)
    return value


def schema_object(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a ``dict`` (a JSON Schema object)."""
    if not isinstance(value, dict):
        raise bad_type(
            inst,
            attribute.name,
            f"must be a dict (a JSON Schema object), got {_kind(value)}",
        )


def instance_of(*types: type) -> Check:
    """Require an instance of one of ``types``."""
    names = " or ".join(t.__name__ for t in types)

    def run(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, types):
            raise bad_type(
                inst, attribute.name, f"must be a {names}, got {_kind(value)}"
            )

    return run


def tuple_of(*types: type) -> Check:
    """Require a tuple whose every item is an instance of one of ``types``."""
    names = " or ".join(t.__name__ for t in types)

    def run(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple):
            raise bad_type(inst, attribute.name, f"must be a tuple, got {_kind(value)}")
        for position, item in enumerate(value):
            if not isinstance(item, types):
                raise bad_type(
                    inst,
                    attribute.name,
                    f"[{position}] must be a {names}, got {_kind(item)}",
                )

    return run


def one_of(*allowed: str) -> Check:
    """Require one of the given strings."""
    listed = ", ".join(repr(a) for a in allowed)

    def run(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        is_str(inst, attribute, value)
        if value not in allowed:
            raise bad_value(
                inst, attribute.name, f"must be one of {listed}, got {value!r}"
            )

    return run


def to_tuple(value: object) -> object:
    """Turn a list (or other non-string iterable) into a tuple; leave the rest.

    Values keep tuples so they stay immutable; accepting a list at construction
    spares callers a conversion. Strings, bytes and mappings are left alone so the
    type check that follows reports them.
    """
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, tuple | str | bytes | dict) or value is None:
        return value
    if isinstance(value, Iterable):
        return tuple(value)
    return value


def to_optional_tuple(value: object) -> object:
    """Like ``to_tuple`` but keeps ``None``."""
    return None if value is None else to_tuple(value)


MAX_TIMEOUT_MS: Final = 2_147_483_647
"""The largest timeout accepted (the largest 32-bit timer delay, as in TS)."""


def timeout_detail(value: object) -> str | None:
    """What is wrong with ``value`` as a timeout in ms (the rest of a sentence
    after its name), or ``None`` when it is a finite number in (0, 2147483647]."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
        or value > MAX_TIMEOUT_MS
    ):
        return f"must be a positive finite number no greater than {MAX_TIMEOUT_MS}"
    return None


def check_timeout_ms(name: str, value: float | None, *, optional: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number in
    (0, 2147483647] (or ``None`` when ``optional``)."""
    if value is None and optional:
        return
    detail = timeout_detail(value)
    if detail is not None:
        raise ValueError(f"{name} {detail}")


def json_copy(value: Any, owner: str, field: str, where: str = "") -> Any:
    """A detached copy of JSON value ``value``; tuples become lists.

    ``owner`` and ``field`` name the value's class and field in the errors.
    Raises the field's ``TypeError``/``ValueError`` for anything JSON cannot
    carry, so a bad envelope fails when it is built, not when it is logged.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FieldValueError(
                owner,
                field,
                f"must hold finite numbers, got {value}{_at(where)}",
            )
        return value
    if isinstance(value, list | tuple):
        return [
            json_copy(item, owner, field, f"{where}[{position}]")
            for position, item in enumerate(value)
        ]
    if isinstance(value, dict):
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise FieldTypeError(
                    owner,
                    field,
                    f"must hold objects with str keys, got a key of type "
                    f"{type(key).__name__}{_at(where)}",
                )
            copied[key] = json_copy(item, owner, field, f"{where}[{key!r}]")
        return copied
    raise FieldTypeError(
        owner,
        field,
        f"must hold only JSON values, got {type(value).__name__}{_at(where)}",
    )


def _at(where: str) -> str:
    return f" at {where}" if where else ""
