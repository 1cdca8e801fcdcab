"""Structured output into the user's own types (issue 29, item 2): a pydantic
model, a dataclass or a TypedDict as ``response_format``, its JSON Schema sent
over a real socket, the answer read back into an instance, and a clear
``INVALID_JSON_OUTPUT`` naming the path of the first mismatch."""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated
from typing import Any
from typing import Literal
from typing import NotRequired

import pytest
from typing_extensions import TypedDict  # pydantic wants it before Python 3.12

from dsh_llm import GenerateOptions
from dsh_llm import ResponseFormat
from dsh_llm import collect
from dsh_llm import parse_json
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.structured import json_schema_of
from dsh_llm.structured import read_as
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_body

from ..adapters.chat_chunks import finish
from ..adapters.chat_chunks import text

ROOT = Path(__file__).resolve().parent.parent.parent


class Unit(enum.Enum):
    CELSIUS = "C"
    FAHRENHEIT = "F"


@dataclasses.dataclass
class Point:
    lat: float
    lon: float


@dataclasses.dataclass
class City:
    """A city."""

    name: Annotated[str, "The city's name"]
    population: int
    where: Point
    tags: list[str] = dataclasses.field(default_factory=list)
    unit: Unit | None = None


class Movie(TypedDict):
    title: str
    year: NotRequired[int]
    genre: Literal["drama", "comedy"]


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node]


CITY_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The city's name"},
        "population": {"type": "integer"},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "unit": {"anyOf": [{"enum": ["C", "F"]}, {"type": "null"}]},
    },
    "required": ["name", "population", "where"],
    "additionalProperties": False,
}

PARIS = {
    "name": "Paris",
    "population": 2102650,
    "where": {"lat": 48.86, "lon": 2},
    "unit": "C",
}


def test_a_dataclass_defines_its_json_schema():
    assert json_schema_of(City) == CITY_SCHEMA


def test_a_typeddict_defines_its_json_schema():
    assert json_schema_of(Movie) == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "year": {"type": "integer"},
            "genre": {"enum": ["drama", "comedy"]},
        },
        "required": ["title", "genre"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("tp", "schema"),
    [
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (
            set[str],
            {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        ),
        (
            dict[str, float],
            {"type": "object", "additionalProperties": {"type": "number"}},
        ),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Any, {}),
        (None, {"type": "null"}),
    ],
)
def test_annotations_map_to_json_schema(tp, schema):
    assert json_schema_of(tp) == schema


def test_types_without_a_json_shape_are_refused():
    with pytest.raises(TypeError, match="refers to itself"):
        json_schema_of(Node)
    with pytest.raises(TypeError, match="keys are strings"):
        json_schema_of(dict[int, str])


def test_a_type_as_response_format_sends_its_schema_named_after_it():
    options = GenerateOptions.from_prompt("m", "Paris?", response_format=City)
    assert options.response_format == ResponseFormat(schema=CITY_SCHEMA, name="City")
    strict = ResponseFormat.from_type(Movie, name="film", strict=True)
    assert (strict.name, strict.strict) == ("film", True)
    with pytest.raises(TypeError, match="pydantic model, dataclass or TypedDict"):
        GenerateOptions.from_prompt("m", "Paris?", response_format=int)
    with pytest.raises(TypeError, match="needs a pydantic model"):
        ResponseFormat.from_type(list[int])


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


def _answer(server: LoopbackServer, value: Any) -> None:
    encoded = json.dumps(value)
    pieces = [encoded[i : i + 9] for i in range(0, len(encoded), 9)]
    server.enqueue(Reply(body=sse_body([*(text(p) for p in pieces), finish()])))


def test_the_reply_is_read_into_the_dataclass(server):
    _answer(server, PARIS)
    options = GenerateOptions.from_prompt(
        "qwen3", "Paris, as JSON", response_format=City
    )
    with OpenAICompatAdapter(server.url) as adapter:
        reply = collect(adapter.stream(options))
    sent = server.requests[0].json()["response_format"]
    assert sent == {
        "type": "json_schema",
        "json_schema": {"name": "City", "schema": CITY_SCHEMA, "strict": False},
    }
    city = reply.parsed(City)
    assert city == City(
        name="Paris",
        population=2102650,
        where=Point(lat=48.86, lon=2.0),
        unit=Unit.CELSIUS,
    )
    assert isinstance(city.where.lon, float)
    assert parse_json(reply, City) == city
    assert reply.parsed() == PARIS  # no type: the JSON value


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {**PARIS, "population": "two million"},
            "$.population: must be integer, got string",
        ),
        ({**PARIS, "where": {"lat": 48.86}}, "$.where.lon: is required"),
        ({**PARIS, "tags": ["a", 3]}, "$.tags[1]: must be string, got integer"),
        ({**PARIS, "unit": "K"}, "$.unit: must be one of ['C', 'F']"),
        ({**PARIS, "mayor": "x"}, "$.mayor: is not a field of City"),
        (["Paris"], "$: must be object, got array"),
    ],
)
def test_a_reply_that_does_not_fit_names_the_first_mismatch(server, answer, message):
    _answer(server, answer)
    options = GenerateOptions.from_prompt("qwen3", "Paris", response_format=City)
    with OpenAICompatAdapter(server.url) as adapter:
        reply = collect(adapter.stream(options))
    with pytest.raises(LlmError) as caught:
        reply.parsed(City)
    assert caught.value.code == ErrorCode.INVALID_JSON_OUTPUT
    assert caught.value.message == f"the answer does not fit City: {message}"


