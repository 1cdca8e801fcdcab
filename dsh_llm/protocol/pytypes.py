"""Python types as JSON Schema, and JSON values read into them.

Structured output (``GenerateOptions(response_format=City)``) and tools
(``run_tools(..., tools=[get_weather])``) describe their JSON with the user's
own types. One grammar serves both directions; contracts callers may rely on:

- ``json_schema_of(tp)``: the JSON Schema of a type: ``str``, ``int``,
  ``float``, ``bool``, ``None``, ``list[X]``/``Sequence[X]``/``set[X]``,
  ``tuple[X, ...]`` and ``tuple[X, Y]``, ``dict[str, X]``, ``Literal[...]``, an
  ``Enum``, ``X | Y`` and ``X | None`` (``anyOf``), ``Annotated[X, "text"]``
  (the text becomes the description), a dataclass or a ``TypedDict`` (an object
  of its fields, those without a default ``required``, no other property), and
  a pydantic model (its own ``model_json_schema()``; nested models keep their
  ``$defs`` at the root). ``Any``, a missing annotation and any other class give
  ``{}`` (any value). A recursive dataclass or ``TypedDict`` raises
  ``TypeError``.
- ``from_json(tp, value)``: the value read into ``tp`` and checked on the way:
  a dataclass instance, a ``TypedDict``'s dict, a pydantic model (through its
  ``model_validate``), an ``Enum`` member, a tuple or set; ``int`` accepts
  ``2.0``, ``float`` accepts ``2``, ``bool`` is never a number. The first
  mismatch raises ``ValueMismatch`` with its path (``$``, ``$.city``,
  ``$.items[2]``) and what is wrong. A value for ``{}`` passes as it is.
- ``to_json(value)``: the reverse, for a tool's return value (dataclasses,
  pydantic models, enums, tuples and sets made JSON values).
- pydantic is never imported: a pydantic model is recognised by its
  ``model_json_schema`` and ``model_validate`` methods.
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Final

__all__ = [
    "ValueMismatch",
    "bind_arguments",
    "from_json",
    "is_pydantic_model",
    "is_schema_type",
    "is_typeddict",
    "json_schema_of",
    "json_type_name",
    "parameters_schema",
    "to_json",
    "type_label",
]

_SCALARS: Final[dict[Any, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    None: "null",
}
_SET_ORIGINS: Final = frozenset({set, frozenset, abc.Set, abc.MutableSet})
_ARRAY_ORIGINS: Final = _SET_ORIGINS | {list, abc.Sequence, abc.MutableSequence}
_MAPPING_ORIGINS: Final = frozenset({dict, abc.Mapping, abc.MutableMapping})


class ValueMismatch(ValueError):
    """A JSON value that does not fit its type: ``path`` and ``problem``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        """Where the first mismatch is (``$``, ``$.city``, ``$.items[2]``)."""
        self.problem = problem
        """What is wrong there."""


def is_pydantic_model(tp: object) -> bool:
    """Whether ``tp`` is a pydantic model class (recognised without importing
    pydantic)."""
    return (
        isinstance(tp, type)
        and callable(getattr(tp, "model_json_schema", None))
        and callable(getattr(tp, "model_validate", None))
    )


def is_typeddict(tp: object) -> bool:
    """Whether ``tp`` is a ``TypedDict`` class, from ``typing`` or
    ``typing_extensions`` (whose classes ``typing.is_typeddict`` does not know
    before Python 3.12)."""
    return typing.is_typeddict(tp) or (
        isinstance(tp, type)
        and issubclass(tp, dict)
        and hasattr(tp, "__required_keys__")
        and hasattr(tp, "__total__")
    )


def is_schema_type(tp: object) -> bool:
    """Whether ``tp`` is a class that describes a JSON object: a pydantic
    model, a dataclass or a ``TypedDict``."""
    return (
        is_pydantic_model(tp)
        or (isinstance(tp, type) and dataclasses.is_dataclass(tp))
        or is_typeddict(tp)
    )


def type_label(tp: object) -> str:
    """A type's name for messages: ``City``, ``list[City]``, ``int | None``."""
    if tp is None or tp is type(None):
        return "None"
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_label(arg) for arg in args)
    if origin is typing.Literal:
        return f"Literal[{', '.join(map(repr, args))}]"
    if origin is typing.Annotated:
        return type_label(args[0])
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else type_label(a) for a in args)
        return f"{type_label(origin)}[{inner}]"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


