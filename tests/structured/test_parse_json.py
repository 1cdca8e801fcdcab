"""parse_json: the final text as JSON, a clear INVALID_JSON_OUTPUT otherwise, and
the schema subset (type, required, properties, enum, items...)."""

from __future__ import annotations

import pytest

from dsh_llm.assembler import AssembledResponse
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CallId
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import create_assistant_message
from dsh_llm.structured import check_schema
from dsh_llm.structured import parse_json

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "unit": {"enum": ["C", "F"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}


def _response(*texts: str) -> AssembledResponse:
    message = create_assistant_message(
        [TextBlock(text=t) for t in texts], provider="p", model="m"
    )
    return AssembledResponse(message=message, usage=None, finish=FinishReason.STOP)


def test_the_joined_text_of_a_response_is_parsed():
    assert parse_json(_response('{"city": ', '"Paris", "days": 2}')) == {
        "city": "Paris",
        "days": 2,
    }


def test_a_code_fence_around_the_whole_answer_is_unwrapped():
    assert parse_json('```json\n{"a": [1]}\n```\n') == {"a": [1]}


@pytest.mark.parametrize("text", ["", "  ", 'Sure! {"a": 1}', '{"a": 1', "[1,]"])
def test_text_that_is_not_json_raises_a_clear_error(text):
    with pytest.raises(LlmError) as caught:
        parse_json(text)
    assert caught.value.code == ErrorCode.INVALID_JSON_OUTPUT
    assert "JSON" in caught.value.message


def test_a_conforming_value_passes_the_schema_and_a_response_format():
    value = '{"city": "Oslo", "days": 3, "unit": "C", "tags": ["a"]}'
    assert parse_json(value, SCHEMA)["city"] == "Oslo"
    assert parse_json(value, ResponseFormat(schema=SCHEMA))["days"] == 3


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"city": "Oslo"}', "$.days: is required"),
        ('{"city": 1, "days": 3}', "$.city: must be string, got integer"),
        ('{"city": "O", "days": 1.5}', "$.days: must be integer, got number"),
        ('{"city": "O", "days": true}', "$.days: must be integer, got boolean"),
        ('{"city": "O", "days": 1, "unit": "K"}', "$.unit: must be one of"),
        ('{"city": "O", "days": 1, "x": 0}', "$.x: is not an allowed property"),
        ('{"city": "O", "days": 1, "tags": [1]}', "$.tags[0]: must be string"),
        ('{"city": "O", "days": 1, "tags": ["a","b","c"]}', "at most 2 items"),
        ("[]", "$: must be object, got array"),
    ],
)
def test_a_value_outside_the_schema_names_the_path(text, problem):
    with pytest.raises(LlmError) as caught:
        parse_json(text, SCHEMA)
    assert caught.value.code == ErrorCode.INVALID_JSON_OUTPUT
    assert problem in caught.value.message


def test_integer_accepts_a_whole_float_and_any_of_picks_any_option():
    assert check_schema(2.0, {"type": "integer"}) == []
    options = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert check_schema(None, options) == []
    assert check_schema(1, options) == ["$: matches none of the anyOf schemas"]


def test_unsupported_keywords_are_ignored_not_failed():
    assert check_schema("x", {"type": "string", "pattern": "^y$"}) == []


def test_parsed_tool_calls_parse_each_calls_arguments():
    message = create_assistant_message(
        [
            ToolCallBlock(id=CallId("c1"), name="f", arguments='{"a": 1}'),
            ToolCallBlock(id=CallId("c2"), name="g", arguments="{}"),
        ],
        provider="p",
        model="m",
    )
    response = AssembledResponse(
        message=message, usage=None, finish=FinishReason.TOOL_CALLS
    )
    calls = response.parsed_tool_calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("c1", "f", {"a": 1}),
        ("c2", "g", {}),
    ]
    broken = create_assistant_message(
        [ToolCallBlock(id=CallId("c3"), name="h", arguments='{"a": ')],
        provider="p",
        model="m",
    )
    with pytest.raises(LlmError) as caught:
        AssembledResponse(
            message=broken, usage=None, finish=FinishReason.TOOL_CALLS
        ).parsed_tool_calls()
    assert caught.value.code == ErrorCode.INVALID_JSON_OUTPUT
    assert "'h' (c3)" in caught.value.message
