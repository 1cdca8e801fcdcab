"""``PartialJson``: a best-effort view of a JSON document still being streamed.

For UIs that show structured output (text deltas of a ``response_format``
answer, or a tool call's ``arguments_delta``) before it is complete. Contracts
callers may rely on:

- ``feed(text)`` appends a delta; ``value`` is the parsed prefix, re-read from
  the whole buffer (linear in its length, cached until the next ``feed``).
- Never final too early: the view is always *consistent* with every document
  the text may still become. A string cut mid-way shows as its prefix (an escape
  cut mid-way, or a lone high surrogate waiting for its pair, is held back); a
  number, ``true``, ``false`` or ``null`` cut mid-way is not shown at all (an
  object leaves out that key, an array that item), and a number counts as
  complete only once a character after it is seen (so a top-level ``12`` shows
  nothing until ``close``). An object key still being written is left out.
- ``value`` is ``None`` while nothing can be shown (check ``has_value``);
  ``complete`` says the document is closed (its last ``}``, ``]`` or ``"``).
- As soon as the text cannot be the start of a JSON document, ``value`` raises
  ``LlmError`` with code ``INVALID_JSON_OUTPUT`` (naming the offset).
- ``close()`` returns the final value, parsed strictly (``json.loads``).
"""

from __future__ import annotations

import json
import re
from typing import Any
from typing import Final

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

__all__ = ["PartialJson"]

_MISSING: Final = object()
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_CHARS: Final = frozenset("-+0123456789.eE")
_WHITESPACE: Final = " \t\n\r"
_LITERALS: Final = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


class _Malformed(Exception):
    def __init__(self, at: int, what: str) -> None:
        super().__init__(what)
        self.at = at
        self.what = what


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def _string(text: str, i: int) -> tuple[Any, int, bool]:
    """A string starting at the quote ``text[i]``: its value (the decoded prefix
    when cut), the index after it, and whether its closing quote was seen."""
    j = i + 1
    safe = j  # end of the longest prefix that decodes to a prefix of the string
    while j < len(text):
        char = text[j]
        if char == '"':
            try:
                return json.loads(text[i : j + 1]), j + 1, True
            except ValueError as exc:
                raise _Malformed(i, f"invalid string ({exc})") from None
        if char == "\\":
            if j + 1 >= len(text):
                break
            if text[j + 1] != "u":
                j += 2
                safe = j
                continue
            digits = text[j + 2 : j + 6]
            if len(digits) < 4 or not set(digits) <= _HEX:
                if set(digits) <= _HEX:
                    break  # cut inside the escape
                raise _Malformed(j, "invalid \\u escape")
            if 0xD800 <= int(digits, 16) <= 0xDBFF:
                # A high surrogate decodes together with the low one after it.
                pair = text[j + 6 : j + 12]
                if (
                    len(pair) < 6
                    and "\\u".startswith(pair[:2])
                    and set(pair[2:]) <= _HEX
                ):
                    break
            j += 6
            safe = j
            continue
        if char < " ":
            raise _Malformed(j, "control character in a string")
        j += 1
        safe = j
    try:
        return json.loads(text[i:safe] + '"'), len(text), False
    except ValueError as exc:
        raise _Malformed(i, f"invalid string ({exc})") from None


def _number(text: str, i: int) -> tuple[Any, int, bool]:
    j = i
    while j < len(text) and text[j] in _NUMBER_CHARS:
        j += 1
    token = text[i:j]
    if j == len(text):
        if _NUMBER.fullmatch(token) or _NUMBER.fullmatch(token + "0"):
            return _MISSING, j, False
        raise _Malformed(i, f"invalid number {token!r}")
    if not _NUMBER.fullmatch(token):
        raise _Malformed(i, f"invalid number {token!r}")
    return json.loads(token), j, True


def _value(text: str, i: int) -> tuple[Any, int, bool]:
    """The value at ``text[i]`` (after whitespace): ``(value or _MISSING, end,
    complete)``."""
    i = _skip(text, i)
    if i >= len(text):
        return _MISSING, i, False
    char = text[i]
    if char == "{":
        return _object(text, i)
    if char == "[":
        return _array(text, i)
    if char == '"':
        return _string(text, i)
    if char == "-" or "0" <= char <= "9":
        return _number(text, i)
    literal = _LITERALS.get(char)
    if literal is not None:
        word, value = literal
        given = text[i : i + len(word)]
        if given == word:
            return value, i + len(word), True
        if i + len(given) == len(text) and word.startswith(given):
            return _MISSING, len(text), False
    raise _Malformed(i, f"unexpected character {char!r}")


