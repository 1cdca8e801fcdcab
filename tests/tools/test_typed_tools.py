"""Tools described by the user's types (issue 29, item 2): a function's type
hints, a dataclass or a pydantic model become the tool's schema, and
``run_tools`` calls the tool with arguments read into those types (over a real
loopback server); arguments that do not fit come back to the model as an
``is_error`` result naming the path of the first mismatch."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Annotated
from typing import Any
from typing import TypedDict

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol.pytypes import ValueMismatch
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_body
from dsh_llm.tools import bind_tool
from dsh_llm.tools import run_tools
from dsh_llm.tools import tool_schema

from ..adapters.chat_chunks import finish
from ..adapters.chat_chunks import text
from ..adapters.chat_chunks import tool


@dataclasses.dataclass
class Trip:
    """A trip to book.

    More text the model does not need."""

    origin: str
    destination: str
    nights: int = 1


@dataclasses.dataclass
class Booking:
    reference: str
    trip: Trip
    seats: int


booked: list[tuple[Trip, int]] = []


def book(
    trip: Trip,
    seats: Annotated[int, "How many seats"] = 1,
    note: str | None = None,
) -> Booking:
    """Book a trip."""
    booked.append((trip, seats))
    return Booking(reference="R1", trip=trip, seats=seats)


TRIP_SCHEMA = {
    "type": "object",
    "properties": {
        "origin": {"type": "string"},
        "destination": {"type": "string"},
        "nights": {"type": "integer"},
    },
    "required": ["origin", "destination"],
    "additionalProperties": False,
}


def test_a_functions_type_hints_become_its_schema():
    schema = tool_schema(book)
    assert schema.name == "book"
    assert schema.description == "Book a trip."
    assert schema.parameters == {
        "type": "object",
        "properties": {
            "trip": TRIP_SCHEMA,
            "seats": {"type": "integer", "description": "How many seats"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["trip"],
    }


def test_a_dataclass_is_a_tool_of_its_own():
    schema = tool_schema(Trip)
    assert (schema.name, schema.description) == ("Trip", "A trip to book.")
    assert schema.parameters == TRIP_SCHEMA
    assert tool_schema(Booking).description == ""  # no docstring of its own

    class Pair(TypedDict):
        left: int

    assert tool_schema(Pair).description == ""  # not dict's docstring


def test_bind_tool_reads_arguments_into_the_parameter_types():
    call = bind_tool(book, {"trip": {"origin": "Paris", "destination": "Oslo"}})
    booked.clear()
    assert call() == Booking(
        reference="R1", trip=Trip(origin="Paris", destination="Oslo"), seats=1
    )
    assert booked == [(Trip(origin="Paris", destination="Oslo"), 1)]
    instance = bind_tool(Trip, {"origin": "a", "destination": "b", "nights": 2.0})()
    assert instance == Trip(origin="a", destination="b", nights=2)
    for arguments, where in (
        ({}, "$.trip: is required"),
        ({"trip": {"origin": "a"}}, "$.trip.destination: is required"),
        ({"trip": {"origin": 1, "destination": "b"}}, "$.trip.origin: must be"),
        ({"trip": {"origin": "a", "destination": "b"}, "x": 1}, "$.x: is not a"),
        ({"trip": {"origin": "a", "destination": "b"}, "seats": "2"}, "$.seats: must"),
    ):
        with pytest.raises(ValueMismatch) as caught:
            bind_tool(book, arguments)
        assert str(caught.value).startswith(where)
    # A function taking **kwargs receives the arguments it does not name.
    assert bind_tool(lambda a, **rest: (a, rest), {"a": 1, "b": 2})() == (1, {"b": 2})


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


def _calls(*calls: tuple[str, str, Any]) -> Reply:
    payloads = [
        tool(index, id=call_id, name=name, args=json.dumps(arguments))
        for index, (call_id, name, arguments) in enumerate(calls)
    ]
    return Reply(body=sse_body([*payloads, finish("tool_calls")]))


def _results(messages) -> dict[str, tuple[bool | None, str]]:
    return {
        block.tool_call_id: (block.is_error, block.content[0].text)
        for message in messages
        for block in message.content
        if isinstance(block, ToolResultBlock)
    }


def test_run_tools_calls_with_validated_arguments_and_reports_misfits(server):
    server.enqueue(
        _calls(
            (
                "c1",
                "book",
                {"trip": {"origin": "Paris", "destination": "Oslo"}, "seats": 2.0},
            ),
            ("c2", "book", {"trip": {"origin": "Paris", "destination": 7}}),
            ("c3", "Trip", {"origin": "Lima", "destination": "Quito", "nights": 3}),
            (
                "c4",
                "book",
                {"trip": {"origin": "a", "destination": "b"}, "when": "now"},
            ),
        )
    )
    server.enqueue(Reply(body=sse_body([text("Booked."), finish()])))
    booked.clear()
    options = GenerateOptions.from_prompt("m", "Book Paris to Oslo")
    with OpenAICompatAdapter(server.url) as adapter:
        result = run_tools(adapter, options, tools=[book, Trip]).run()
    assert result.text == "Booked."
    # The schemas went out with the first request.
    sent = server.requests[0].json()["tools"]
    assert [t["function"]["name"] for t in sent] == ["book", "Trip"]
    assert sent[1]["function"]["parameters"] == TRIP_SCHEMA
    # The function got a Trip and an int, once: the misfits never ran.
    assert booked == [(Trip(origin="Paris", destination="Oslo"), 2)]
    results = _results(result.messages)
    assert results["c1"] == (
        None,
        json.dumps(
            {
                "reference": "R1",
                "trip": {"origin": "Paris", "destination": "Oslo", "nights": 1},
                "seats": 2,
            }
        ),
    )
    assert results["c2"] == (
        True,
        "the arguments of book do not fit its parameters: "
        "$.trip.destination: must be string, got integer",
    )
    assert results["c3"] == (
        None,
        json.dumps({"origin": "Lima", "destination": "Quito", "nights": 3}),
    )
    assert results["c4"] == (
        True,
        "the arguments of book do not fit its parameters: $.when: is not a parameter",
    )
    # The model saw each misfit as the tool's answer.
    sent_back = server.requests[1].json()["messages"]
    assert sent_back[-3]["content"].endswith("must be string, got integer")


def test_a_pydantic_model_describes_and_checks_a_tool(server):
    pydantic = pytest.importorskip("pydantic")

    class Flight(pydantic.BaseModel):
        """A flight to search."""

        origin: str
        passengers: int

    found: list[Any] = []

    def search(flight: Flight) -> str:
        """Search flights."""
        found.append(flight)
        return f"{flight.passengers} seats from {flight.origin}"

    search.__annotations__["flight"] = Flight  # a local class: no forward reference

    class Bare(pydantic.BaseModel):
        value: int

    assert tool_schema(Bare).description == ""  # not BaseModel's docstring
    assert tool_schema(Flight).parameters == Flight.model_json_schema()
    assert tool_schema(Flight).description == "A flight to search."
    assert tool_schema(search).parameters["properties"]["flight"]["required"] == [
        "origin",
        "passengers",
    ]
    server.enqueue(
        _calls(
            ("c1", "search", {"flight": {"origin": "Oslo", "passengers": 2}}),
            ("c2", "search", {"flight": {"origin": "Oslo", "passengers": "many"}}),
        )
    )
    server.enqueue(Reply(body=sse_body([text("done"), finish()])))
    options = GenerateOptions.from_prompt("m", "Flights from Oslo")
    with OpenAICompatAdapter(server.url) as adapter:
        result = run_tools(adapter, options, tools=[search]).run()
    assert found == [Flight(origin="Oslo", passengers=2)]
    results = _results(result.messages)
    assert results["c1"] == (None, "2 seats from Oslo")
    error, message = results["c2"]
    assert error is True
    assert message.startswith(
        "the arguments of search do not fit its parameters: $.flight.passengers: "
    )
