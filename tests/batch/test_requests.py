"""Request lines: good lines become GenerateOptions; every malformed line becomes a
failure naming its line number and the key, never an exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.batch.requests import BatchRequest
from dsh_llm.batch.requests import RequestLineError
from dsh_llm.batch.requests import id_key
from dsh_llm.batch.requests import parse_request_line
from dsh_llm.batch.requests import parse_request_object
from dsh_llm.batch.requests import peek_id
from dsh_llm.batch.requests import read_requests
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_user_message
from dsh_llm.serde import message_to_dict

BASE = {"id": "a", "provider": "local", "model": "m"}


def _parse(row: Any, line: int = 3) -> BatchRequest | RequestLineError:
    return parse_request_line(json.dumps(row), line)


def test_a_prompt_line_with_every_option_becomes_generate_options() -> None:
    item = _parse(
        {
            **BASE,
            "prompt": "hello",
            "system": "be brief",
            "max_tokens": 64,
            "temperature": 0.5,
            "reasoning_effort": "high",
            "stop": ["END"],
            "tools": [
                {"name": "f", "description": "d", "parameters": {"type": "object"}}
            ],
            "tool_choice": "f",
        }
    )
    assert isinstance(item, BatchRequest)
    assert (item.id, item.line) == ("a", 3)
    options = item.options
    assert (options.provider, options.model, options.system) == (
        "local",
        "m",
        "be brief",
    )
    assert (options.max_tokens, options.temperature) == (64, 0.5)
    assert options.reasoning_effort == "high"
    assert options.stop == ("END",)
    assert options.tools == (
        ToolSchema(name="f", description="d", parameters={"type": "object"}),
    )
    assert options.tool_choice == "f"
    assert [m.role for m in options.messages] == ["user"]
    assert options.messages[0].content == (TextBlock(text="hello"),)


def test_messages_are_the_protocol_json_and_an_integer_id_is_kept() -> None:
    first = message_to_dict(create_user_message("one"))
    second = message_to_dict(create_user_message("two"))
    del second["id"]  # an id is optional in the message JSON
    item = _parse({**BASE, "id": 7, "messages": [first, second]})
    assert isinstance(item, BatchRequest)
    assert item.id == 7
    assert item.options.messages[0].id == first["id"]
    assert [m.content[0] for m in item.options.messages] == [
        TextBlock(text="one"),
        TextBlock(text="two"),
    ]


@pytest.mark.parametrize(
    ("row", "key"),
    [
        ({**BASE, "prompt": "x", "colour": "red"}, "$.colour"),
        ({"provider": "local", "model": "m", "prompt": "x"}, "$.id"),
        ({**BASE, "id": True, "prompt": "x"}, "$.id"),
        ({**BASE, "id": "", "prompt": "x"}, "$.id"),
        ({"id": "a", "model": "m", "prompt": "x"}, "$.provider"),
        ({**BASE, "model": 3, "prompt": "x"}, "$.model"),
        (BASE, "$.messages"),
        ({**BASE, "prompt": "x", "messages": []}, "$.messages"),
        ({**BASE, "messages": "hi"}, "$.messages"),
        (
            {**BASE, "messages": [{"role": "user", "content": []}]},
            "$.messages[0].source",
        ),
        ({**BASE, "prompt": 5}, "$.prompt"),
        ({**BASE, "prompt": "x", "max_tokens": 0}, "$.max_tokens"),
        ({**BASE, "prompt": "x", "max_tokens": 1.5}, "$.max_tokens"),
        ({**BASE, "prompt": "x", "temperature": "hot"}, "$.temperature"),
        ({**BASE, "prompt": "x", "temperature": -1}, "$.temperature"),
        ({**BASE, "prompt": "x", "stop": [""]}, "$.stop"),
        (
            {**BASE, "prompt": "x", "tools": [{"name": "f", "extra": 1}]},
            "$.tools[0].extra",
        ),
        ({**BASE, "prompt": "x", "tools": [{"name": ""}]}, "$.tools[0].name"),
        ({**BASE, "prompt": "x", "tool_choice": "g"}, "$.tool_choice"),
        ([1, 2], "$"),
    ],
)
def test_a_malformed_line_names_its_line_and_key(row: Any, key: str) -> None:
    item = _parse(row, line=12)
    assert isinstance(item, RequestLineError)
    assert item.line == 12
    assert item.failure.code == "INVALID_BATCH_REQUEST"
    assert item.failure.message.startswith(f"line 12: {key} ")


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": 1}],
                    "source": {"kind": "user"},
                }
            ],
            "line 7: $.messages[0].content[0].text must be a string, got an integer",
        ),
        (["hi"], "line 7: $.messages[0] must be a mapping, got a string"),
        (
            {"role": "user"},
            "line 7: $.messages must be a list of mappings or null, got a mapping",
        ),
    ],
)
def test_a_bad_message_is_named_by_its_path_in_the_shared_wording(
    messages: Any, message: str
) -> None:
    item = _parse({**BASE, "messages": messages}, line=7)
    assert isinstance(item, RequestLineError)
    assert item.failure.message == message


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {**BASE, "prompt": "x", "max_token": 5},
            'line 3: $.max_token is not a known key (expected one of "id", '
            '"provider", "model", "messages", "prompt", "system", "max_tokens", '
            '"temperature", "reasoning_effort", "stop", "tools", "tool_choice"; '
            'did you mean "max_tokens"?)',
        ),
        (
            {"id": "a", "model": "m", "prompt": "x"},
            "line 3: $.provider is required (expected a string)",
        ),
        (
            {**BASE, "prompt": "x", "temperature": "hot"},
            "line 3: $.temperature must be a number or null, got a string",
        ),
        (
            {**BASE, "prompt": "x", "tools": [{"description": "d"}]},
            "line 3: $.tools[0].name is required (expected a string)",
        ),
        (
            {**BASE, "prompt": "x", "tools": [{"name": "f", "parameters": []}]},
            "line 3: $.tools[0].parameters must be a mapping, got a list",
        ),
    ],
)
def test_keys_are_read_and_reported_by_the_config_mechanism(
    row: Any, message: str
) -> None:
    item = _parse(row)
    assert isinstance(item, RequestLineError)
    assert item.failure.message == message


def test_a_value_class_error_is_read_by_its_field_not_its_message() -> None:
    item = _parse({**BASE, "prompt": "x", "tool_choice": "g"})
    assert isinstance(item, RequestLineError)
    assert item.failure.message == (
        "line 3: $.tool_choice 'g' needs at least one tool in tools"
    )


def test_a_line_with_a_usable_id_keeps_it_in_its_failure() -> None:
    item = _parse({**BASE, "prompt": "x", "colour": "red"})
    assert isinstance(item, RequestLineError)
    assert item.id == "a"


@pytest.mark.parametrize(
    ("text", "detail"), [(b"{nope", "is not JSON"), (b"\xff{}", "is not UTF-8")]
)
def test_text_that_is_not_json_is_a_failure_too(text: bytes, detail: str) -> None:
    item = parse_request_line(text, 4)
    assert isinstance(item, RequestLineError)
    assert item.id is None
    assert item.failure.message.startswith(f"line 4: $ {detail}")


DEEP = 100_000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * DEEP, "line 4: $ is nested too deeply"),
        ("[" * DEEP + "]" * DEEP, "line 4: $ is nested too deeply"),
        ('{"id": "a", "x": ' + "[" * DEEP, "line 4: $ is nested too deeply"),
        ('{"id": 1' + "0" * 5000 + "}", "line 4: $ cannot be read: "),
    ],
)
def test_a_hostile_line_is_one_failure_never_an_exception(
    text: str, message: str
) -> None:
    for form in (text, text.encode()):
        item = parse_request_line(form, 4)
        assert isinstance(item, RequestLineError)
        assert item.id is None
        assert item.failure.code == "INVALID_BATCH_REQUEST"
        assert item.failure.message.startswith(message)
        assert peek_id(form) is None


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_a_value_json_can_hold_but_too_deep_to_copy_is_one_failure() -> None:
    # JSON parses it; copying the tool's schema into the request cannot.
    parameters = {"type": "object", "x": _nested(950)}
    row = {**BASE, "prompt": "x", "tools": [{"name": "f", "parameters": parameters}]}
    item = parse_request_object(row, 9)
    assert isinstance(item, RequestLineError)
    assert item.id == "a"
    assert item.failure.message == "line 9: $ is nested too deeply"


def test_read_requests_numbers_lines_as_in_the_file_and_skips_blank_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "requests.jsonl"
    rows = [json.dumps({**BASE, "id": n, "prompt": "x"}) for n in range(2)]
    path.write_bytes(b"\xef\xbb\xbf" + f"{rows[0]}\n\n  \n{rows[1]}\nbroken".encode())
    items = list(read_requests(path))
    assert [(type(i).__name__, i.line) for i in items] == [
        ("BatchRequest", 1),
        ("BatchRequest", 4),
        ("RequestLineError", 5),
    ]


def test_ids_of_different_json_types_are_different() -> None:
    assert id_key(1) != id_key("1")
    assert id_key("a") == id_key("a")
