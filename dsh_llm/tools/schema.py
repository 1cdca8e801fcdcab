"""``tool_schema``: a ``ToolSchema`` read from a Python function's signature.

Contracts callers may rely on:

- The name is the function's ``__name__`` (or the one given); the description
  is the first paragraph of its docstring (``""`` without one).
- Each parameter becomes a property; one without a default is ``required``.
  Annotations map to JSON Schema types: ``str`` string, ``int`` integer,
  ``float`` number, ``bool`` boolean, ``list[X]``/``tuple[X, ...]`` array of X,
  ``dict`` object, ``Literal[...]`` an ``enum``, ``X | None`` the schema of X.
  A missing or other annotation gives ``{}`` (any value).
- ``*args``/``**kwargs`` are not described (the model sends named arguments).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, Final

from dsh_llm.protocol import ToolSchema

__all__ = ["tool_schema"]

_SIMPLE: Final[dict[Any, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
    tuple: "array",
}


def _type_schema(annotation: Any) -> dict[str, Any]:
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        others = [arg for arg in args if arg is not type(None)]
        return _type_schema(others[0]) if len(others) == 1 else {}
    if origin in (list, tuple) and args:
        return {"type": "array", "items": _type_schema(args[0])}
    if origin is dict:
        return {"type": "object"}
    return {}


def tool_schema(function: Callable[..., Any], *, name: str | None = None) -> ToolSchema:
    """The ``ToolSchema`` describing ``function`` (see the module docstring).

    Raises:
        TypeError: when ``function`` is not callable.
    """
    if not callable(function):
        raise TypeError(f"tool_schema needs a function, got {type(function).__name__}")
    try:
        hints = typing.get_type_hints(function)
    except Exception:
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        properties[parameter.name] = _type_schema(hints.get(parameter.name))
        if parameter.default is parameter.empty:
            required.append(parameter.name)
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    doc = inspect.getdoc(function) or ""
    return ToolSchema(
        name=name or str(getattr(function, "__name__", "tool")),
        description=doc.split("\n\n")[0].strip(),
        parameters=parameters,
    )
