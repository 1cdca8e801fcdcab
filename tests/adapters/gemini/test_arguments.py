"""Streamed function-call arguments (dsh_llm.adapters.gemini.arguments): Vertex
AI's ``partialArgs`` (JSON-path addressed values) written as JSON text as they
arrive, and every path the text already streamed cannot take refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.adapters.gemini.arguments import StreamedArguments
from dsh_llm.adapters.gemini.arguments import json_path
from dsh_llm.serde import compact_json


@pytest.mark.parametrize(
    ("path", "segments"),
    [
        ("$.a", ("a",)),
        ("$.foo.bar[0].data", ("foo", "bar", 0, "data")),
        ("$['a.b'][12]", ("a.b", 12)),
        ('$["say \\"hi\\""]', ('say "hi"',)),
        ("$['it\\'s']", ("it's",)),
        ("$['\\u00e9t\\u00e9']", ("été",)),
        ("$.été", ("été",)),
        ("$", ()),
    ],
)
def test_a_normalized_path_is_read(path: str, segments: tuple[Any, ...]) -> None:
    assert json_path(path) == segments


@pytest.mark.parametrize(
    "path", ["a.b", "$..a", "$.a[*]", "$[-1]", "$.a[0:2]", "$['a]", "$.", 3, None]
)
def test_any_other_path_is_refused(path: object) -> None:
    with pytest.raises(ValueError, match="jsonPath"):
        json_path(path)


def _text(*partials: dict[str, Any], args: dict[str, Any] | None = None) -> str:
    arguments = StreamedArguments()
    out = "" if args is None else arguments.add_args(args)
    out += "".join(arguments.add(partial) for partial in partials)
    return out + arguments.close()


def test_pieces_of_a_string_join_and_every_value_type_is_written() -> None:
    text = _text(
        {"jsonPath": "$.s", "stringValue": 'a "q', "willContinue": True},
        {"jsonPath": "$.s", "stringValue": '"\n'},
        {"jsonPath": "$.n", "numberValue": 2.5},
        {"jsonPath": "$.i", "numberValue": 7},
        {"jsonPath": "$.b", "boolValue": False},
        {"jsonPath": "$.z", "nullValue": "NULL_VALUE"},
        {"jsonPath": "$.y", "nullValue": None},
    )
    assert json.loads(text) == {
        "s": 'a "q"\n',
        "n": 2.5,
        "i": 7,
        "b": False,
        "z": None,
        "y": None,
    }
    assert text == '{"s":"a \\"q\\"\\n","n":2.5,"i":7,"b":false,"z":null,"y":null}'


def test_a_string_ends_with_a_valueless_entry_or_when_another_path_comes() -> None:
    assert (
        _text(
            {"jsonPath": "$.s", "stringValue": "ab", "willContinue": True},
            {"jsonPath": "$.s", "willContinue": False},
        )
        == '{"s":"ab"}'
    )
    assert (
        _text(
            {"jsonPath": "$.s", "stringValue": "ab", "willContinue": True},
            {"jsonPath": "$.t", "stringValue": "c"},
        )
        == '{"s":"ab","t":"c"}'
    )
    assert (
        _text({"jsonPath": "$.s", "stringValue": "ab", "willContinue": True})
        == '{"s":"ab"}'
    )


def test_whole_args_are_members_and_nothing_at_all_is_no_text() -> None:
    assert (
        _text({"jsonPath": "$.c", "numberValue": 1}, args={"a": {"b": [1, 2]}})
        == '{"a":{"b":[1,2]},"c":1}'
    )
    assert _text() == ""


@pytest.mark.parametrize(
    ("partials", "what"),
    [
        ([{"jsonPath": "$", "numberValue": 1}], "whole arguments"),
        ([{"jsonPath": "$[0]", "numberValue": 1}], "not a JSON object"),
        ([{"jsonPath": "$.a", "numberValue": 1}] * 2, "already written"),
        (
            [
                {"jsonPath": "$.a.x", "numberValue": 1},
                {"jsonPath": "$.b", "numberValue": 1},
                {"jsonPath": "$.a.y", "numberValue": 1},
            ],
            "already written",
        ),
        (
            [
                {"jsonPath": "$.a[0]", "numberValue": 1},
                {"jsonPath": "$.a[2]", "numberValue": 1},
            ],
            "out of order",
        ),
        (
            [
                {"jsonPath": "$.a.x", "numberValue": 1},
                {"jsonPath": "$.a[1]", "numberValue": 1},
            ],
            "index into an object",
        ),
        (
            [
                {"jsonPath": "$.a[0]", "numberValue": 1},
                {"jsonPath": "$.a.x", "numberValue": 1},
            ],
            "name into an array",
        ),
        ([{"jsonPath": "$.a"}], "exactly one value"),
        ([{"jsonPath": "$.a", "numberValue": 1, "boolValue": True}], "exactly one"),
        ([{"jsonPath": "$.a", "numberValue": float("nan")}], "finite number"),
        ([{"jsonPath": "$.a", "numberValue": True}], "finite number"),
        ([{"jsonPath": "$.a", "stringValue": 5}], "not a string"),
        ([{"jsonPath": "$.a", "boolValue": "yes"}], "not a boolean"),
        ([{"jsonPath": "$.a", "nullValue": 0}], "not null"),
        ([{"jsonPath": "$.a", "numberValue": 1, "willContinue": "no"}], "willContinue"),
        (
            [
                {"jsonPath": "$.s", "stringValue": "a", "willContinue": True},
                {"jsonPath": "$.s", "numberValue": 1},
            ],
            "another type",
        ),
        (["$.a"], "not an object"),
    ],
)
def test_what_the_text_streamed_cannot_take_is_refused(
    partials: list[Any], what: str
) -> None:
    arguments = StreamedArguments()
    *before, last = partials
    for partial in before:
        arguments.add(partial)
    with pytest.raises(ValueError, match=what):
        arguments.add(last)


# Objects the paths can describe: no empty object or array (no partialArgs value
# holds one), member names of any text.
_leaf = st.one_of(
    st.text(max_size=6),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
_value = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, min_size=1, max_size=3)
        | st.dictionaries(st.text(max_size=4), inner, min_size=1, max_size=3)
    ),
    max_leaves=12,
)
_arguments = st.dictionaries(st.text(max_size=4), _value, min_size=1, max_size=4)


def _path(segments: list[Any]) -> str:
    return "$" + "".join(
        f"[{s}]" if type(s) is int else f"[{json.dumps(s)}]" for s in segments
    )


def _partials(value: Any, at: list[Any], cuts: st.DataObject) -> list[dict[str, Any]]:
    """``value``'s partialArgs in document order, strings cut in pieces."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _partials(v, [*at, k], cuts)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _partials(v, [*at, i], cuts)]
    path = _path(at)
    if isinstance(value, str):
        sizes = cuts.draw(st.lists(st.integers(0, 3), max_size=3))
        pieces, rest = [], value
        for size in sizes:
            pieces.append(rest[:size])
            rest = rest[size:]
        pieces.append(rest)
        return [
            {
                "jsonPath": path,
                "stringValue": piece,
                "willContinue": n < len(pieces) - 1,
            }
            for n, piece in enumerate(pieces)
        ]
    if value is None:
        return [{"jsonPath": path, "nullValue": None}]
    if isinstance(value, bool):
        return [{"jsonPath": path, "boolValue": value}]
    return [{"jsonPath": path, "numberValue": value}]


@given(_arguments, st.data())
def test_any_object_sent_in_document_order_is_its_compact_json(
    value: dict[str, Any], cuts: st.DataObject
) -> None:
    text = _text(*_partials(value, [], cuts))
    assert text == compact_json(value)
