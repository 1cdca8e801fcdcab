"""``TextBuffer``: an open block's text, appended fragment by fragment, joined once.

A block streams as fragments, a million one-character deltas included, and the
translator, the validator and the assembler each keep what an open block received
until its ``block-end``. Kept as one ``str`` object per fragment, that costs about
60 bytes per fragment on top of the text; this buffer keeps the text itself plus
a constant. Contracts callers may rely on:

- ``value()`` is exactly the concatenation of every fragment appended, in order,
  code point for code point: fragments stay ``str`` (never encoded), so a lone
  surrogate or a surrogate pair split across two fragments comes back as it went in.
- ``append`` costs amortised O(1) plus the fragment's length, whatever the number
  of fragments.
- Memory: the text, plus at most 256 fragments as they came and about log2(n)
  larger pieces; ``value()`` briefly needs a second copy of the text, and keeps
  its result as the one piece (a second call is free).
- ``matches(text)`` compares with a ``str`` without building the joined copy;
  ``len()`` is the number of code points; ``clear()`` drops the text.
"""

from __future__ import annotations

from typing import Final

__all__ = ["TextBuffer"]

_TAIL_FRAGMENTS: Final = 256
"""Fragments kept as they came before they are joined into one piece."""


class TextBuffer:
    """Text appended fragment by fragment (see the module docstring).

    The fragments beyond the last 256 are joined into pieces, each more than
    twice as long as the next, so a fragment is copied about log2(n) times at
    most and the pieces are few.
    """

    __slots__ = ("_pieces", "_tail")

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._tail: list[str] = []

    def append(self, fragment: str) -> None:
        """Add ``fragment`` at the end."""
        tail = self._tail
        tail.append(fragment)
        if len(tail) >= _TAIL_FRAGMENTS:
            self._spill()

    def _spill(self) -> None:
        piece = "".join(self._tail)
        self._tail = []
        if not piece:
            return
        pieces = self._pieces
        # Merge the last pieces that are not more than twice the new one, with
        # one join, so the lengths keep falling geometrically.
        size = len(piece)
        start = len(pieces)
        while start and len(pieces[start - 1]) <= 2 * size:
            start -= 1
            size += len(pieces[start])
        if start < len(pieces):
            piece = "".join([*pieces[start:], piece])
            del pieces[start:]
        pieces.append(piece)

    def value(self) -> str:
        """The whole text so far."""
        pieces = self._pieces
        if self._tail or len(pieces) > 1:
            text = "".join([*pieces, *self._tail])
            self._pieces = [text] if text else []
            self._tail = []
            return text
        return pieces[0] if pieces else ""

    def matches(self, text: str) -> bool:
        """Whether ``text`` equals ``value()``; builds no joined copy."""
        if len(text) != len(self):
            return False
        offset = 0
        for part in (*self._pieces, *self._tail):
            if not text.startswith(part, offset):
                return False
            offset += len(part)
        return True

    def clear(self) -> None:
        """Drop the text: the buffer is empty again."""
        self._pieces = []
        self._tail = []

    def __len__(self) -> int:
        """The number of code points appended."""
        return sum(map(len, self._pieces)) + sum(map(len, self._tail))

    def __repr__(self) -> str:
        return f"<TextBuffer {len(self)} chars>"
