"""OpenAICompatAdapter end to end against the loopback server: the recorded-style
streams of ``tests/fixtures/openai_compat`` and one scripted stream per quirk of
OpenAI, vLLM, llama.cpp, Ollama and OpenRouter (the table of
``docs/local-servers.md``). Every stream passes
``validate_stream(strict=True)`` and is assembled to the blocks it must give."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.assembler import BlockAssembler
from dsh_llm.assembler import collect
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event
from dsh_llm.testing import sse_events
from dsh_llm.validator import validate_stream

from ..proxy_env import use_proxy
from .chat_chunks import chunk
from .chat_chunks import finish
from .chat_chunks import only_usage
from .chat_chunks import reasoning
from .chat_chunks import text
from .chat_chunks import tool
from .chat_chunks import usage

FIXTURES = Path(__file__).parent.parent / "fixtures" / "openai_compat"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.sse"))
ROUTE = "local"


def _adapter(server: LoopbackServer, **options: Any) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(f"{server.url}/v1", **options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    return GenerateOptions(provider=ROUTE, model="m", **fields)


def _play(
    server: LoopbackServer,
    body: bytes | tuple[bytes, ...],
    *,
    split: int | None = None,
    framing: str = "chunked",
    **options: Any,
) -> list[Any]:
    """Serve ``body`` once and return the adapter's strictly validated chunks."""
    server.enqueue(Reply(body=body, split=split, framing=framing))  # type: ignore[arg-type]
    with _adapter(server, **options) as adapter:
        return list(validate_stream(adapter.stream(_options()), strict=True))


def _raised(
    server: LoopbackServer,
    body: bytes | tuple[bytes, ...],
    *,
    split: int | None = None,
    framing: str = "chunked",
) -> tuple[list[Any], LlmError]:
    """Serve ``body`` once: the chunks the adapter yields before it raises, and
    the ``LlmError`` it raises (checked: those chunks, then the error finish the
    runtime makes of it, form a strict stream)."""
    server.enqueue(Reply(body=body, split=split, framing=framing))  # type: ignore[arg-type]
    chunks: list[Any] = []
    with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
        chunks.extend(adapter.stream(_options()))
    end = Finish(reason=FinishReason.error(caught.value.failure))
    validate_stream([*chunks, end], strict=True)
    assert not any(isinstance(c, Finish) for c in chunks)
    return chunks, caught.value


def _consumed(
    server: LoopbackServer, body: bytes, *, split: int | None, framing: str
) -> list[Any]:
    """What a runtime consumer sees for ``body``: the adapter's chunks, ended by
    the error finish of an ``LlmError`` it raises; strictly validated."""
    server.enqueue(Reply(body=body, split=split, framing=framing))
    chunks: list[Any] = []
    with _adapter(server) as adapter:
        try:
            chunks.extend(adapter.stream(_options()))
        except LlmError as error:
            chunks.append(Finish(reason=FinishReason.error(error.failure)))
    return list(validate_stream(chunks, strict=True))


def _blocks(chunks: list[Any]) -> tuple[Any, ...]:
    assembler = BlockAssembler()
    for item in chunks:
        assembler.push(item)
    return assembler.blocks()


def _tail(chunks: list[Any]) -> tuple[TokenUsage, FinishReason]:
    usage_chunk, finish_chunk = chunks[-2:]
    assert isinstance(usage_chunk, UsageChunk)
    assert isinstance(finish_chunk, Finish)
    return usage_chunk.usage, finish_chunk.reason


SPLITS = pytest.mark.parametrize("split", [None, 1], ids=["whole", "1-byte"])


# --- recorded-style streams -----------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "close"])
@SPLITS
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_translates_to_its_expected_chunks(
    server, name, split, framing
):
    expected = [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]
    body = (FIXTURES / f"{name}.sse").read_bytes()
    chunks = _consumed(server, body, split=split, framing=framing)
    assert [chunk_to_dict(c) for c in chunks] == expected


