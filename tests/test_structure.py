"""dsh_llm.converter: the strict leaves, the one wording, the key-path flattener;
and that serde and config speak it alike."""

from __future__ import annotations

import enum
import pickle
from typing import Any
from typing import Literal
from typing import NewType

import attrs
import pytest
from cattrs.errors import ClassValidationError

from dsh_llm.config import ConfigError
from dsh_llm.config import structure_config
from dsh_llm.converter import StructureError
from dsh_llm.converter import describe
from dsh_llm.converter import join_key
from dsh_llm.converter import problems
from dsh_llm.converter import show
from dsh_llm.converter import strict_converter
from dsh_llm.converter import value_kind
from dsh_llm.errors import LlmError
from dsh_llm.serde import chunk_from_dict
from dsh_llm.serde import message_from_dict


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


Name = NewType("Name", str)


@attrs.frozen
class Item:
    text: str


@attrs.frozen
class Holder:
    count: int
    ratio: float
    flag: bool
    items: tuple[Item, ...]
    label: str | None = None


def _camel(_: Any, attribute: str) -> str:
    head, *rest = attribute.split("_")
    return head + "".join(part.title() for part in rest)


def _problems(cls: type[Any], data: Any) -> list[tuple[str, str]]:
    with pytest.raises(ClassValidationError) as caught:
        strict_converter().structure(data, cls)
    return problems(caught.value, "", key_of=_camel)


# --- leaves: nothing is coerced ---------------------------------------------------


@pytest.mark.parametrize(
    ("t", "value"),
    [(str, "s"), (int, 3), (float, 3), (float, 2.5), (bool, False), (Any, object)],
)
def test_a_leaf_takes_its_own_type_as_is(t: Any, value: Any) -> None:
    assert strict_converter().structure(value, t) is value


@pytest.mark.parametrize(
    ("t", "value", "detail"),
    [
        (int, True, "must be an integer, got a boolean"),
        (int, 1.0, "must be an integer, got a number"),
        (int, "1", "must be an integer, got a string"),
        (float, True, "must be a number, got a boolean"),
        (float, "1.5", "must be a number, got a string"),
        (str, 1, "must be a string, got an integer"),
        (str, b"x", "must be a string, got bytes"),
        (bool, 1, "must be a boolean, got an integer"),
        (bool, None, "must be a boolean, got null"),
    ],
)
def test_a_leaf_refuses_every_other_type(t: Any, value: Any, detail: str) -> None:
    with pytest.raises(TypeError, match=f"^{detail}$"):
        strict_converter().structure(value, t)


def test_containers_check_their_own_shape_and_every_item() -> None:
    conv = strict_converter()
    assert conv.structure(["a", "b"], tuple[str, ...]) == ("a", "b")
    assert conv.structure([1, "b"], tuple[int, str]) == (1, "b")
    assert conv.structure(["a", "a"], frozenset[str]) == frozenset({"a"})
    assert conv.structure({"k": 1}, dict[str, int]) == {"k": 1}
    assert conv.structure("fast", Mode) is Mode.FAST
    assert conv.structure(None, int | None) is None
    assert _problems(Holder, {"count": 1, "ratio": 1, "flag": True, "items": "x"}) == [
        ("items", "must be a list of mappings, got a string")
    ]


# --- the wording ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "text"),
    [
        (str, "a string"),
        (Name, "a string"),
        (int | None, "an integer or null"),
        (int | str, "an integer or a string"),
        (tuple[str, ...], "a list of strings"),
        (list[Item], "a list of mappings"),
        (tuple[Item | None, ...], "a list of mappings or null"),
        (tuple[int, str], "a list of 2 items"),
        (dict[str, int], "a mapping"),
        (Item, "a mapping"),
        (Literal["a", 1, True, None], 'one of "a", 1, true, null'),
        (Mode, 'one of "fast", "slow"'),
        (Any, "any value"),
    ],
)
def test_describe_says_what_a_type_takes(t: Any, text: str) -> None:
    assert describe(t) == text


def test_show_writes_a_choice_as_json_and_yaml_do() -> None:
    assert [show(v) for v in ("x", True, False, None, 3, 1.5)] == [
        '"x"',
        "true",
        "false",
        "null",
        "3",
        "1.5",
    ]


def test_value_kind_never_shows_the_value() -> None:
    assert value_kind("sk-secret") == "a string"
    assert value_kind(("sk-secret",)) == "a list"


def test_join_key_leaves_out_an_empty_side() -> None:
    assert join_key("", "a") == "a"
    assert join_key("a", "b") == "a.b"
    assert join_key("a", "") == "a"


# --- the flattener ----------------------------------------------------------------


