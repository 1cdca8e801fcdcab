"""Streamed function-call arguments (Vertex AI ``streamFunctionCallArguments``)
as raw JSON text, written as they arrive.

With ``streamFunctionCallArguments`` a call comes in several ``functionCall``
parts: the first names it (``willContinue: true``), the next ones carry
``partialArgs``, each a value addressed by a JSON path (RFC 9535, ``$.a.b[0]``)
holding one ``stringValue``, ``numberValue``, ``boolValue`` or ``nullValue``; a
string may come in pieces (the same path again while its ``willContinue`` is
true). The model writes its arguments in document order, so the JSON text can be
written as they arrive. Pure; contracts callers may rely on:

- ``StreamedArguments.add(partial)`` (and ``add_args`` for a whole ``args``
  object) returns the next piece of the arguments' JSON text; ``close()`` the
  piece that completes it (``""`` when nothing came: the writer's ``{}``). The
  pieces joined are the compact JSON of the object the paths describe, keys in
  arrival order.
- A path that cannot be read, that addresses the whole arguments or a value
  already written (a closed object or array, a member written twice, an array
  index out of order), a value of the wrong type or a non-finite number raises
  ``ValueError`` naming what was wrong (the translator's ``MALFORMED_RESPONSE``):
  text already streamed is never taken back, so what cannot extend it fails.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from typing import Final

from dsh_llm.serde import compact_json

Segment = str | int
"""One step of a path: an object member's name or an array index."""

_NAME: Final = re.compile(r"\.([^.\[]+)")
_INDEX: Final = re.compile(r"\[([0-9]+)\]")
_QUOTED: Final = re.compile(r"""\[(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\]""")


def json_path(text: object) -> tuple[Segment, ...]:
    """The segments of a normalized JSON path (``$``, then ``.name``,
    ``['name']``, ``["name"]`` or ``[index]`` steps).

    Raises:
        ValueError: for anything else (a wildcard, a filter, a slice...).
    """
    if type(text) is not str or not text.startswith("$"):
        raise ValueError("a partialArgs jsonPath that is not a path")
    segments: list[Segment] = []
    at = 1
    while at < len(text):
        if match := _NAME.match(text, at):
            segments.append(match.group(1))
        elif match := _INDEX.match(text, at):
            segments.append(int(match.group(1)))
        elif match := _QUOTED.match(text, at):
            single, double = match.groups()
            segments.append(_unquote(single if double is None else double, double))
        else:
            raise ValueError(f"a partialArgs jsonPath it cannot read ({text[:80]})")
        at = match.end()
    return tuple(segments)


def _unquote(body: str, double: str | None) -> str:
    """A quoted name's text: JSON string escapes, plus ``\\'`` in single quotes."""
    if double is None:
        body = body.replace("\\'", "'").replace('"', '\\"')
    try:
        name: str = json.loads(f'"{body}"')
    except ValueError:
        raise ValueError("a partialArgs jsonPath with a bad escape") from None
    return name


class _Container:
    __slots__ = ("count", "is_object", "names", "segment")

    def __init__(self, segment: Segment | None, is_object: bool) -> None:
        self.segment = segment
        self.is_object = is_object
        self.names: set[str] = set()
        self.count = 0


def _value_text(partial: dict[str, Any]) -> tuple[str, bool]:
    """The JSON text of ``partial``'s one value, and whether it is a string
    (whose text is then without its closing quote)."""
    found = [
        key
        for key in ("stringValue", "numberValue", "boolValue")
        if partial.get(key) is not None
    ]
    if "nullValue" in partial:
        found.append("nullValue")
    if len(found) != 1:
        raise ValueError("a partialArgs entry without exactly one value")
    key = found[0]
    value = partial.get(key)
    if key == "stringValue":
        if type(value) is not str:
            raise ValueError("a partialArgs stringValue that is not a string")
        return compact_json(value)[:-1], True
    if key == "numberValue":
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not math.isfinite(value)
        ):
            raise ValueError("a partialArgs numberValue that is not a finite number")
        return compact_json(value), False
    if key == "boolValue":
        if type(value) is not bool:
            raise ValueError("a partialArgs boolValue that is not a boolean")
        return compact_json(value), False
    if value not in (None, "NULL_VALUE"):
        raise ValueError("a partialArgs nullValue that is not null")
    return "null", False