def test_every_fixture_has_its_expected_chunks():
    assert NAMES
    assert (
        sorted(p.name.removesuffix(".chunks.jsonl") for p in FIXTURES.glob("*.jsonl"))
        == NAMES
    )


# --- tool-call quirks -----------------------------------------------------------------


def test_id_and_name_only_on_the_first_delta(server):
    chunks = _play(
        server,
        sse_events(
            [
                tool(0, id="call_1", name="search", args=""),
                tool(0, args='{"q":'),
                tool(0, args='"tea"}'),
                finish("tool_calls"),
            ]
        ),
    )
    assert _blocks(chunks) == (
        ToolCallBlock(id="call_1", name="search", arguments='{"q":"tea"}'),
    )
    assert _tail(chunks)[1] == FinishReason.TOOL_CALLS


@SPLITS
def test_id_and_name_repeated_on_every_delta_are_not_concatenated(server, split):
    # llama.cpp repeats the whole id and name with each fragment.
    chunks = _play(
        server,
        sse_events(
            [
                tool(0, id="kX9", name="search", args='{"q":'),
                tool(0, id="kX9", name="search", args='"tea"'),
                tool(0, id="kX9", name="search", args="}"),
                finish("tool_calls"),
            ]
        ),
        split=split,
    )
    assert _blocks(chunks) == (
        ToolCallBlock(id="kX9", name="search", arguments='{"q":"tea"}'),
    )
    assert {(c.id, c.name) for c in chunks if c.type == "tool-call-delta"} == {
        ("kX9", "search")
    }


def test_an_empty_id_on_continuations_keeps_the_call(server):
    chunks = _play(
        server,
        sse_events(
            [
                tool(0, id="call_v", name="f", args="{"),
                tool(0, id="", args='"a":1'),
                tool(0, id="", args="}"),
                finish("tool_calls"),
            ]
        ),
    )
    assert _blocks(chunks) == (
        ToolCallBlock(id="call_v", name="f", arguments='{"a":1}'),
    )


@SPLITS
def test_a_new_id_on_a_used_index_starts_a_new_call(server, split):
    # Parallel calls all numbered 0, told apart only by their ids (Ollama, vLLM).
    chunks = _play(
        server,
        sse_events(
            [
                tool(0, id="call_a", name="get_weather", args='{"city":'),
                tool(0, args='"Oslo"}'),
                tool(0, id="call_b", name="get_weather", args='{"city":'),
                tool(0, args='"Lima"}'),
                finish("tool_calls"),
            ]
        ),
        split=split,
    )
    assert _blocks(chunks) == (
        ToolCallBlock(id="call_a", name="get_weather", arguments='{"city":"Oslo"}'),
        ToolCallBlock(id="call_b", name="get_weather", arguments='{"city":"Lima"}'),
    )


def test_a_missing_index_continues_the_last_call_until_a_new_id(server):
    chunks = _play(
        server,
        sse_events(
            [
                tool(None, id="a", name="f", args='{"x":'),
                tool(None, args="1}"),
                tool(None, id="b", name="g", args="{}"),
                finish("tool_calls"),
            ]
        ),
    )
    assert _blocks(chunks) == (
        ToolCallBlock(id="a", name="f", arguments='{"x":1}'),
        ToolCallBlock(id="b", name="g", arguments="{}"),
    )


def test_a_tool_without_parameters_and_no_arguments_delta_ends_with_braces(server):
    chunks = _play(
        server, sse_events([tool(0, id="call_t", name="now"), finish("tool_calls")])
    )
    assert _blocks(chunks) == (ToolCallBlock(id="call_t", name="now", arguments="{}"),)
    deltas = [c.arguments_delta for c in chunks if c.type == "tool-call-delta"]
    assert "".join(deltas) == "{}"