def test_every_problem_is_keyed_by_its_path_with_list_indexes() -> None:
    found = _problems(
        Holder,
        {
            "count": True,
            "ratio": "x",
            "items": [{"text": "ok"}, {"text": 2}, {}],
            "label": 5,
            "extra_key": 1,
        },
    )
    assert found == [
        ("count", "must be an integer, got a boolean"),
        ("ratio", "must be a number, got a string"),
        ("flag", "is required (expected a boolean)"),
        ("items[1].text", "must be a string, got an integer"),
        ("items[2].text", "is required (expected a string)"),
        ("label", "must be a string or null, got an integer"),
        (
            "extra_key",
            'is not a known key (expected one of "count", "ratio", "flag", "items", '
            '"label")',
        ),
    ]


def test_a_path_prefix_and_the_key_spelling_are_the_callers() -> None:
    with pytest.raises(ClassValidationError) as caught:
        strict_converter().structure({"text": 1}, Item)
    assert problems(caught.value, "$", key_of=lambda _, name: name.upper()) == [
        ("$.TEXT", "must be a string, got an integer")
    ]


def test_a_structure_error_carries_its_problems_as_data() -> None:
    error = StructureError([("a.b", "must be a string, got null"), ("", "is bad")])
    assert str(error) == "a.b: must be a string, got null; is bad"
    assert problems(error, "x", key_of=_camel) == [
        ("x.a.b", "must be a string, got null"),
        ("x", "is bad"),
    ]
    assert pickle.loads(pickle.dumps(error)).problems == error.problems


# --- one wording for serde and config ---------------------------------------------


@attrs.frozen(kw_only=True)
class TextDeltaConfig:
    """A config class with the fields of a ``text-delta`` chunk."""

    index: int
    text: str
    citations: tuple[Any, ...] = ()


@attrs.frozen(kw_only=True)
class ToolCallDeltaConfig:
    """A config class with the fields of a ``tool-call-delta`` chunk."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments_delta: str


@attrs.frozen(kw_only=True)
class MessageConfig:
    """A config class with the fields of a message (content items as mappings)."""

    id: str
    role: str
    content: tuple[TextDeltaConfig, ...]
    source: Any


def _serde_detail(read: Any, data: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(LlmError) as caught:
        read(data)
    message = caught.value.message
    path, _, detail = message.partition(": ")[2].partition(": ")
    return path.removeprefix("$."), detail


def _config_detail(cls: type[Any], data: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ConfigError) as caught:
        structure_config(cls, data)
    (problem,) = caught.value.problems
    return problem


_BAD_VALUES: dict[str, list[Any]] = {
    "index": [1.5, True, None, "x", [], {}],
    "text": [1, 1.5, True, None, [], {}],
    "name": [1, 1.5, True, [], {}],
}


@pytest.mark.parametrize(
    ("key", "value"),
    [(key, value) for key in ("index", "text") for value in _BAD_VALUES[key]],
)
def test_a_bad_value_gets_the_same_detail_from_serde_and_config(
    key: str, value: Any
) -> None:
    data = {"index": 0, "text": "t", key: value}

    serde = _serde_detail(chunk_from_dict, {"type": "text-delta", **data})
    config = _config_detail(TextDeltaConfig, data)
    assert serde == config
    assert serde[1].startswith("must be ")


@pytest.mark.parametrize("value", _BAD_VALUES["name"])
def test_an_optional_field_gets_the_same_detail_from_serde_and_config(
    value: Any,
) -> None:
    data = {"index": 0, "name": value, "argumentsDelta": ""}

    serde = _serde_detail(chunk_from_dict, {"type": "tool-call-delta", **data})
    assert serde == _config_detail(ToolCallDeltaConfig, data)
    assert serde == ("name", f"must be a string or null, got {value_kind(value)}")


@pytest.mark.parametrize(
    "data",
    [
        {"index": 0},
        {"text": "t"},
        {"index": 0, "text": "t", "txt": "t"},
        {"index": 0, "text": "t", "Text": "t"},
    ],
    ids=["missing-text", "missing-index", "unknown-key", "unknown-key-hint"],
)
def test_a_missing_or_unknown_key_gets_the_same_detail_from_serde_and_config(
    data: dict[str, Any],
) -> None:
    serde = _serde_detail(chunk_from_dict, {"type": "text-delta", **data})
    assert serde == _config_detail(TextDeltaConfig, data)


@pytest.mark.parametrize(
    ("content", "path"),
    [
        ("hi", "content"),
        ([{"text": 1}], "content[0].text"),
        ([{"text": "a"}, []], "content[1]"),
    ],
)
def test_a_nested_path_gets_the_same_key_and_detail_from_serde_and_config(
    content: Any, path: str
) -> None:
    data: dict[str, Any] = {"id": "m", "role": "user", "source": {"kind": "user"}}
    serde_content = (
        [
            {"type": "text", **item} if isinstance(item, dict) else item
            for item in content
        ]
        if isinstance(content, list)
        else content
    )
    config_content = (
        [{"index": 0, **item} if isinstance(item, dict) else item for item in content]
        if isinstance(content, list)
        else content
    )

    serde = _serde_detail(message_from_dict, {**data, "content": serde_content})
    config = _config_detail(MessageConfig, {**data, "content": config_content})
    assert serde == config
    assert serde[0] == path
