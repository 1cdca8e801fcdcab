"""The Gemini request (dsh_llm.adapters.gemini.request and the family's request
hook): URL, key header, exact
bodies, refusals before any I/O, and the replay round trip of thought
signatures from recorded answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import AttachmentReader
from dsh_llm.adapters import WireCall
from dsh_llm.adapters import WireRequest
from dsh_llm.adapters.gemini.catalog import DEFAULT_MODELS
from dsh_llm.adapters.gemini.catalog import GeminiModel
from dsh_llm.adapters.gemini.catalog import model_for
from dsh_llm.adapters.gemini.family import FAMILY
from dsh_llm.adapters.gemini.family import GeminiConfig
from dsh_llm.adapters.gemini.family import stream_url
from dsh_llm.adapters.gemini.request import build_generate_request
from dsh_llm.adapters.gemini.translate import GeminiTranslator
from dsh_llm.assembler import BlockAssembler
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CallId
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.transport.sse import SseDecoder

from ..wire_replay import replay

FIXTURES = Path(__file__).parent.parent.parent / "fixtures" / "gemini"
MODEL = "gemini-3-flash-preview"
SIG1 = "CiQBjz1rX2VnU2lnbmF0dXJlT25lAAECAwQFBgcICQoLDA0ODxA="
SIG2 = "CiQBjz1rX2VnU2lnbmF0dXJlVHdvERITFBUWFxgZGhscHR4fIA=="
SIG3 = "Cp8BAY89a18/dGhvdWdodFNpZ25hdHVyZVRocmVlISIjJCUmJyg="
"""The signatures of the recorded answers."""
WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def options(*messages: Message, **fields: Any) -> GenerateOptions:
    fields.setdefault("messages", messages or (create_user_message("hi"),))
    fields.setdefault("model", MODEL)
    return GenerateOptions(provider="gemini", **fields)


def answered(name: str) -> Message:
    """The assistant message a recorded answer assembles to, with its replay."""
    body = (FIXTURES / f"{name}.sse").read_bytes()
    chunks = replay(body, "whole", SseDecoder(terminal_data=None), GeminiTranslator())
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler.message(
        ModelSource(provider="gemini", model=MODEL, replay_state=assembler.replay_state)
    )


# --- URL and key ------------------------------------------------------------------


def test_stream_url_quotes_the_model_and_asks_for_sse():
    assert stream_url("https://generativelanguage.googleapis.com", MODEL) == (
        "https://generativelanguage.googleapis.com/v1beta/models/"
        "gemini-3-flash-preview:streamGenerateContent?alt=sse"
    )
    assert stream_url("http://127.0.0.1:8080/", "tuned/x?y#z") == (
        "http://127.0.0.1:8080/v1beta/models/tuned%2Fx%3Fy%23z"
        ":streamGenerateContent?alt=sse"
    )


def test_a_base_url_query_is_kept_beside_alt_sse():
    assert stream_url("https://proxy.example/g?tenant=a", MODEL) == (
        "https://proxy.example/g/v1beta/models/gemini-3-flash-preview"
        ":streamGenerateContent?tenant=a&alt=sse"
    )


def _hook_request(key: Secret | None) -> WireRequest:
    config = GeminiConfig(base_url="https://g.example")
    endpoint = FAMILY.endpoint(config, explicit_key=True, environ={})
    store: AttachmentReader | None = None
    call: WireCall[GeminiConfig, None] = WireCall(
        options=options(),
        config=config,
        endpoint=endpoint,
        attachments=store,
        key=lambda: key,
    )
    return FAMILY.request(call)


def test_the_key_travels_in_the_header_and_never_shows():
    request = _hook_request(Secret("AIza-secret"))
    prepared = requests.Request(
        "POST", request.url, headers=request.headers, auth=request.auth
    ).prepare()
    assert prepared.headers["x-goog-api-key"] == "AIza-secret"
    assert "AIza-secret" not in (prepared.url or "")
    assert "AIza-secret" not in repr(request.auth)
    assert request.auth.secret == Secret("AIza-secret")  # type: ignore[attr-defined]
    assert request.url == stream_url("https://g.example", MODEL)


# --- bodies -----------------------------------------------------------------------


def test_a_simple_request_body():
    body = build_generate_request(options(create_user_message("Hello")))
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": True}},
    }


def test_a_full_conversation_body_in_key_order():
    call = ToolCallBlock(
        id=CallId("c1"), name="get_weather", arguments='{"city":"Oslo"}'
    )
    conversation = (
        create_message(
            "system",
            [TextBlock(text="Answer in English.")],
            ModelSource(provider="p", model="m"),
        ),
        create_user_message("Weather in Oslo?"),
        create_assistant_message(
            [
                ReasoningBlock(text="unsigned thought"),
                TextBlock(text="Checking."),
                call,
            ],
            provider="gemini",
            model=MODEL,
        ),
        create_tool_result_message("c1", "12 °C, rain"),
        create_user_message("And tomorrow?"),
    )
    body = build_generate_request(
        options(
            *conversation,
            system="You are terse.",
            tools=(WEATHER,),
            tool_choice="get_weather",
            temperature=0.2,
            max_tokens=512,
            stop=("END",),
            reasoning_effort="low",
        )
    )
    assert list(body) == [
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
    ]
    assert body["systemInstruction"] == {
        "parts": [{"text": "You are terse."}, {"text": "Answer in English."}]
    }
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Oslo?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Checking."},
                {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "get_weather",
                        "response": {"output": "12 °C, rain"},
                    }
                },
                {"text": "And tomorrow?"},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                    },
                }
            ]
        }
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {
            "mode": "ANY",
            "allowedFunctionNames": ["get_weather"],
        }
    }
    assert body["generationConfig"] == {
        "temperature": 0.2,
        "maxOutputTokens": 512,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingLevel": "LOW", "includeThoughts": True},
    }


def test_an_error_result_goes_back_under_error():
    call = ToolCallBlock(id=CallId("c1"), name="f", arguments="{}")
    body = build_generate_request(
        options(
            create_user_message("go"),
            create_assistant_message([call], provider="gemini", model=MODEL),
            create_tool_result_message("c1", "boom", is_error=True),
        )
    )
    assert body["contents"][-1] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "f", "response": {"error": "boom"}}}],
    }
    assert body["contents"][1]["parts"] == [{"functionCall": {"name": "f", "args": {}}}]


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        (None, None),
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
    ],
)
def test_tool_choice_maps_to_function_calling_config(choice, config):
    body = build_generate_request(options(tools=(WEATHER,), tool_choice=choice))
    expected = None if config is None else {"functionCallingConfig": config}
    assert body.get("toolConfig") == expected


def test_five_stop_sequences_are_sent():
    body = build_generate_request(options(stop=("a", "b", "c", "d", "e")))
    assert body["generationConfig"]["stopSequences"] == ["a", "b", "c", "d", "e"]


def test_max_output_tokens_falls_back_to_the_given_default():
    body = build_generate_request(options(), max_output_tokens=65536)
    assert body["generationConfig"]["maxOutputTokens"] == 65536
    body = build_generate_request(options(max_tokens=10), max_output_tokens=65536)
    assert body["generationConfig"]["maxOutputTokens"] == 10


@pytest.mark.parametrize(
    ("model", "effort", "config"),
    [
        (
            "gemini-3-pro-preview",
            "high",
            {"thinkingLevel": "HIGH", "includeThoughts": True},
        ),
        (
            "gemini-3-flash-preview",
            "minimal",
            {"thinkingLevel": "MINIMAL", "includeThoughts": True},
        ),
        ("gemini-2.5-flash", "off", {"thinkingBudget": 0}),
        (
            "gemini-2.5-flash",
            "medium",
            {"thinkingBudget": 8192, "includeThoughts": True},
        ),
        ("gemini-2.5-pro", "auto", {"thinkingBudget": -1, "includeThoughts": True}),
        (
            "gemini-2.0-flash-exp",
            "high",
            {"thinkingBudget": 24576, "includeThoughts": True},
        ),
        (
            "gemini-9-ultra",
            "medium",
            {"thinkingLevel": "MEDIUM", "includeThoughts": True},
        ),
    ],
)
def test_the_effort_table(model, effort, config):
    body = build_generate_request(options(model=model, reasoning_effort=effort))
    assert body["generationConfig"]["thinkingConfig"] == config


# --- refusals, before any I/O ---------------------------------------------------------


IMAGE = ImageBlock(
    attachment=ImageRef(
        attachment_id="sha256:" + "0" * 64,
        media_type="image/png",
        bytes=10,
        width=1,
        height=1,
    )
)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        # Images: an unlisted model is text only; a listed one needs a store.
        (
            {"model": "gemma-3-27b-it", "messages": (create_user_message([IMAGE]),)},
            ErrorCode.UNSUPPORTED_CONTENT,
        ),
        ({"messages": (create_user_message([IMAGE]),)}, ErrorCode.MISSING_ATTACHMENT),
        (
            {"messages": (create_tool_result_message("c0", [IMAGE]),)},
            ErrorCode.MISSING_ATTACHMENT,
        ),
        (
            {"model": "gemini-3-pro-preview", "reasoning_effort": "minimal"},
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        ),
        (
            {"model": "gemini-2.5-pro", "reasoning_effort": "off"},
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        ),
        ({"reasoning_effort": "max"}, ErrorCode.UNSUPPORTED_REASONING_EFFORT),
        ({"stop": ("a", "b", "c", "d", "e", "f")}, ErrorCode.UNSUPPORTED_OPTION),
        (
            {"messages": (create_tool_result_message("nowhere", "x"),)},
            ErrorCode.INVALID_REQUEST,
        ),
        (
            {
                "messages": (
                    create_assistant_message(
                        [ToolCallBlock(id=CallId("c"), name="f", arguments="[1]")],
                        provider="gemini",
                        model=MODEL,
                    ),
                )
            },
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_what_cannot_be_sent_is_refused(fields, code):
    with pytest.raises(LlmError) as caught:
        build_generate_request(options(**fields))
    assert caught.value.code == code


def test_a_catalog_effort_without_a_setting_is_a_config_error():
    with pytest.raises(AdapterConfigError) as caught:
        GeminiModel(id="odd", thinking="level", efforts=("off",))
    assert caught.value.key == "efforts"
    assert 'for thinking "level"' in str(caught.value)
    with pytest.raises(AdapterConfigError) as caught:
        GeminiModel(id="odd", efforts=("low",), default_effort="high")
    assert caught.value.key == "defaultEffort"
    with pytest.raises(AdapterConfigError) as caught:
        GeminiModel(id="odd", thinking="tokens")  # type: ignore[arg-type]
    assert caught.value.key == "thinking"


def test_a_budget_model_without_efforts_takes_the_budget_efforts():
    assert GeminiModel(id="b", thinking="budget").efforts == (
        "off",
        "low",
        "medium",
        "high",
        "auto",
    )


def test_model_for_reads_the_catalog_first():
    assert model_for("gemini-2.5-pro") is DEFAULT_MODELS[2]
    assert model_for("gemini-2.5-pro", ()).efforts == (
        "off",
        "low",
        "medium",
        "high",
        "auto",
    )


# --- replay round trip ---------------------------------------------------------


def test_a_signed_call_is_replayed_with_its_signature_on_the_same_part():
    answer = answered("function_call_signed")
    (call,) = [b for b in answer.content if isinstance(b, ToolCallBlock)]
    body = build_generate_request(
        options(
            create_user_message("Weather?"),
            answer,
            create_tool_result_message(call.id, "12 °C"),
            tools=(WEATHER,),
        )
    )
    signature = SIG1
    assert body["contents"][1] == {
        "role": "model",
        "parts": [
            {
                "functionCall": {
                    "name": "get_weather",
                    "args": {"city": "Oslo", "unit": "celsius"},
                },
                "thoughtSignature": signature,
            }
        ],
    }
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"output": "12 °C"}}}
    ]


def test_parallel_calls_replay_the_signature_on_the_first_call_only():
    answer = answered("parallel_calls_trailing_signature")
    calls = [b for b in answer.content if isinstance(b, ToolCallBlock)]
    body = build_generate_request(
        options(
            create_user_message("Paris and London?"),
            answer,
            create_tool_result_message(calls[0].id, "20 °C"),
            create_tool_result_message(calls[1].id, "15 °C"),
        )
    )
    first, second = body["contents"][1]["parts"]
    assert first["thoughtSignature"] == SIG2
    assert first["functionCall"] == {"name": "get_weather", "args": {"city": "Paris"}}
    assert second == {
        "functionCall": {"name": "get_weather", "args": {"city": "London"}}
    }
    # Both answers in one user turn, in call order, matched by name.
    assert body["contents"][2] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "get_weather",
                    "response": {"output": "20 °C"},
                }
            },
            {
                "functionResponse": {
                    "name": "get_weather",
                    "response": {"output": "15 °C"},
                }
            },
        ],
    }


def test_gemini_given_ids_go_back_on_calls_and_responses():
    answer = answered("parallel_calls_first_signed_with_ids")
    body = build_generate_request(
        options(
            create_user_message("?"),
            answer,
            create_tool_result_message("fc-9q4m", "noon"),
            create_tool_result_message("fc-7h2k", "sun"),
        )
    )
    parts = body["contents"][1]["parts"]
    assert [p["functionCall"]["id"] for p in parts] == ["fc-7h2k", "fc-9q4m"]
    assert "thoughtSignature" in parts[0]
    assert "thoughtSignature" not in parts[1]
    assert [p["functionResponse"]["id"] for p in body["contents"][2]["parts"]] == [
        "fc-9q4m",
        "fc-7h2k",
    ]


def test_a_signed_thought_goes_back_as_a_thought_part():
    answer = answered("thought_then_signature_only_thought_part")
    body = build_generate_request(options(create_user_message("plan"), answer))
    assert body["contents"][1]["parts"] == [
        {
            "text": "Planning the reply.",
            "thought": True,
            "thoughtSignature": SIG3,
        },
        {"text": "Here is the plan."},
    ]


def test_kept_parts_go_back_after_their_block():
    answer = answered("server_side_code_parts")
    body = build_generate_request(options(create_user_message("2**10?"), answer))
    assert body["contents"][1]["parts"] == [
        {"text": "Let me compute it."},
        {"executableCode": {"language": "PYTHON", "code": "print(2**10)\n"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1024\n"}},
        {"text": "2**10 is 1024."},
    ]
    twice = answered("text_signed_twice")
    body = build_generate_request(options(create_user_message("x"), twice))
    assert body["contents"][1]["parts"] == [
        {
            "text": "Signed text",
            "thoughtSignature": SIG1,
        },
        {
            "text": "",
            "thoughtSignature": SIG2,
        },
    ]


def test_a_call_keeps_its_signature_when_other_blocks_were_dropped():
    answer = answered("function_call_signed")
    edited = Message(
        id=answer.id,
        role="assistant",
        content=tuple(b for b in answer.content if isinstance(b, ToolCallBlock)),
        source=answer.source,
    )
    body = build_generate_request(options(create_user_message("?"), edited))
    (part,) = body["contents"][1]["parts"]
    assert part["thoughtSignature"].startswith("CiQBjz1r")


def test_replay_state_of_another_wire_is_never_sent():
    call = ToolCallBlock(id=CallId("c1"), name="f", arguments="{}")
    foreign = create_assistant_message(
        [call],
        provider="openai",
        model="gpt",
        replay_state=ReplayEnvelope(
            response={"wire": "openai-responses"},
            blocks=[{"callId": "c1", "thoughtSignature": "SIG", "id": "x"}],
        ),
    )
    body = build_generate_request(options(create_user_message("?"), foreign))
    assert body["contents"][1]["parts"] == [{"functionCall": {"name": "f", "args": {}}}]


def test_a_call_id_mismatch_at_a_position_drops_that_entry():
    call = ToolCallBlock(id=CallId("other"), name="f", arguments="{}")
    message = create_assistant_message(
        [call],
        provider="gemini",
        model=MODEL,
        replay_state=ReplayEnvelope(
            response={"wire": "gemini-generate-content"},
            blocks=[{"callId": "c1", "thoughtSignature": "SIG"}],
        ),
    )
    body = build_generate_request(options(create_user_message("?"), message))
    assert body["contents"][1]["parts"] == [{"functionCall": {"name": "f", "args": {}}}]


def test_empty_text_and_unsigned_reasoning_are_not_sent():
    message = create_assistant_message(
        [ReasoningBlock(text="thinking"), TextBlock(text="")],
        provider="gemini",
        model=MODEL,
    )
    body = build_generate_request(
        options(create_user_message("a"), message, create_user_message("b"))
    )
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]}
    ]


def test_a_result_answers_the_nearest_earlier_call_with_its_id():
    first = ToolCallBlock(id=CallId("c"), name="first_tool", arguments="{}")
    second = ToolCallBlock(id=CallId("c"), name="second_tool", arguments="{}")
    body = build_generate_request(
        options(
            create_user_message("a"),
            create_assistant_message([first], provider="gemini", model=MODEL),
            create_tool_result_message("c", "1"),
            create_assistant_message([second], provider="gemini", model=MODEL),
            create_tool_result_message("c", "2"),
        )
    )
    names = [
        part["functionResponse"]["name"]
        for content in body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]
    assert names == ["first_tool", "second_tool"]


def test_a_result_before_its_call_is_refused():
    call = ToolCallBlock(id=CallId("c"), name="f", arguments="{}")
    with pytest.raises(LlmError) as caught:
        build_generate_request(
            options(
                create_tool_result_message("c", "early"),
                create_assistant_message([call], provider="gemini", model=MODEL),
            )
        )
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_a_streamed_call_goes_back_whole_with_its_signature():
    answer = answered("vertex_streamed_function_call_args")
    (call,) = [b for b in answer.content if isinstance(b, ToolCallBlock)]
    body = build_generate_request(
        options(
            create_user_message("Save a note on Oslo."),
            answer,
            create_tool_result_message(call.id, "saved"),
        )
    )
    assert body["contents"][1]["parts"][1] == {
        "functionCall": {
            "name": "write_file",
            "args": {
                "path": "notes/oslo.md",
                "content": '# Oslo\nCapital of "Norway".',
                "overwrite": True,
                "mode": 420,
            },
        },
        "thoughtSignature": "CtwBAY89a1/c3RyZWFtZWRDYWxsU2lnbmF0dXJlAAECAwQFBgcICQoL",
    }