@SPLITS
def test_whole_calls_in_one_delta_each(server, split):
    calls = [
        {
            "id": f"call_{n}",
            "index": 0,
            "type": "function",
            "function": {"name": "get_weather", "arguments": f'{{"n":{n}}}'},
        }
        for n in range(3)
    ]
    chunks = _play(
        server,
        sse_events(
            [chunk({"tool_calls": [call]}) for call in calls] + [finish("tool_calls")]
        ),
        split=split,
    )
    assert _blocks(chunks) == tuple(
        ToolCallBlock(id=f"call_{n}", name="get_weather", arguments=f'{{"n":{n}}}')
        for n in range(3)
    )


def test_several_whole_calls_in_one_delta(server):
    calls = [
        {"id": "a", "index": 0, "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "index": 1, "function": {"name": "g", "arguments": '{"y":2}'}},
    ]
    chunks = _play(
        server, sse_events([chunk({"tool_calls": calls}), finish("tool_calls")])
    )
    assert _blocks(chunks) == (
        ToolCallBlock(id="a", name="f", arguments="{}"),
        ToolCallBlock(id="b", name="g", arguments='{"y":2}'),
    )


def test_legacy_function_call_beside_tool_calls_is_ignored(server):
    mirrored = {"name": "lookup", "arguments": '{"q":1}'}
    chunks = _play(
        server,
        sse_events(
            [
                chunk(
                    {
                        "tool_calls": [
                            {"index": 0, "id": "call_m", "function": dict(mirrored)}
                        ],
                        "function_call": mirrored,
                    }
                ),
                chunk({"function_call": {"arguments": " "}}),
                finish("tool_calls"),
            ]
        ),
    )
    assert _blocks(chunks) == (
        ToolCallBlock(id="call_m", name="lookup", arguments='{"q":1}'),
    )


def test_a_legacy_function_call_alone_becomes_a_tool_call(server):
    first = chunk({"function_call": {"name": "lookup", "arguments": ""}})
    first["id"] = "chatcmpl-7"
    chunks = _play(
        server,
        sse_events(
            [
                first,
                chunk({"function_call": {"arguments": '{"q":"tea"}'}}),
                finish("function_call"),
            ]
        ),
    )
    assert _blocks(chunks) == (
        ToolCallBlock(id="call_chatcmpl-7", name="lookup", arguments='{"q":"tea"}'),
    )
    assert _tail(chunks)[1] == FinishReason.TOOL_CALLS


# --- reasoning, think tags, refusal ---------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_in_either_field(server, field):
    chunks = _play(
        server,
        sse_events(
            [chunk({field: "think"}), chunk({field: "ing"}), text("ok"), finish()]
        ),
    )
    assert _blocks(chunks) == (ReasoningBlock(text="thinking"), TextBlock(text="ok"))


def test_the_non_empty_reasoning_field_wins(server):
    chunks = _play(
        server,
        sse_events(
            [
                chunk({"reasoning_content": "", "reasoning": "vllm"}),
                chunk({"reasoning_content": "llama", "reasoning": None}),
                chunk({"reasoning_content": None, "reasoning": ""}),
                text("ok"),
                finish(),
            ]
        ),
    )
    assert _blocks(chunks) == (ReasoningBlock(text="vllmllama"), TextBlock(text="ok"))


def test_reasoning_mirrored_in_both_fields_is_read_once(server):
    # vLLM releases between the rename and the removal sent both names.
    chunks = _play(
        server,
        sse_events(
            [
                chunk({"reasoning_content": "same", "reasoning": "same"}),
                text("ok"),
                finish(),
            ]
        ),
    )
    assert _blocks(chunks) == (ReasoningBlock(text="same"), TextBlock(text="ok"))


def test_think_tags_in_content_stay_text(server):
    chunks = _play(
        server, sse_events([text("<think>hm</think>"), text("Answer."), finish()])
    )
    assert _blocks(chunks) == (TextBlock(text="<think>hm</think>Answer."),)
    assert _tail(chunks)[1] == FinishReason.STOP


def test_a_refusal_is_its_own_text_block_and_a_refusal_error_finish(server):
    chunks = _play(
        server,
        sse_events(
            [
                chunk({"role": "assistant", "content": None, "refusal": None}),
                chunk({"refusal": "I can't "}),
                chunk({"refusal": "help with that."}),
                finish("stop", usage(7, 5)),
            ]
        ),
    )
    assert _blocks(chunks) == (TextBlock(text="I can't help with that."),)
    used, reason = _tail(chunks)
    assert used == TokenUsage(input_tokens=7, output_tokens=5)
    assert reason == FinishReason.error(
        LlmFailure(message="model stopped: refusal", code="REFUSAL")
    )
    with pytest.raises(LlmError) as caught:
        collect(chunks)
    assert caught.value.code == "REFUSAL"


def test_content_and_a_refusal_never_share_a_block(server):
    chunks = _play(
        server,
        sse_events([text("Sure: "), chunk({"refusal": "no."}), finish("length")]),
    )
    assert _blocks(chunks) == (TextBlock(text="Sure: "), TextBlock(text="no."))
    assert _tail(chunks)[1] == FinishReason.MAX_TOKENS


# --- usage ----------------------------------------------------------------------------


def test_usage_on_the_finish_chunk(server):
    chunks = _play(server, sse_events([text("x"), finish("stop", usage(3, 1))]))
    assert _tail(chunks)[0] == TokenUsage(input_tokens=3, output_tokens=1)


def test_usage_on_a_trailing_chunk_without_choices(server):
    chunks = _play(
        server,
        sse_events([text("x"), finish("stop", None), only_usage(usage(9, 2))]),
    )
    assert _tail(chunks)[0] == TokenUsage(input_tokens=9, output_tokens=2)


@SPLITS
def test_usage_on_every_chunk_keeps_the_last_running_total(server, split):
    payloads = [
        chunk({"content": "a"}, None, usage(4, 1)),
        chunk({"content": "b"}, None, usage(4, 2)),
        chunk({}, "stop", usage(4, 3)),
        chunk({}, None, None),
    ]
    chunks = _play(server, sse_events(payloads), split=split)
    assert _tail(chunks)[0] == TokenUsage(input_tokens=4, output_tokens=3)
    assert sum(isinstance(c, UsageChunk) for c in chunks) == 1


def test_no_usage_at_all_is_unknown_counts_still_before_finish(server):
    chunks = _play(server, sse_events([text("x"), finish()]))
    assert _tail(chunks)[0] == TokenUsage.unknown()
    assert _tail(chunks)[0].input_tokens is None


def test_openai_usage_is_mapped_disjointly(server):
    details = {
        "prompt_tokens_details": {"cached_tokens": 1024},
        "completion_tokens_details": {"reasoning_tokens": 40},
    }
    chunks = _play(
        server,
        sse_events(
            [text("x"), finish("stop", None), only_usage(usage(1200, 90, **details))]
        ),
    )
    assert _tail(chunks)[0] == TokenUsage(
        input_tokens=176, output_tokens=90, cache_read_tokens=1024, reasoning_tokens=40
    )


# --- finish reasons and choices -------------------------------------------------------


def test_stop_after_tool_calls_becomes_tool_calls(server):
    chunks = _play(
        server, sse_events([tool(0, id="c", name="f", args="{}"), finish("stop")])
    )
    assert _tail(chunks)[1] == FinishReason.TOOL_CALLS


def test_length_is_max_tokens(server):
    chunks = _play(server, sse_events([text("cut"), finish("length")]))
    assert _tail(chunks)[1] == FinishReason.MAX_TOKENS


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        ("content_filter", "CONTENT_FILTER"),
        ("insufficient_system_resource", "INSUFFICIENT_SYSTEM_RESOURCE"),
    ],
)
def test_other_finish_reasons_are_upper_cased_error_finishes(server, wire, code):
    chunks = _play(server, sse_events([text("part"), finish(wire)]))
    assert _blocks(chunks) == (TextBlock(text="part"),)
    assert _tail(chunks)[1] == FinishReason.error(
        LlmFailure(message=f"model stopped: {wire}", code=code)
    )


