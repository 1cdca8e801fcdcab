"""The ConverseStream request builder (pure) and the family's config: the body
for each request field, Claude's thinking rules, what is refused before any
I/O, the region and the catalog."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters.anthropic.catalog import BUDGET_THINKING
from dsh_llm.adapters.bedrock import BedrockAdapter
from dsh_llm.adapters.bedrock import BedrockConfig
from dsh_llm.adapters.bedrock.catalog import claude_model
from dsh_llm.adapters.bedrock.catalog import thinking_profile
from dsh_llm.adapters.bedrock.request import build_converse_request
from dsh_llm.adapters.bedrock.request import converse_path
from dsh_llm.adapters.bedrock.request import request_headers
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import Message
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import UserSource
from dsh_llm.protocol import create_user_message

HAIKU = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
NOVA = "amazon.nova-pro-v1:0"
TOOL = ToolSchema(
    name="lookup",
    description="Look a word up",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}},
)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", NOVA)
    return GenerateOptions(**fields)


def _body(attachments: Any = None, **fields: Any) -> dict[str, Any]:
    options = _options(**fields)
    return build_converse_request(
        options,
        max_tokens=None,
        thinking=thinking_profile(options.model),
        attachments=attachments,
    )


def _refusal(code: str = ErrorCode.UNSUPPORTED_OPTION, **fields: Any) -> str:
    with pytest.raises(LlmError) as caught:
        _body(**fields)
    assert caught.value.code == code
    return caught.value.message


def test_the_path_quotes_the_whole_model_id() -> None:
    assert converse_path("amazon.nova-pro-v1:0") == (
        "/model/amazon.nova-pro-v1%3A0/converse-stream"
    )
    assert converse_path("arn:aws:bedrock:x:1:p/a b") == (
        "/model/arn%3Aaws%3Abedrock%3Ax%3A1%3Ap%2Fa%20b/converse-stream"
    )


def test_a_plain_request_sends_only_its_messages() -> None:
    assert _body() == {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}


def test_tools_and_each_tool_choice() -> None:
    spec = {
        "toolSpec": {
            "name": "lookup",
            "description": "Look a word up",
            "inputSchema": {"json": TOOL.parameters},
        }
    }
    assert _body(tools=(TOOL,))["toolConfig"] == {"tools": [spec]}
    for choice, wire in (
        ("auto", {"auto": {}}),
        ("required", {"any": {}}),
        ("lookup", {"tool": {"name": "lookup"}}),
    ):
        config = _body(tools=(TOOL,), tool_choice=choice)["toolConfig"]
        assert config == {"tools": [spec], "toolChoice": wire}
    assert "Converse has no" in _refusal(tools=(TOOL,), tool_choice="none")


def test_response_format_is_the_output_text_format() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    body = _body(response_format=ResponseFormat(schema=schema, name="City"))
    text_format = body["outputConfig"]["textFormat"]
    assert text_format["type"] == "json_schema"
    assert text_format["structure"]["jsonSchema"]["name"] == "City"
    assert json.loads(text_format["structure"]["jsonSchema"]["schema"]) == schema


def test_system_prompt_and_system_messages_are_system_blocks() -> None:
    system_message = Message(
        role="system", content=(TextBlock(text="Also this."),), source=UserSource()
    )
    body = _body(
        system="Be brief.", messages=(system_message, create_user_message("q"))
    )
    assert body["system"] == [{"text": "Be brief."}, {"text": "Also this."}]
    assert body["messages"] == [{"role": "user", "content": [{"text": "q"}]}]


def test_tool_results_go_first_and_same_role_turns_merge() -> None:
    result = Message(
        role="user",
        content=(
            TextBlock(text="and"),
            ToolResultBlock(
                tool_call_id="t1", content=(TextBlock(text="r"),), is_error=True
            ),
        ),
        source=UserSource(),
    )
    body = _body(messages=(create_user_message("a"), result))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "t1",
                        "content": [{"text": "r"}],
                        "status": "error",
                    }
                },
                {"text": "a"},
                {"text": "and"},
            ],
        }
    ]


STORE = MemoryAttachmentStore()
PNG_ID = STORE.put(b"\x89PN")


def _image_message() -> Message:
    return Message(
        role="user",
        content=(
            TextBlock(text="what is it?"),
            ImageBlock(
                attachment=ImageRef(
                    attachment_id=PNG_ID,
                    media_type="image/png",
                    bytes=3,
                    width=1,
                    height=1,
                )
            ),
        ),
        source=UserSource(),
    )


def test_an_image_is_sent_as_bytes_with_its_format() -> None:
    body = _body(model=HAIKU, messages=(_image_message(),), attachments=STORE)
    assert body["messages"][0]["content"][1] == {
        "image": {"format": "png", "source": {"bytes": "iVBO"}}
    }


def test_claude_efforts_go_to_additional_fields_and_output_config() -> None:
    body = _body(model=HAIKU, reasoning_effort="medium", max_tokens=20_000)
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 8192}
    }
    assert body["inferenceConfig"] == {"maxTokens": 20_000}
    adaptive = _body(
        model="global.anthropic.claude-opus-5-5-v1:0",
        reasoning_effort="xhigh",
        max_tokens=64_000,
    )
    assert adaptive["additionalModelRequestFields"] == {
        "thinking": {"type": "adaptive"}
    }
    assert adaptive["outputConfig"] == {"effort": "xhigh"}


def test_while_claude_thinks_temperature_and_forced_tools_are_refused() -> None:
    thinking = {"model": HAIKU, "reasoning_effort": "low", "max_tokens": 8000}
    assert "temperature" in _refusal(temperature=0.2, **thinking)
    assert "tool_choice" in _refusal(tools=(TOOL,), tool_choice="required", **thinking)
    _body(model=HAIKU, reasoning_effort="off", temperature=0.2)


def test_a_model_that_is_not_claude_takes_no_effort() -> None:
    message = _refusal(ErrorCode.UNSUPPORTED_REASONING_EFFORT, reasoning_effort="low")
    assert "extra_body" in message
    assert "additionalModelRequestFields" not in _body(purpose="session-title")


def test_extra_body_merges_at_the_top_level_one_level_deep() -> None:
    body = _body(
        model=HAIKU,
        reasoning_effort="low",
        max_tokens=8000,
        extra_body={
            "additionalModelRequestFields": {"top_k": 5},
            "guardrailConfig": {"guardrailIdentifier": "g1", "guardrailVersion": "1"},
        },
    )
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "top_k": 5,
    }
    assert body["guardrailConfig"]["guardrailIdentifier"] == "g1"


def test_headers_accept_the_event_stream_and_refuse_the_auth_headers() -> None:
    headers = request_headers(_options(extra_headers={"x-amzn-bedrock-trace": "ON"}))
    assert headers["accept"] == "application/vnd.amazon.eventstream"
    assert headers["x-amzn-bedrock-trace"] == "ON"
    for name in ("authorization", "x-amz-date", "x-amz-security-token"):
        with pytest.raises(LlmError) as caught:
            request_headers(_options(extra_headers={name: "v"}))
        assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
        assert "v" not in caught.value.message.split(name)[-1]


# --- the catalog and the config -----------------------------------------------------


@pytest.mark.parametrize(
    ("model", "claude"),
    [
        ("anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("global.anthropic.claude-opus-5-5-v1:0", "claude-opus-5-5"),
        ("apac.anthropic.claude-sonnet-5-v1", "claude-sonnet-5"),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet"),
        (
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/"
            "eu.anthropic.claude-sonnet-5-5-v1:0",
            "claude-sonnet-5-5",
        ),
        ("arn:aws:bedrock:us-east-1:1:application-inference-profile/x1", None),
        ("amazon.nova-pro-v1:0", None),
        ("meta.llama3-70b-instruct-v1:0", None),
    ],
)
def test_claude_ids_are_recognised(model: str, claude: str | None) -> None:
    assert claude_model(model) == claude


def test_an_unknown_claude_takes_budget_thinking() -> None:
    assert (
        thinking_profile("anthropic.claude-3-7-sonnet-20250219-v1:0") is BUDGET_THINKING
    )
    assert thinking_profile(NOVA) is None


def test_the_region_comes_from_config_then_the_environment() -> None:
    assert (
        BedrockAdapter(
            region="eu-west-1", environ={"AWS_REGION": "us-east-2"}
        ).endpoint.profile.region
        == "eu-west-1"
    )
    assert (
        BedrockAdapter(
            environ={"AWS_REGION": "us-east-2", "AWS_DEFAULT_REGION": "x"}
        ).endpoint.profile.region
        == "us-east-2"
    )
    assert (
        BedrockAdapter(
            environ={"AWS_DEFAULT_REGION": "ca-central-1"}
        ).endpoint.profile.region
        == "ca-central-1"
    )


def test_a_bad_or_missing_region_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from .aws import isolate_aws

    isolate_aws(monkeypatch, tmp_path)
    with pytest.raises(AdapterConfigError) as caught:
        BedrockConfig(region="US East")
    assert str(caught.value).startswith("llm-bedrock: region ")
    with pytest.raises(AdapterConfigError) as caught:
        BedrockAdapter(environ={"AWS_REGION": "nowhere"})
    assert "read from AWS_REGION" in str(caught.value)
    with pytest.raises(AdapterConfigError) as caught:
        BedrockAdapter(environ={})
    assert caught.value.key == "region"
    assert "AWS_REGION" in str(caught.value)


def test_botocore_resolves_the_profiles_region(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    pytest.importorskip("botocore")
    from .aws import isolate_aws

    config = tmp_path / "config"
    config.write_text("[profile work]\nregion = sa-east-1\n")
    isolate_aws(monkeypatch, tmp_path, AWS_CONFIG_FILE=str(config))
    adapter = BedrockAdapter(profile="work", environ={})
    assert adapter.base_url == "https://bedrock-runtime.sa-east-1.amazonaws.com"


def test_model_info_for_claude_and_for_other_models() -> None:
    adapter = BedrockAdapter(region="us-east-1", default_context_window=32_000)
    claude = adapter.resolve_model("bedrock", HAIKU)
    assert claude.input_modalities == ("text", "image")
    assert claude.context is not None
    assert claude.context.context_window == 200_000
    assert claude.reasoning is not None
    nova = adapter.resolve_model("bedrock", NOVA)
    assert nova.input_modalities == ("text",)
    assert nova.reasoning is None
    assert nova.context is not None
    assert nova.context.context_window == 32_000
    assert nova.default_max_tokens is None
    listed = BedrockAdapter(
        region="us-east-1",
        models=[{"id": NOVA, "inputModalities": ["text", "image"], "maxTokens": 5000}],
    )
    assert listed.resolve_model("bedrock", NOVA).input_modalities == ("text", "image")
    assert [m.id for m in listed.list_models("bedrock")] == [NOVA]


def test_a_text_only_model_refuses_images_before_any_io() -> None:
    adapter = BedrockAdapter("ABSK-0123456789", region="us-east-1")
    adapter.attachments = STORE
    with pytest.raises(LlmError) as caught:
        next(iter(adapter.stream(_options(messages=(_image_message(),)))))
    assert caught.value.code == ErrorCode.UNSUPPORTED_CONTENT
