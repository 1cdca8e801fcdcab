"""Tests for dsh_llm.protocol.text_buffer: TextBuffer gives back exactly what
was appended (lone surrogates and astral characters included), compares without
joining, keeps the text as compact UTF-8, and adopts an equal string."""

from __future__ import annotations

import itertools
import sys
import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.protocol.text_buffer import TextBuffer

# Any code point, with surrogate halves drawn often (a plain st.characters()
# draw rarely gives one): lone ones, and the two halves of a pair in turn.
_char = st.one_of(
    st.characters(min_codepoint=0, max_codepoint=sys.maxunicode),
    st.sampled_from(["\ud83d", "\ude80", "\ud800", "\udfff", "\U0001f680", "é"]),
)
# Repeated so that many draws pass the 256 fragments kept as they came and
# reach the bytes.
_fragments = st.tuples(
    st.lists(st.text(alphabet=_char, max_size=6), max_size=30),
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
    assert len(buffer) == len(expected)
    assert buffer.matches(expected)
    assert buffer.prefix_of(expected)
    assert buffer.value() == expected
    # value() keeps its result; appending after it goes on from there, past
    # the fragments kept as they came too.
    assert buffer.value() == expected
    buffer.append("\udc00")
    assert buffer.value() == expected + "\udc00"
    more = ["a\ud83d", "\ude80", "\U0001f680"] * 100
    for fragment in more:
        buffer.append(fragment)
    whole = expected + "\udc00" + "".join(more)
    assert len(buffer) == len(whole)
    assert buffer.matches(whole)
    assert buffer.value() == whole


@given(_fragments)
def test_holding_keeps_the_string_itself(fragments: list[str]) -> None:
    expected = "".join(fragments)
    buffer = TextBuffer.holding(expected)
    assert len(buffer) == len(expected)
    assert buffer.matches(expected)
    assert buffer.value() is expected
    buffer.append("x")
    assert buffer.value() == expected + "x"


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (positions taken modulo its length + 1)."""
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    return [data[a:b] for a, b in itertools.pairwise([0, *points, len(data)])]


@given(_fragments, st.data())
def test_matches_utf8_compares_pieces_however_cut(
    fragments: list[str], data: st.DataObject
) -> None:
    buffer = _filled(fragments)
    expected = "".join(fragments).encode("utf-8", "surrogatepass")
    cuts = data.draw(st.lists(st.integers(0, 10_000), max_size=8))
    assert buffer.matches_utf8(_cut(expected, cuts))
    assert not buffer.matches_utf8(_cut(expected + b"x", cuts))
    if expected:
        assert not buffer.matches_utf8(_cut(expected[:-1], cuts))
        position = data.draw(st.integers(0, len(expected) - 1))
        altered = bytearray(expected)
        altered[position] ^= 0x01
        assert not buffer.matches_utf8(_cut(bytes(altered), cuts))
    # The same after value(), with the text held as a str.
    assert buffer.value() == "".join(fragments)
    assert buffer.matches_utf8(_cut(expected, cuts))
    assert TextBuffer.holding(buffer.value()).matches_utf8([expected])


def test_a_comparison_stopped_early_leaves_the_bytes_free_to_grow() -> None:
    buffer = _filled(["\U0001f680abc"] * 1000)
    assert buffer._data  # the bytes, viewed while compared
    assert not buffer.matches_utf8([b"x"])
    for _ in range(300):
        buffer.append("d")  # a view still held would make this a BufferError
    assert buffer.value() == "\U0001f680abc" * 1000 + "d" * 300


@given(_fragments, st.data())
def test_matches_and_prefix_of_detect_any_difference(
    fragments: list[str], data: st.DataObject
) -> None:
    buffer = _filled(fragments)
    expected = "".join(fragments)
    other = data.draw(st.text(alphabet=_char, max_size=len(expected) + 2))
    assert buffer.matches(other) == (other == expected)
    assert buffer.prefix_of(other) == other.startswith(expected)
    assert buffer.prefix_of(expected + other)
    if expected:
        position = data.draw(st.integers(0, len(expected) - 1))
        changed = chr((ord(expected[position]) + 1) % (sys.maxunicode + 1))
        altered = expected[:position] + changed + expected[position + 1 :]
        assert not buffer.matches(altered)
        assert not buffer.prefix_of(altered + "x")
        assert not buffer.matches(expected[:-1])
        assert not buffer.prefix_of(expected[:-1])
        assert not buffer.matches(expected + "x")
    # Nothing was joined or decoded by the comparisons.
    assert buffer.value() == expected


@given(_fragments, st.data())
def test_adopt_holds_an_equal_string_itself(
    fragments: list[str], data: st.DataObject
) -> None:
    buffer = _filled(fragments)
    expected = "".join(fragments)
    other = data.draw(st.text(alphabet=_char, max_size=4))
    if other != expected:
        assert not buffer.adopt(other)
        assert buffer.value() == expected
    equal = "".join(["", *fragments])  # another object when not interned
    assert buffer.adopt(equal)
    assert buffer.value() is equal
    buffer.append("\ud800")
    assert buffer.value() == expected + "\ud800"


def test_a_surrogate_pair_split_across_fragments_stays_two_code_points() -> None:
    # Joining the halves into one character is the translator's decision, not
    # the buffer's: it gives back the code points it was given, on both sides
    # of the fragments it encoded.
    fragments = ["a\ud83d"] + ["\ude00"] + ["b"] * 300 + ["\ud800"]
    fragments += ["\ud83d"] * 255 + ["\ude00"]
    buffer = _filled(fragments)
    text = buffer.value()
    assert text == "".join(fragments)
    assert len(text) == 560
    assert "\U0001f600" not in text


def test_the_text_is_kept_as_utf8() -> None:
    # Mostly ASCII with an emoji every fifth fragment: a str of it takes 4
    # bytes a character, its UTF-8 under 1.1.
    fragments = [" token" if i % 5 else " \U0001f680" for i in range(200_000)]
    utf8 = sum(len(fragment.encode()) for fragment in fragments)
    tracemalloc.start()
    try:
        buffer = _filled(fragments)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        text = buffer.value()
        decoding = tracemalloc.get_traced_memory()[1]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    string = sys.getsizeof(text)
    assert string > 3.5 * utf8  # the str is the wide one
    # The bytes (a bytearray grows by an eighth) and the last fragments.
    assert held <= 1.15 * utf8 + 64 * 1024
    # Decoding needs the bytes and the str: CPython's decoder reserves a code
    # unit per byte, a narrow buffer then a wide one (1.1 strings here; pages
    # never written cost no RSS). Then only the str is kept.
    assert decoding <= 2 * utf8 + 1.15 * string + 64 * 1024
    assert after <= string + 64 * 1024
    assert text == "".join(fragments)


def test_an_append_after_value_folds_the_str_back_into_bytes() -> None:
    buffer = _filled(["\U0001f680abc"] * 1000)
    first = buffer.value()
    for _ in range(256):
        buffer.append("d")
    # The str value() returned is no longer held: only its bytes are.
    assert buffer._text == ""
    assert len(buffer._data) == len(first.encode()) + 256
    assert buffer.value() == first + "d" * 256


def test_empty_fragments_keep_nothing() -> None:
    buffer = TextBuffer()
    for _ in range(10_000):
        buffer.append("")
    assert len(buffer._data) == 0
    assert len(buffer._tail) < 256
    assert buffer.value() == ""
    assert buffer.matches("")
    assert buffer.prefix_of("x")
    assert not buffer.matches("x")


def test_clear_empties_the_buffer() -> None:
    buffer = _filled(["x"] * 1000)
    buffer.clear()
    assert buffer.value() == ""
    assert len(buffer) == 0
    assert repr(buffer) == "<TextBuffer 0 chars>"
    buffer = _filled(["x"] * 10)
    buffer.value()
    buffer.clear()
    assert buffer.value() == ""