def test_only_choice_zero_is_kept_when_several_choices_stream(server):
    chunks = _play(
        server,
        sse_events(
            [
                chunk({"content": "zero"}, index=0),
                chunk({"content": "one"}, index=1),
                chunk(
                    {
                        "tool_calls": [
                            {"index": 0, "id": "x", "function": {"name": "f"}}
                        ]
                    },
                    index=1,
                ),
                finish("stop"),
            ]
        ),
    )
    assert _blocks(chunks) == (TextBlock(text="zero"),)
    assert _tail(chunks)[1] == FinishReason.STOP


# --- errors inside the stream, end markers --------------------------------------------


@pytest.mark.parametrize(
    ("payload", "code", "status"),
    [
        (
            {"error": {"message": "Overloaded", "type": "server_error", "code": None}},
            "SERVER",
            None,
        ),
        (
            {
                "object": "error",
                "message": "bad top_k",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
            "INVALID_REQUEST",
            400,
        ),
        (
            {
                "error": {
                    "object": "error",
                    "message": "boom",
                    "type": "InternalServerError",
                    "code": 500,
                }
            },
            "SERVER",
            500,
        ),
        (
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size",
                    "type": "exceed_context_size_error",
                }
            },
            "CONTEXT_WINDOW_EXCEEDED",
            400,
        ),
        (
            {
                "error": {
                    "message": "Request too large for gpt-x on tokens per min (TPM): "
                    "Limit 30000, Requested 52000.",
                    "type": "tokens",
                    "code": "rate_limit_exceeded",
                }
            },
            "INVALID_REQUEST",
            None,
        ),
    ],
    ids=["openai", "vllm-flat", "sglang-nested", "llamacpp-int-code", "too-large"],
)
def test_an_error_payload_in_the_stream_is_raised(server, payload, code, status):
    chunks, error = _raised(server, sse_events([text("par"), payload]))
    assert (error.code, error.status) == (code, status)
    assert [c.type for c in chunks] == ["block-start", "text-delta"]