class StreamedArguments:
    """One call's arguments, from its ``partialArgs`` (see the module
    docstring)."""

    __slots__ = ("_stack", "_string")

    def __init__(self) -> None:
        # The containers open in the text written so far, the arguments'
        # object first (empty until the first value).
        self._stack: list[_Container] = []
        # The path of a string whose closing quote is still to come.
        self._string: tuple[Segment, ...] | None = None

    def add(self, partial: object) -> str:
        """The text one ``partialArgs`` entry adds.

        Raises:
            ValueError: see the module docstring.
        """
        if type(partial) is not dict:
            raise ValueError("a partialArgs entry that is not an object")
        path = json_path(partial.get("jsonPath"))
        more = partial.get("willContinue")
        if more is not None and type(more) is not bool:
            raise ValueError("a partialArgs willContinue that is not a boolean")
        out = ""
        if self._string is not None:
            if path == self._string:
                piece = partial.get("stringValue")
                if piece is None and not partial.keys() - {"jsonPath", "willContinue"}:
                    piece = ""  # only ends the string (willContinue false)
                if type(piece) is not str:
                    raise ValueError("a partialArgs string continued with another type")
                out = compact_json(piece)[1:-1]
                if not more:
                    out += '"'
                    self._string = None
                return out
            # The string's last piece said more would come: it ends here.
            out = '"'
            self._string = None
        text, is_string = _value_text(partial)
        out += self._place(path, text)
        if is_string:
            if more:
                self._string = path
            else:
                out += '"'
        return out

    def add_args(self, args: dict[str, Any]) -> str:
        """The text a whole ``args`` object adds: each member written whole.

        Raises:
            ValueError: see the module docstring.
        """
        out = ""
        if self._string is not None:
            out = '"'
            self._string = None
        for name, value in args.items():
            out += self._place((name,), compact_json(value))
        return out

    def close(self) -> str:
        """The text that completes the arguments (the open string's quote, the
        open containers' ends); ``""`` when nothing was written."""
        out = '"' if self._string is not None else ""
        self._string = None
        while self._stack:
            out += "}" if self._stack.pop().is_object else "]"
        return out

    def _place(self, path: tuple[Segment, ...], text: str) -> str:
        """The text that puts a value at ``path``: the containers left, the
        ones entered, the member's name or the array's separator, the value."""
        if not path:
            raise ValueError("a partialArgs jsonPath for the whole arguments")
        stack = self._stack
        out = ""
        if not stack:
            if type(path[0]) is not str:
                raise ValueError("function call arguments that are not a JSON object")
            stack.append(_Container(None, True))
            out = "{"
        shared = 1
        while (
            shared < len(stack)
            and shared < len(path)
            and stack[shared].segment == path[shared - 1]
        ):
            shared += 1
        # A value never goes where text already closed: containers left now
        # can never be entered again (their member or index is taken).
        while len(stack) > shared:
            out += "}" if stack.pop().is_object else "]"
        for depth in range(shared - 1, len(path)):
            segment = path[depth]
            out += self._member(stack[-1], segment)
            if depth + 1 < len(path):
                opened = _Container(segment, type(path[depth + 1]) is str)
                stack.append(opened)
                out += "{" if opened.is_object else "["
        return out + text

    @staticmethod
    def _member(container: _Container, segment: Segment) -> str:
        if container.is_object:
            if type(segment) is not str:
                raise ValueError("a partialArgs array index into an object")
            if segment in container.names:
                raise ValueError(
                    "a partialArgs jsonPath back to a member already written"
                )
            first = not container.names
            container.names.add(segment)
            return ("" if first else ",") + compact_json(segment) + ":"
        if type(segment) is not int:
            raise ValueError("a partialArgs member name into an array")
        if segment != container.count:
            raise ValueError("a partialArgs array index out of order")
        container.count += 1
        return "" if segment == 0 else ","