def _after_item(text: str, i: int, close: str) -> tuple[int, bool | None]:
    """Past a complete member or element of an object or array ending in
    ``close``: ``(end, True)`` after ``close``, ``(end, False)`` when the text
    ends first, ``(next, None)`` after a comma, at the next item."""
    i = _skip(text, i)
    if i >= len(text):
        return i, False
    if text[i] == close:
        return i + 1, True
    if text[i] != ",":
        raise _Malformed(i, f"expected ',' or '{close}'")
    return _skip(text, i + 1), None


def _object(text: str, i: int) -> tuple[Any, int, bool]:
    result: dict[str, Any] = {}
    i = _skip(text, i + 1)
    if i < len(text) and text[i] == "}":
        return result, i + 1, True
    while True:
        if i >= len(text):
            return result, i, False
        if text[i] != '"':
            raise _Malformed(i, "expected a key string")
        key, i, done = _string(text, i)
        i = _skip(text, i)
        if not done or i >= len(text):
            return result, i, False
        if text[i] != ":":
            raise _Malformed(i, "expected ':'")
        value, i, done = _value(text, i + 1)
        if value is _MISSING:
            return result, i, False
        result[key] = value
        if not done:
            return result, i, False
        i, closed = _after_item(text, i, "}")
        if closed is not None:
            return result, i, closed


def _array(text: str, i: int) -> tuple[Any, int, bool]:
    result: list[Any] = []
    i = _skip(text, i + 1)
    if i < len(text) and text[i] == "]":
        return result, i + 1, True
    while True:
        value, i, done = _value(text, i)
        if value is _MISSING:
            return result, i, False
        result.append(value)
        if not done:
            return result, i, False
        i, closed = _after_item(text, i, "]")
        if closed is not None:
            return result, i, closed


class PartialJson:
    """An incremental view of one JSON document (see the module docstring).

    Example::

        view = PartialJson()
        for chunk in adapter.stream(options):
            if isinstance(chunk, TextDelta):
                view.feed(chunk.text)
                render(view.value)
        answer = view.close()
    """

    __slots__ = ("_cache", "_parts", "_text")

    def __init__(self, text: str = "") -> None:
        self._parts: list[str] = [text] if text else []
        self._text: str | None = None
        self._cache: tuple[Any, bool] | None = None

    def feed(self, delta: str) -> None:
        """Append ``delta`` (a ``TextDelta.text`` or ``ToolCallDelta.arguments_delta``).

        Raises:
            TypeError: for a ``delta`` that is not a ``str``.
        """
        if not isinstance(delta, str):
            raise TypeError(f"PartialJson.feed needs a str, got {type(delta).__name__}")
        if delta:
            self._parts.append(delta)
            self._text = None
            self._cache = None

    @property
    def text(self) -> str:
        """Everything fed so far."""
        if self._text is None:
            self._text = "".join(self._parts)
            self._parts = [self._text] if self._text else []
        return self._text

    def _parse(self) -> tuple[Any, bool]:
        if self._cache is None:
            text = self.text
            try:
                value, end, done = _value(text, 0)
                if done and _skip(text, end) < len(text):
                    raise _Malformed(_skip(text, end), "text after the document")
            except _Malformed as exc:
                raise LlmError(
                    f"the streamed text is not JSON: {exc.what} at offset {exc.at}",
                    ErrorCode.INVALID_JSON_OUTPUT,
                ) from None
            self._cache = (value, done)
        return self._cache

    @property
    def value(self) -> Any:
        """The best-effort value so far (``None`` while nothing can be shown).

        Raises:
            LlmError: ``INVALID_JSON_OUTPUT`` once the text cannot start a JSON
                document.
        """
        value, _ = self._parse()
        return None if value is _MISSING else value

    @property
    def has_value(self) -> bool:
        """Whether ``value`` shows something (``False`` also for ``null`` cut
        mid-way, ``True`` for a complete ``null``)."""
        return self._parse()[0] is not _MISSING

    @property
    def complete(self) -> bool:
        """Whether the document is closed (a top-level number never is before
        ``close``: more digits may follow)."""
        return self._parse()[1]

    def close(self) -> Any:
        """The final value of the whole text, parsed strictly.

        Raises:
            LlmError: ``INVALID_JSON_OUTPUT`` when the text is not one JSON
                document.
        """
        try:
            return json.loads(self.text)
        except ValueError as exc:
            raise LlmError(
                f"the streamed text is not JSON: {exc}",
                ErrorCode.INVALID_JSON_OUTPUT,
            ) from None

    def __repr__(self) -> str:
        return f"PartialJson({len(self.text)} chars)"
