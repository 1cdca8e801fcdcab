"""``TextBuffer``: an open block's text, appended fragment by fragment, joined once.

A block streams as fragments, a million one-character deltas included, and the
translator, the validator and the assembler each keep what an open block received
until its ``block-end``. Kept as one ``str`` per fragment, that costs about 60
bytes a fragment; kept as ``str`` at all, a single emoji makes CPython store the
whole text at 4 bytes a character. This buffer keeps the text as UTF-8 bytes.
Contracts callers may rely on:

- ``value()`` is exactly the concatenation of every fragment appended, in order,
  code point for code point: a lone surrogate comes back as it went in, a
  surrogate pair split across two fragments as its two halves, never joined
  (encoded with ``surrogatepass``).
- ``append`` costs amortised O(1) plus the fragment's length, whatever the number
  of fragments.
- Memory: the text's UTF-8 (about 1.1 bytes a character for mostly-ASCII text
  with some emoji), plus at most 256 fragments as they came. ``value()`` decodes
  it once into the ``str`` (the bytes are then dropped), and keeps that result: a
  second call is free; appending after it folds it back into bytes.
- ``matches(text)`` and ``prefix_of(text)`` compare with a ``str`` without
  building the joined copy; ``adopt(text)`` takes an equal ``str`` as the value
  itself (no second copy); ``TextBuffer.holding(text)`` starts from a ``str``
  it keeps as it is; ``len()`` is the number of code points; ``clear()`` drops
  the text.
- ``matches_utf8(pieces)`` compares with text given as UTF-8 pieces (a long
  text decoded a window at a time), without building either whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from typing import Final

__all__ = ["TextBuffer"]

_TAIL_FRAGMENTS: Final = 256
"""Fragments kept as they came before they are encoded onto the bytes."""
_WINDOW: Final = 16384
"""Code points of a compared ``str`` encoded at a time by ``matches``."""


class TextBuffer:
    """Text appended fragment by fragment (see the module docstring).

    Holds, in order: ``value()``'s last result (a ``str``), or the UTF-8 of the
    fragments spilled so far (never both), then the last fragments as they came.
    """

    __slots__ = ("_chars", "_data", "_tail", "_text")

    def __init__(self) -> None:
        self._text = ""
        self._data: bytes | bytearray = b""
        self._chars = 0
        """Code points in ``_data``."""
        self._tail: list[str] = []

    def append(self, fragment: str) -> None:
        """Add ``fragment`` at the end."""
        tail = self._tail
        tail.append(fragment)
        if len(tail) >= _TAIL_FRAGMENTS:
            self._spill()

    @classmethod
    def holding(cls, text: str) -> TextBuffer:
        """A buffer whose value is ``text`` itself: ``value()`` returns that
        very object (a string someone else keeps costs nothing more here)."""
        buffer = cls()
        buffer._text = text
        return buffer

    def _spill(self) -> None:
        piece = "".join(self._tail)
        self._tail = []
        if not piece:
            return
        if self._text:
            # Back to the compact form: the str is freed unless a caller kept it.
            self._data = self._text.encode("utf-8", "surrogatepass")
            self._chars = len(self._text)
            self._text = ""
        data = self._data
        if type(data) is bytes:
            # Made whole by ``of`` or a fold: mutable from its first append.
            self._data = data = bytearray(data)
        data += piece.encode("utf-8", "surrogatepass")
        self._chars += len(piece)

    def value(self) -> str:
        """The whole text so far."""
        if self._tail:
            self._spill()
        data = self._data
        if data:
            self._text = data.decode("utf-8", "surrogatepass")
            self._data = b""
            self._chars = 0
        return self._text

    def adopt(self, text: str) -> bool:
        """Whether ``text`` equals ``value()``; when it does, the buffer holds
        ``text`` itself from then on (its own copy is dropped), so ``value()``
        returns that very object and builds nothing."""
        if not self.matches(text):
            return False
        self._text = text
        self._data = b""
        self._chars = 0
        self._tail = []
        return True

    def matches(self, text: str) -> bool:
        """Whether ``text`` equals ``value()``; builds no joined copy."""
        return len(text) == len(self) and self._starts(text)

    def prefix_of(self, text: str) -> bool:
        """Whether ``text`` starts with ``value()``; builds no joined copy."""
        return len(text) >= len(self) and self._starts(text)

    def _starts(self, text: str) -> bool:
        head = self._text
        if head and not text.startswith(head):
            return False
        offset = len(head)
        data = self._data
        if data:
            # Equal code points have equal bytes: compare a window at a time.
            end = offset + self._chars
            at = 0
            while offset < end:
                stop = min(offset + _WINDOW, end)
                piece = text[offset:stop].encode("utf-8", "surrogatepass")
                if not data.startswith(piece, at):
                    return False
                at += len(piece)
                offset = stop
            if at != len(data):
                return False
        for part in self._tail:
            if not text.startswith(part, offset):
                return False
            offset += len(part)
        return True

    def matches_utf8(self, pieces: Iterable[bytes]) -> bool:
        """Whether the concatenation of ``pieces`` is the UTF-8 of ``value()``
        (``surrogatepass``: a code point sequence has exactly one); builds no
        joined copy of either, and stops at the first piece that differs."""
        return _same_bytes(iter(pieces), self._utf8())

    def _utf8(self) -> Iterator[bytes | memoryview]:
        """The text's UTF-8, in order, as pieces (nothing is joined)."""
        text = self._text
        for at in range(0, len(text), _WINDOW):
            yield text[at : at + _WINDOW].encode("utf-8", "surrogatepass")
        if self._data:
            with memoryview(self._data) as view:  # released if abandoned
                yield view
        for fragment in self._tail:  # one at a time: none of them joined
            yield fragment.encode("utf-8", "surrogatepass")

    def clear(self) -> None:
        """Drop the text: the buffer is empty again."""
        self._text = ""
        self._data = b""
        self._chars = 0
        self._tail = []

    def __len__(self) -> int:
        """The number of code points appended."""
        return len(self._text) + self._chars + sum(map(len, self._tail))

    def __repr__(self) -> str:
        return f"<TextBuffer {len(self)} chars>"


def _same_bytes(
    first: Iterator[bytes | memoryview], second: Iterator[bytes | memoryview]
) -> bool:
    """Whether two sequences of pieces hold the same bytes, however cut."""
    a = b = memoryview(b"")
    while True:
        while not a:
            piece = next(first, None)
            if piece is None:
                break
            a = memoryview(piece)
        while not b:
            piece = next(second, None)
            if piece is None:
                break
            b = memoryview(piece)
        if not a or not b:
            return not a and not b
        size = min(len(a), len(b))
        if a[:size] != b[:size]:
            return False
        a, b = a[size:], b[size:]
