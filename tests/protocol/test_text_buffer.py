"""Tests for dsh_llm.protocol.text_buffer: TextBuffer gives back exactly what
was appended (surrogates included), compares without joining, and keeps few objects."""

from __future__ import annotations

import itertools
import sys

from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.protocol.text_buffer import TextBuffer

# Lone surrogates and astral characters included (st.text() excludes
# surrogates); repeated so that many draws pass the 256 fragments kept as they
# came and build pieces.
_fragments = st.tuples(
    st.lists(
        st.text(
            alphabet=st.characters(min_codepoint=0, max_codepoint=sys.maxunicode),
            max_size=6,
        ),
        max_size=30,
    ),
    st.integers(min_value=1, max_value=60),
).map(lambda drawn: drawn[0] * drawn[1])


def _filled(fragments: list[str]) -> TextBuffer:
    buffer = TextBuffer()
    for fragment in fragments:
        buffer.append(fragment)
    return buffer


@given(_fragments)
def test_value_is_the_concatenation(fragments: list[str]) -> None:
    buffer = _filled(fragments)
    expected = "".join(fragments)
    assert buffer.value() == expected
    assert len(buffer) == len(expected)
    assert buffer.matches(expected)
    # value() keeps its result; appending after it goes on from there.
    assert buffer.value() == expected
    buffer.append("\udc00")
    assert buffer.value() == expected + "\udc00"


@given(_fragments, st.data())
def test_matches_detects_any_difference(
    fragments: list[str], data: st.DataObject
) -> None:
    buffer = _filled(fragments)
    expected = "".join(fragments)
    other = data.draw(st.text(max_size=len(expected) + 2))
    assert buffer.matches(other) == (other == expected)
    if expected:
        position = data.draw(st.integers(0, len(expected) - 1))
        changed = chr((ord(expected[position]) + 1) % (sys.maxunicode + 1))
        altered = expected[:position] + changed + expected[position + 1 :]
        assert not buffer.matches(altered)
        assert not buffer.matches(expected[:-1])
        assert not buffer.matches(expected + "x")


def test_a_surrogate_pair_split_across_fragments_stays_two_code_points() -> None:
    # Joining the halves into one character is the translator's decision, not
    # the buffer's: it gives back the code points it was given.
    buffer = TextBuffer()
    for fragment in ["a\ud83d"] + ["\ude00"] + ["b"] * 300 + ["\ud800"]:
        buffer.append(fragment)
    text = buffer.value()
    assert text == "a\ud83d\ude00" + "b" * 300 + "\ud800"
    assert len(text) == 304


def test_a_million_fragments_become_few_pieces() -> None:
    buffer = TextBuffer()
    for index in range(1_000_000):
        buffer.append("ab" if index % 2 else "c")
    # At most 256 fragments as they came, and pieces each more than twice the
    # next: about log2 of the text in all.
    assert len(buffer._tail) < 256
    assert len(buffer._pieces) <= 20
    sizes = [len(piece) for piece in buffer._pieces]
    assert all(a > 2 * b for a, b in itertools.pairwise(sizes))
    assert len(buffer) == 1_500_000
    assert buffer.value() == "cab" * 500_000


def test_empty_fragments_keep_nothing() -> None:
    buffer = TextBuffer()
    for _ in range(10_000):
        buffer.append("")
    assert buffer._pieces == []
    assert buffer.value() == ""
    assert buffer.matches("")
    assert not buffer.matches("x")


def test_clear_empties_the_buffer() -> None:
    buffer = _filled(["x"] * 1000)
    buffer.clear()
    assert buffer.value() == ""
    assert len(buffer) == 0
    assert repr(buffer) == "<TextBuffer 0 chars>"