def test_a_typeddict_and_generic_types_are_read_too():
    movies = (
        '[{"title": "Amélie", "genre": "comedy"}, '
        '{"title": "Heat", "year": 1995, "genre": "drama"}]'
    )
    assert parse_json(movies, list[Movie]) == json.loads(movies)
    with pytest.raises(LlmError, match=r"\$\[0\]\.genre: must be one of"):
        parse_json('[{"title": "x", "genre": "horror"}]', list[Movie])
    assert read_as(tuple[int, str], [1, "a"]) == (1, "a")
    assert read_as(dict[str, Point], {"a": {"lat": 1, "lon": 2}}) == {
        "a": Point(lat=1.0, lon=2.0)
    }
    with pytest.raises(LlmError, match=r"\$: must have 2 items, got 1"):
        read_as(tuple[int, str], [1])
    assert read_as(int, 2.0) == 2
    with pytest.raises(LlmError, match="must be integer, got boolean"):
        read_as(int, True)


def test_a_schema_that_is_neither_a_mapping_nor_a_type_is_a_type_error():
    with pytest.raises(TypeError, match="schema must be"):
        parse_json("{}", "City")  # type: ignore[call-overload]


def test_a_pydantic_model_is_used_when_installed(server):
    pydantic = pytest.importorskip("pydantic")

    class Capital(pydantic.BaseModel):
        """A capital city."""

        city: str
        country: str
        population: int

    class Answer(pydantic.BaseModel):
        capitals: list[Capital]

    options = GenerateOptions.from_prompt("qwen3", "Capitals", response_format=Answer)
    assert options.response_format.schema == Answer.model_json_schema()
    good = {"capitals": [{"city": "Paris", "country": "France", "population": 2}]}
    _answer(server, good)
    bad = {"capitals": [{"city": "Rome", "country": "Italy", "population": "x"}]}
    _answer(server, bad)
    with OpenAICompatAdapter(server.url) as adapter:
        first = collect(adapter.stream(options))
        second = collect(adapter.stream(options))
    sent = server.requests[0].json()["response_format"]["json_schema"]
    assert sent["name"] == "Answer"
    assert sent["schema"]["$defs"]["Capital"]["required"] == [
        "city",
        "country",
        "population",
    ]
    assert first.parsed(Answer) == Answer.model_validate(good)
    with pytest.raises(LlmError) as caught:
        second.parsed(Answer)
    assert caught.value.code == ErrorCode.INVALID_JSON_OUTPUT
    assert caught.value.message.startswith(
        "the answer does not fit Answer: $.capitals[0].population: "
    )


def test_a_pydantic_model_nested_in_a_dataclass_keeps_its_definitions():
    pydantic = pytest.importorskip("pydantic")

    class Leaf(pydantic.BaseModel):
        name: str

    class Tree(pydantic.BaseModel):
        leaves: list[Leaf]

    @dataclasses.dataclass
    class Garden:
        tree: Tree

    Garden.__annotations__["tree"] = Tree  # a local class: no forward reference
    schema = json_schema_of(Garden)
    assert schema["properties"]["tree"]["properties"]["leaves"]["items"] == {
        "$ref": "#/$defs/Leaf"
    }
    assert schema["$defs"]["Leaf"]["properties"]["name"] == {
        "title": "Name",
        "type": "string",
    }
    garden = read_as(Garden, {"tree": {"leaves": [{"name": "oak"}]}})
    assert garden.tree.leaves[0].name == "oak"


_WITHOUT_PYDANTIC = """
import dataclasses, sys
import dsh_llm, dsh_llm.structured, dsh_llm.tools
from dsh_llm import GenerateOptions, parse_json

@dataclasses.dataclass
class City:
    name: str

options = GenerateOptions.from_prompt("m", "hi", response_format=City)
assert parse_json('{"name": "Oslo"}', City) == City(name="Oslo")
dsh_llm.tools.tool_schema(City)
print(sorted(m for m in sys.modules if m.split(".")[0] == "pydantic"))
"""


def test_the_core_never_imports_pydantic():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PYDANTIC],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_typing_typeddict_works_as_well():
    import typing

    class Pair(typing.TypedDict):
        left: int
        right: int

    Pair.__annotations__.update(left=int, right=int)  # a local class
    assert json_schema_of(Pair)["required"] == ["left", "right"]
    assert read_as(Pair, {"left": 1, "right": 2}) == {"left": 1, "right": 2}
    with pytest.raises(LlmError, match=r"\$\.right: is required"):
        read_as(Pair, {"left": 1})