_JSON_TYPE_NAMES: Final[tuple[tuple[type, str], ...]] = (
    (type(None), "null"),
    (bool, "boolean"),  # before int: a bool is an int
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def json_type_name(value: object) -> str:
    """The JSON type of a parsed value: ``null``, ``boolean``, ``integer``,
    ``number``, ``string``, ``array``, ``object`` (else the Python name)."""
    for kind, name in _JSON_TYPE_NAMES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _hints(owner: object) -> dict[str, Any]:
    try:
        return typing.get_type_hints(owner, include_extras=True)
    except Exception as exc:  # NameError for an unresolved forward reference...
        raise TypeError(
            f"cannot read the type hints of {type_label(owner)}: {exc}"
        ) from exc


def _unwrap(tp: Any) -> tuple[Any, str | None]:
    """``tp`` without ``Annotated``, ``Required`` and ``NotRequired``, and the
    first text of an ``Annotated`` (its description)."""
    description = None
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            texts = [item for item in tp.__metadata__ if isinstance(item, str)]
            if texts and description is None:
                description = texts[0]
            tp = tp.__origin__
        elif origin in (typing.Required, typing.NotRequired):
            tp = typing.get_args(tp)[0]
        else:
            return tp, description


def _dataclass_fields(tp: type) -> list[tuple[str, Any, bool, str | None]]:
    """``(name, annotation, required, description)`` of each init field."""
    hints = _hints(tp)
    fields = []
    for field in dataclasses.fields(tp):
        if not field.init:
            continue
        required = (
            field.default is dataclasses.MISSING
            and field.default_factory is dataclasses.MISSING
        )
        description = field.metadata.get("description")
        fields.append(
            (
                field.name,
                hints.get(field.name, Any),
                required,
                description if isinstance(description, str) else None,
            )
        )
    return fields


def _typeddict_fields(tp: Any) -> list[tuple[str, Any, bool, str | None]]:
    hints = _hints(tp)
    fields: list[tuple[str, Any, bool, str | None]] = []
    for name, hint in hints.items():
        # Read Required/NotRequired from the hint: under ``from __future__
        # import annotations`` the class's __required_keys__ cannot see them.
        origin = typing.get_origin(hint)
        if origin is typing.NotRequired:
            required = False
        elif origin is typing.Required:
            required = True
        else:
            required = name in tp.__required_keys__
        fields.append((name, hint, required, None))
    return fields


class _Schemas:
    """One schema build: the ``$defs`` gathered from pydantic models, and the
    classes being described (to refuse a recursive one)."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.open: list[object] = []

    def of(self, annotation: Any) -> dict[str, Any]:
        tp, description = _unwrap(annotation)
        schema = self._bare(tp)
        if description is not None:
            schema = {**schema, "description": description}
        return schema

    def _bare(self, tp: Any) -> dict[str, Any]:
        if tp is Any or tp is object or tp is inspect.Parameter.empty:
            return {}
        if tp in _SCALARS:
            return {"type": _SCALARS[tp]}
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Literal:
            return {"enum": list(args)}
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [self.of(arg) for arg in args]}
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return {"enum": [member.value for member in tp]}
        if origin is tuple or tp is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.of(args[0])}
            if args:
                return {
                    "type": "array",
                    "prefixItems": [self.of(arg) for arg in args],
                    "minItems": len(args),
                    "maxItems": len(args),
                }
            return {"type": "array"}
        if origin in _ARRAY_ORIGINS or tp in _ARRAY_ORIGINS:
            schema: dict[str, Any] = {"type": "array"}
            if args:
                schema["items"] = self.of(args[0])
            if origin in _SET_ORIGINS or tp in _SET_ORIGINS:
                schema["uniqueItems"] = True
            return schema
        if origin in _MAPPING_ORIGINS or tp in _MAPPING_ORIGINS:
            if args and _unwrap(args[0])[0] is not str:
                raise TypeError(
                    f"{type_label(tp)}: JSON object keys are strings, use "
                    "dict[str, ...]"
                )
            schema = {"type": "object"}
            if len(args) == 2:
                schema["additionalProperties"] = self.of(args[1])
            return schema
        if is_pydantic_model(tp):
            return self._pydantic(tp)
        if (isinstance(tp, type) and dataclasses.is_dataclass(tp)) or is_typeddict(tp):
            return self._object(tp)
        return {}

    def _pydantic(self, tp: Any) -> dict[str, Any]:
        schema = dict(tp.model_json_schema())
        for name, definition in schema.pop("$defs", {}).items():
            known = self.defs.setdefault(name, definition)
            if known != definition:
                raise TypeError(
                    f"two different pydantic models are named {name!r}; rename one"
                )
        return schema

    def _object(self, tp: Any) -> dict[str, Any]:
        if tp in self.open:
            raise TypeError(
                f"{type_label(tp)} refers to itself: recursive types are not "
                "supported (a pydantic model is)"
            )
        self.open.append(tp)
        try:
            fields = (
                _typeddict_fields(tp) if is_typeddict(tp) else _dataclass_fields(tp)
            )
            properties: dict[str, Any] = {}
            required = []
            for name, hint, needed, description in fields:
                prop = self.of(hint)
                if description is not None:
                    prop = {**prop, "description": description}
                properties[name] = prop
                if needed:
                    required.append(name)
        finally:
            self.open.pop()
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return schema

    def rooted(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.defs:
            return {**schema, "$defs": {**schema.get("$defs", {}), **self.defs}}
        return schema


def json_schema_of(tp: Any) -> dict[str, Any]:
    """The JSON Schema of ``tp`` (see the module docstring).

    Raises:
        TypeError: for a recursive dataclass or ``TypedDict``, a mapping whose
            keys are not ``str``, or hints that cannot be resolved.
    """
    if is_pydantic_model(tp):
        return dict(tp.model_json_schema())
    schemas = _Schemas()
    return schemas.rooted(schemas.of(tp))


def _parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    return [
        parameter
        for parameter in inspect.signature(function).parameters.values()
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]


def _function_hints(function: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function, include_extras=True)
    except Exception:
        return {}  # unresolvable hints: the parameters are described as any value


def parameters_schema(function: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of ``function``'s keyword arguments: an object with one
    property per parameter (``*args``/``**kwargs`` left out), those without a
    default ``required``. Hints that cannot be resolved describe any value."""
    hints = _function_hints(function)
    schemas = _Schemas()
    properties: dict[str, Any] = {}
    required = []
    for parameter in _parameters(function):
        properties[parameter.name] = schemas.of(hints.get(parameter.name, Any))
        if parameter.default is parameter.empty:
            required.append(parameter.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schemas.rooted(schema)


def bind_arguments(
    function: Callable[..., Any], arguments: Mapping[str, Any]
) -> dict[str, Any]:
    """``arguments`` (a parsed JSON object) read into ``function``'s parameter
    types, ready for ``function(**bound)``.

    Raises:
        ValueMismatch: for a missing required argument, one ``function`` does
            not take (unless it has ``**kwargs``), or a value that does not fit
            its parameter's type.
    """
    hints = _function_hints(function)
    parameters = _parameters(function)
    names = {parameter.name for parameter in parameters}
    takes_any = any(
        parameter.kind is parameter.VAR_KEYWORD
        for parameter in inspect.signature(function).parameters.values()
    )
    bound: dict[str, Any] = {}
    for parameter in parameters:
        path = f"$.{parameter.name}"
        if parameter.name in arguments:
            hint = hints.get(parameter.name, Any)
            bound[parameter.name] = from_json(hint, arguments[parameter.name], path)
        elif parameter.default is parameter.empty:
            raise ValueMismatch(path, "is required")
    for key, value in arguments.items():
        if key not in names:
            if not takes_any:
                raise ValueMismatch(f"$.{key}", "is not a parameter")
            bound[key] = value
    return bound


def _json_equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def from_json(tp: Any, value: Any, path: str = "$") -> Any:
    """``value`` (parsed JSON) read into ``tp`` (see the module docstring).

    Raises:
        ValueMismatch: at the first place ``value`` does not fit.
        TypeError: for a type ``json_schema_of`` refuses.
    """
    tp, _ = _unwrap(tp)
    if tp is Any or tp is object or tp is inspect.Parameter.empty:
        return value
    if tp in _SCALARS:
        return _scalar(_SCALARS[tp], value, path)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        for option in args:
            if _json_equal(value, option):
                return option
        raise ValueMismatch(path, f"must be one of {list(args)!r}")
    if origin in (typing.Union, types.UnionType):
        return _union(args, value, path)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if _json_equal(value, member.value):
                return member
        raise ValueMismatch(path, f"must be one of {[m.value for m in tp]!r}")
    if origin is tuple or tp is tuple:
        return _tuple(args, value, path)
    if origin in _ARRAY_ORIGINS or tp in _ARRAY_ORIGINS:
        items = _array(value, path)
        item_type = args[0] if args else Any
        read = [from_json(item_type, x, f"{path}[{i}]") for i, x in enumerate(items)]
        if origin in _SET_ORIGINS or tp in _SET_ORIGINS:
            try:
                return frozenset(read) if frozenset in (origin, tp) else set(read)
            except TypeError:
                raise ValueMismatch(path, "holds items a set cannot hold") from None
        return read
    if origin in _MAPPING_ORIGINS or tp in _MAPPING_ORIGINS:
        if not isinstance(value, dict):
            raise ValueMismatch(path, f"must be object, got {json_type_name(value)}")
        item_type = args[1] if len(args) == 2 else Any
        return {k: from_json(item_type, v, f"{path}.{k}") for k, v in value.items()}
    if is_pydantic_model(tp):
        return _pydantic(tp, value, path)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        kwargs = _fields(_dataclass_fields(tp), value, path, type_label(tp))
        try:
            return tp(**kwargs)
        except (TypeError, ValueError) as exc:
            raise ValueMismatch(path, f"{type_label(tp)} refused it: {exc}") from exc
    if is_typeddict(tp):
        return _fields(_typeddict_fields(tp), value, path, type_label(tp))
    return value


def _scalar(name: str, value: Any, path: str) -> Any:
    if name == "null" and value is None:
        return None
    if name == "boolean" and isinstance(value, bool):
        return value
    if name == "string" and isinstance(value, str):
        return value
    if not isinstance(value, bool):
        if name == "integer" and isinstance(value, int):
            return value
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return int(value)
        if name == "number" and isinstance(value, int | float):
            return float(value)
    raise ValueMismatch(path, f"must be {name}, got {json_type_name(value)}")


def _union(args: tuple[Any, ...], value: Any, path: str) -> Any:
    if value is None and type(None) in args:
        return None
    options = [arg for arg in args if arg is not type(None)]
    if len(options) == 1:
        return from_json(options[0], value, path)
    for option in options:
        try:
            return from_json(option, value, path)
        except ValueMismatch:
            continue
    names = " or ".join(type_label(arg) for arg in args)
    raise ValueMismatch(path, f"must be {names}, got {json_type_name(value)}")


def _array(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueMismatch(path, f"must be array, got {json_type_name(value)}")
    return value


def _tuple(args: tuple[Any, ...], value: Any, path: str) -> tuple[Any, ...]:
    items = _array(value, path)
    if not args:
        return tuple(items)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(from_json(args[0], x, f"{path}[{i}]") for i, x in enumerate(items))
    if len(items) != len(args):
        raise ValueMismatch(path, f"must have {len(args)} items, got {len(items)}")
    return tuple(
        from_json(arg, x, f"{path}[{i}]")
        for i, (arg, x) in enumerate(zip(args, items, strict=True))
    )


def _fields(
    fields: list[tuple[str, Any, bool, str | None]], value: Any, path: str, owner: str
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueMismatch(path, f"must be object, got {json_type_name(value)}")
    known = {name for name, _, _, _ in fields}
    for key in value:
        if key not in known:
            raise ValueMismatch(f"{path}.{key}", f"is not a field of {owner}")
    read: dict[str, Any] = {}
    for name, hint, required, _ in fields:
        if name in value:
            read[name] = from_json(hint, value[name], f"{path}.{name}")
        elif required:
            raise ValueMismatch(f"{path}.{name}", "is required")
    return read


def _pydantic(tp: Any, value: Any, path: str) -> Any:
    try:
        return tp.model_validate(value)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        errors = getattr(exc, "errors", None)
        if not callable(errors):
            raise
        first = errors()[0]
        where = path
        for part in first.get("loc", ()):
            where += f"[{part}]" if isinstance(part, int) else f".{part}"
        raise ValueMismatch(where, str(first.get("msg", exc))) from None


def to_json(value: Any) -> Any:
    """``value`` as JSON data: dataclasses and pydantic models as objects, enums
    as their values, tuples and sets as arrays; anything else as it is."""
    if is_pydantic_model(type(value)):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: to_json(getattr(value, field.name))
            for field in dataclasses.fields(value)
        }
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json(item) for item in value]
    return value
