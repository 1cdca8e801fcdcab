"""GenerateOptions' response_format, extra_body and extra_headers: checked at
construction, private copies, compared but not hashed, and serialised by
dsh_llm.serde in camelCase; from_prompt and the direct route."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import DIRECT_ROUTE
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import ToolSchema
from dsh_llm.serde import options_from_dict
from dsh_llm.serde import options_to_dict

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def _options(**fields: object) -> GenerateOptions:
    return GenerateOptions.from_prompt("m", "hi", **fields)  # type: ignore[arg-type]


def test_from_prompt_builds_one_user_message_on_the_direct_route():
    options = GenerateOptions.from_prompt(
        "m", "hello", system="Be brief.", temperature=0
    )
    assert options.provider == DIRECT_ROUTE == "direct"
    assert [(m.role, m.text) for m in options.messages] == [("user", "hello")]
    assert (options.system, options.temperature) == ("Be brief.", 0)
    assert GenerateOptions.from_prompt("m", "x", provider="p").provider == "p"


def test_a_bare_schema_becomes_a_response_format_with_defaults():
    options = _options(response_format=SCHEMA)
    assert options.response_format == ResponseFormat(schema=SCHEMA)
    assert options.response_format.name == "response"
    assert options.response_format.strict is False


@pytest.mark.parametrize(
    ("fields", "error", "text"),
    [
        ({"response_format": "json"}, TypeError, "response_format"),
        ({"extra_body": ["a"]}, TypeError, "extra_body must be a mapping"),
        ({"extra_body": {1: "a"}}, TypeError, "keys must be non-empty strings"),
        ({"extra_headers": {"bad name": "v"}}, ValueError, "invalid header name"),
        ({"extra_headers": {"x-a": "v\n"}}, ValueError, "printable ASCII"),
        ({"extra_headers": {"x-a": 1}}, ValueError, "printable ASCII"),
        ({"extra_headers": {"X-A": "1", "x-a": "2"}}, ValueError, "twice"),
    ],
)
def test_bad_values_are_refused_naming_the_field(fields, error, text):
    with pytest.raises(error, match=text):
        _options(**fields)


@pytest.mark.parametrize("name", ["", "bad name", "x" * 65, "é"])
def test_a_format_name_outside_the_openai_rule_is_refused(name):
    with pytest.raises(ValueError, match="name must be 1 to 64"):
        ResponseFormat(schema=SCHEMA, name=name)
    with pytest.raises(TypeError, match="schema must be a dict"):
        ResponseFormat(schema=[])  # type: ignore[arg-type]


def test_a_header_value_never_shows_in_a_message_or_repr():
    with pytest.raises(ValueError, match="extra_headers") as caught:
        _options(extra_headers={"x-key": "secret\n"})
    assert "secret" not in str(caught.value)
    assert "secret-value" not in repr(_options(extra_headers={"x-key": "secret-value"}))


def test_mappings_are_private_copies_compared_but_not_hashed():
    body = {"top_k": {"n": 1}}
    options = _options(extra_body=body, response_format=SCHEMA)
    body["top_k"]["n"] = 2
    assert options.extra_body == {"top_k": {"n": 1}}
    same = options.evolve()
    assert same == options
    assert hash(same) == hash(options)
    assert options != options.evolve(extra_body={"top_k": 3})
    assert hash(options.evolve(extra_headers={"x-a": "1"})) == hash(
        options.evolve(extra_headers={"x-a": "2"})
    )


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=5), st.integers() | st.text(), max_size=3
    ),
    st.booleans(),
)
def test_options_round_trip_through_serde(extra, strict):
    options = _options(
        response_format=ResponseFormat(schema=SCHEMA, name="n", strict=strict),
        extra_body=extra or None,
        extra_headers={"X-Trace": "t"},
        tools=[ToolSchema(name="t", description="d", parameters={"type": "object"})],
        tool_choice="auto",
    )
    data = options_to_dict(options)
    assert data["responseFormat"] == {"schema": SCHEMA, "name": "n", "strict": strict}
    assert data["extraHeaders"] == {"X-Trace": "t"}
    assert "signal" not in data
    assert options_from_dict(data) == options


def test_reading_bad_options_names_the_key_path():
    data = options_to_dict(_options())
    with pytest.raises(LlmError) as caught:
        options_from_dict({**data, "responseFormat": {"schema": []}})
    assert caught.value.code == ErrorCode.INVALID_OPTIONS
    assert "responseFormat" in caught.value.message
    with pytest.raises(LlmError):
        options_from_dict({**data, "signal": None})