@SPLITS
def test_an_old_llamacpp_error_field_is_raised(server, split):
    body = (
        b'error: {"code":500,"message":"slot unavailable","type":"server_error"}\n\n'
        b"data: [DONE]\n\n"
    )
    chunks, error = _raised(server, body, split=split)
    assert chunks == []
    assert (error.message, error.code, error.status) == (
        "slot unavailable",
        "SERVER",
        500,
    )


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
@pytest.mark.parametrize(
    "tail", [b"data: [DONE]\n\n", b"data: [DONE]\n", b"data: [DONE]"]
)
def test_done_with_or_without_its_blank_line(server, framing, tail):
    body = sse_event(text("ok")) + sse_event(finish()) + tail
    if tail == b"data: [DONE]":
        # Not even a line ending: the final event is incomplete.
        server.enqueue(Reply(body=body, framing=framing))
        with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
            list(adapter.stream(_options()))
        assert caught.value.code == ErrorCode.STREAM_CLOSED
        return
    chunks = _play(server, body, framing=framing)
    assert _blocks(chunks) == (TextBlock(text="ok"),)


@pytest.mark.parametrize("as_stop", [False, True])
def test_a_bare_done_is_empty_response(server, as_stop):
    chunks = _play(server, b"data: [DONE]\n\n", empty_response_as_stop=as_stop)
    assert chunks == [
        UsageChunk(usage=TokenUsage.unknown()),
        Finish(
            reason=FinishReason.error(
                LlmFailure(
                    message="model returned a completed response with no content",
                    code="EMPTY_RESPONSE",
                )
            )
        ),
    ]


