"""PartialJson: every prefix of every JSON document gives a view consistent with
the document, the view never shows a value that may still change, and feeding
in pieces equals feeding at once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.structured import PartialJson

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
DUMPS = st.sampled_from(
    [
        {},
        {"ensure_ascii": False},
        {"indent": 2},
        {"separators": (",", ":")},
        {"separators": (" , ", " : "), "ensure_ascii": False},
    ]
)


def consistent(partial: Any, final: Any) -> bool:
    """Whether ``partial`` can be a view of ``final``: a string prefix, a subset
    of keys (each consistent), a prefix of items (each consistent; only the last
    may be partial), or an equal scalar."""
    if isinstance(final, str):
        return isinstance(partial, str) and final.startswith(partial)
    if isinstance(final, dict):
        return isinstance(partial, dict) and all(
            key in final and consistent(value, final[key])
            for key, value in partial.items()
        )
    if isinstance(final, list):
        return (
            isinstance(partial, list)
            and len(partial) <= len(final)
            and all(consistent(a, b) for a, b in zip(partial[:-1], final, strict=False))
            and (not partial or consistent(partial[-1], final[len(partial) - 1]))
        )
    return type(partial) is type(final) and partial == final


def complete_items_equal(partial: Any, final: Any) -> bool:
    """In a list view, every item but the last is final already."""
    if isinstance(final, list) and isinstance(partial, list):
        return all(a == b for a, b in zip(partial[:-1], final, strict=False)) and all(
            complete_items_equal(a, b) for a, b in zip(partial, final, strict=False)
        )
    if isinstance(final, dict) and isinstance(partial, dict):
        return all(complete_items_equal(v, final[k]) for k, v in partial.items())
    return True


@settings(max_examples=300, deadline=None)
@given(VALUES, DUMPS)
def test_every_prefix_gives_a_view_consistent_with_the_document(value, dumps):
    text = json.dumps(value, **dumps)
    final = json.loads(text)
    for end in range(len(text) + 1):
        view = PartialJson(text[:end])
        if view.has_value:
            assert consistent(view.value, final), (text[:end], view.value)
            assert complete_items_equal(view.value, final)
        if view.complete:
            assert view.value == final
    assert PartialJson(text).close() == final


@settings(max_examples=100, deadline=None)
@given(VALUES, st.lists(st.integers(min_value=1, max_value=7), min_size=1))
def test_feeding_in_pieces_equals_feeding_at_once(value, sizes):
    text = json.dumps(value)
    view = PartialJson()
    position = 0
    while position < len(text):
        step = sizes[position % len(sizes)]
        view.feed(text[position : position + step])
        position += step
        assert view.value == PartialJson(text[:position]).value
    assert view.text == text


@pytest.mark.parametrize(
    ("text", "shown", "has_value"),
    [
        ('{"city": "Par', {"city": "Par"}, True),
        ('{"city": "Paris", "n": 12', {"city": "Paris"}, True),
        ('{"city": "Paris", "n": 12}', {"city": "Paris", "n": 12}, True),
        ('{"ci', {}, True),
        ("[1, 2, tr", [1, 2], True),
        ("[1, 2, true", [1, 2, True], True),
        ('"a\\', "a", True),
        ('"a\\u00', "a", True),
        ('"a\\ud83d', "a", True),
        ('"a\\ud83d\\ude0', "a", True),
        ('"a\\ud83d\\ude00', "a\U0001f600", True),
        ("12", None, False),
        ("12 ", 12, True),
        ("-", None, False),
        ("nul", None, False),
        ("", None, False),
    ],
)
def test_cut_values_are_shown_only_when_they_cannot_change(text, shown, has_value):
    view = PartialJson(text)
    assert view.value == shown
    assert view.has_value is has_value


@pytest.mark.parametrize("text", ['{"a" 1', "[1,]", "01", "tx", '{"a": 1} x', "{1"])
def test_text_that_cannot_start_a_document_is_refused(text):
    with pytest.raises(LlmError) as caught:
        _ = PartialJson(text).value
    assert caught.value.code == ErrorCode.INVALID_JSON_OUTPUT


def test_close_is_strict():
    with pytest.raises(LlmError) as caught:
        PartialJson('{"a": 1').close()
    assert caught.value.code == ErrorCode.INVALID_JSON_OUTPUT
    assert PartialJson("12").close() == 12
