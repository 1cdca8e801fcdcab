"""``tool_schema``: a ``ToolSchema`` read from a Python function or class, and
``bind_tool``: a model's arguments checked against it before the call.

Contracts callers may rely on:

- A function: the name is its ``__name__`` (or the one given); the
  description is the first paragraph of its docstring (``""`` without one).
  Each parameter becomes a property; one without a default is ``required``;
  ``*args``/``**kwargs`` are not described (the model sends named arguments).
  Annotations map to JSON Schema as ``dsh_llm.protocol.pytypes`` says:
  ``str``, ``int``, ``float``, ``bool``, ``list[X]``, ``tuple[X, ...]``,
  ``dict[str, X]``, ``Literal[...]`` (an ``enum``), an ``Enum``, ``X | None``
  (``anyOf`` with ``null``), ``Annotated[X, "description"]``, and a dataclass,
  ``TypedDict`` or pydantic model (an object). A missing or other annotation
  gives ``{}`` (any value, passed as it is).
- A pydantic model, a dataclass or a ``TypedDict`` class: the name is the
  class's, the description its docstring's first paragraph, the parameters the
  object schema it defines; the tool's call builds an instance.
- ``bind_tool(tool, arguments)`` reads the arguments into the parameter types
  (a dataclass parameter gets a dataclass instance, ``int`` accepts ``2.0``...)
  and returns the call to make; arguments that do not fit raise
  ``ValueMismatch`` with the path of the first mismatch (``$.city``), a
  missing required one ``$.city: is required``, an unknown one (without
  ``**kwargs``) ``$.x: is not a parameter``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol.pytypes import bind_arguments
from dsh_llm.protocol.pytypes import from_json
from dsh_llm.protocol.pytypes import is_schema_type
from dsh_llm.protocol.pytypes import json_schema_of
from dsh_llm.protocol.pytypes import parameters_schema


def _description(owner: object) -> str:
    if isinstance(owner, type):
        # The class's own docstring only: inspect.getdoc would hand out the
        # docstring of dict (a TypedDict) or of pydantic's BaseModel.
        own = owner.__dict__.get("__doc__")
        doc = inspect.cleandoc(own) if isinstance(own, str) else ""
        if doc.startswith(f"{owner.__name__}("):
            return ""  # the signature a dataclass writes when it has no docstring
    else:
        doc = inspect.getdoc(owner) or ""
    return doc.split("\n\n")[0].strip()


def tool_schema(function: Callable[..., Any], *, name: str | None = None) -> ToolSchema:
    """The ``ToolSchema`` describing ``function`` (a function, or a pydantic
    model, dataclass or ``TypedDict`` class; see the module docstring).

    Raises:
        TypeError: when ``function`` is not callable, or its types cannot be
            described (a recursive dataclass...).
    """
    if not callable(function):
        raise TypeError(f"tool_schema needs a function, got {type(function).__name__}")
    parameters = (
        json_schema_of(function)
        if is_schema_type(function)
        else parameters_schema(function)
    )
    return ToolSchema(
        name=name or str(getattr(function, "__name__", "tool")),
        description=_description(function),
        parameters=parameters,
    )


def bind_tool(
    function: Callable[..., Any], arguments: Mapping[str, Any]
) -> Callable[[], Any]:
    """The call of ``function`` with ``arguments`` read into its parameter
    types (for a class: the instance built from them).

    Raises:
        ValueMismatch: at the first argument that does not fit (see the module
            docstring).
    """
    if is_schema_type(function):
        instance = from_json(function, dict(arguments))
        return lambda: instance
    return functools.partial(function, **bind_arguments(function, arguments))