def test_a_blockless_stop_is_a_plain_stop_with_the_flag(server):
    chunks = _play(server, sse_events([finish("stop")]), empty_response_as_stop=True)
    assert _tail(chunks)[1] == FinishReason.STOP


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_eof_without_done_is_stream_closed(server, framing):
    # Ollama /v1 loses an in-stream error this way: no finish chunk, no [DONE].
    server.enqueue(
        Reply(
            body=sse_events([reasoning("thinking"), text("par")], done=False),
            framing=framing,
        )
    )
    seen: list[Any] = []

    def drain(adapter: OpenAICompatAdapter) -> None:
        seen.extend(validate_stream(adapter.stream(_options()), strict=True))

    with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
        drain(adapter)
    assert caught.value.code == ErrorCode.STREAM_CLOSED
    assert [c.type for c in seen][-1] == "text-delta"


def test_keepalive_and_proxy_comments_emit_nothing(server):
    body = (
        b": ping\n\n",
        b": OPENROUTER PROCESSING\n\n",
        *sse_events([text("x"), finish()]),
    )
    chunks = _play(server, body)
    assert [c.type for c in chunks] == [
        "block-start",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]


@pytest.mark.parametrize("empty", [b"data:\n\n", b"data: \n\n", b"data\n\n"])
def test_an_event_with_empty_data_is_passed_over(server, empty):
    body = (
        *sse_events([text("a")], done=False),
        empty,
        *sse_events([text("b"), finish()]),
    )
    chunks = _play(server, body)
    assert _blocks(chunks) == (TextBlock(text="ab"),)


def test_a_non_json_payload_is_malformed_response(server):
    server.enqueue(Reply(body=b"data: {oops\n\n"))
    with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
        list(adapter.stream(_options()))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "OpenAI-compatible" in caught.value.message


# --- proxies ----------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_local_server_is_reached_with_a_dead_environment_proxy(
    server, monkeypatch, host
):
    use_proxy(monkeypatch)  # HTTP_PROXY, HTTPS_PROXY, ALL_PROXY: nobody listens
    server.enqueue(Reply(body=sse_events([text("local"), finish()])))
    with OpenAICompatAdapter(f"http://{host}:{server.port}/v1") as adapter:
        chunks = list(validate_stream(adapter.stream(_options()), strict=True))
    assert collect(chunks).text == "local"
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"


def test_a_remote_server_is_still_reached_through_the_environment_proxy(
    server, monkeypatch
):
    # ``server`` plays the forward proxy; example.invalid is never resolved.
    use_proxy(monkeypatch, server.url)
    server.enqueue(Reply(body=sse_events([text("proxied"), finish()])))
    with OpenAICompatAdapter("http://example.invalid/v1") as adapter:
        chunks = list(validate_stream(adapter.stream(_options()), strict=True))
    assert collect(chunks).text == "proxied"
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "http://example.invalid/v1/chat/completions"
    assert request.header("host") == "example.invalid"


def test_junk_after_done_neither_delays_the_end_nor_is_read(server):
    junk = tuple(
        step for _ in range(100) for step in (b"data: junk\n\n", Pause(seconds=0.01))
    )
    server.enqueue(Reply(body=(*sse_events([text("x"), finish()]), *junk)))
    with _adapter(server) as adapter:
        chunks: list[Any] = []
        stream = adapter.stream(_options())
        for item in stream:
            chunks.append(item)
            if isinstance(item, Finish):
                finished_at = time.monotonic()
        # The old drain read junk for a whole second before StopIteration.
        assert time.monotonic() - finished_at < 0.5
    assert [c.type for c in validate_stream(chunks, strict=True)][-2:] == [
        "usage",
        "finish",
    ]
