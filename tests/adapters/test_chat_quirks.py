"""The chat-completions translator on what real servers send (issue 26, items 3,
5 and 8) and on the stream quirks a ``WireProfile`` declares: payloads in,
strictly validated chunks out, without I/O."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.chat.finish import map_usage
from dsh_llm.adapters.chat.finish import reasoning_left_out_of_completion
from dsh_llm.adapters.chat.request import CHAT_REPLAY_WIRE
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.translate import ChatCompletionsTranslator
from dsh_llm.adapters.chat.translate import chat_decoder
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import tool_calls_of
from dsh_llm.serde import chunk_to_dict

from .chat_chunks import assemble
from .chat_chunks import chunk
from .chat_chunks import finish
from .chat_chunks import only_usage
from .chat_chunks import text
from .chat_chunks import tool
from .chat_chunks import valid

PROFILE = WireProfile(provider="Test")


def run(
    *payloads: Any,
    profile: WireProfile = PROFILE,
    done: bool = True,
    tools: tuple[str, ...] = (),
) -> list[Any]:
    """What a runtime consumer sees, strictly validated (a raised failure ends
    with the error finish the runtime makes of it)."""
    translator = ChatCompletionsTranslator(profile, tool_names=frozenset(tools))
    out: list[Any] = []
    try:
        for payload in payloads:
            out.extend(translator.feed_payload(payload))
        out.extend(translator.done() if done else translator.close())
    except LlmError as error:
        out.extend(translator.before_failure())
        out.append(Finish(reason=FinishReason.error(error.failure)))
    return valid(out)


def deltas(chunks: list[Any]) -> list[dict[str, Any]]:
    return [chunk_to_dict(c) for c in chunks if isinstance(c, ToolCallDelta)]


def tail(chunks: list[Any]) -> tuple[TokenUsage, FinishReason]:
    usage, end = chunks[-2:]
    assert isinstance(usage, UsageChunk)
    assert isinstance(end, Finish)
    return usage.usage, end.reason


# --- 26.8: a tool name sent in pieces ----------------------------------------------


def test_a_name_sent_in_pieces_is_concatenated():
    chunks = run(
        tool(0, id="c1", name="ba", args=""),
        tool(0, name="sh"),
        tool(0, args='{"cmd":"ls"}'),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="c1", name="bash", arguments='{"cmd":"ls"}'),
    )
    # Every delta names the whole tool: the first one waited for the pieces.
    assert {d["name"] for d in deltas(chunks)} == {"bash"}


def test_a_name_in_three_pieces_with_the_arguments_in_the_last_one():
    chunks = run(
        tool(0, id="c1", name="get", args=""),
        tool(0, name="_wea"),
        tool(0, name="ther", args='{"city":"Oslo"}'),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="c1", name="get_weather", arguments='{"city":"Oslo"}'),
    )
    assert [d["argumentsDelta"] for d in deltas(chunks)] == ["", '{"city":"Oslo"}']


def test_a_name_piece_on_a_call_still_buffered_is_concatenated():
    # The second call waits behind the first: its name may grow until it shows.
    chunks = run(
        tool(0, id="a", name="first", args='{"x":'),
        tool(1, id="b", name="sec", args=""),
        tool(1, name="ond", args="{}"),
        tool(0, args="1}"),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="a", name="first", arguments='{"x":1}'),
        ToolCallBlock(id="b", name="second", arguments="{}"),
    )


def test_a_name_repeated_whole_on_every_fragment_is_one_name():
    chunks = run(
        tool(0, id="k1", name="search", args=""),
        tool(0, id="k1", name="search", args='{"q":'),
        tool(0, id="k1", name="search", args='"tea"}'),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="k1", name="search", arguments='{"q":"tea"}'),
    )


def test_a_doubled_name_is_read_as_pieces_only_when_the_request_declares_it():
    payloads = (
        tool(0, id="c1", name="ab", args=""),
        tool(0, name="ab"),
        tool(0, args="{}"),
        finish("tool_calls"),
    )
    assert assemble(run(*payloads)).tool_calls == (
        ToolCallBlock(id="c1", name="ab", arguments="{}"),
    )
    assert assemble(run(*payloads, tools=("abab", "other"))).tool_calls == (
        ToolCallBlock(id="c1", name="abab", arguments="{}"),
    )
    assert assemble(run(*payloads, tools=("ab", "abab"))).tool_calls == (
        ToolCallBlock(id="c1", name="ab", arguments="{}"),
    )


def test_a_name_piece_after_argument_text_streamed_is_malformed():
    translator = ChatCompletionsTranslator(PROFILE)
    translator.feed_payload(tool(0, id="c1", name="ba", args='{"cmd":'))
    with pytest.raises(LlmError) as caught:
        translator.feed_payload(tool(0, name="sh"))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "a tool name that changed after its call began" in caught.value.message


def test_the_waiting_delta_comes_before_whatever_follows():
    # A call with a name and no argument text yet shows its block-start at
    # once; its first delta comes right before the next thing written.
    translator = ChatCompletionsTranslator(PROFILE)
    first = translator.feed_payload(tool(0, id="c1", name="f", args=""))
    assert first == [BlockStart(index=0, block_type="tool-call")]
    second = translator.feed_payload(text("after"))
    # The text waits behind the call, which may still receive fragments.
    assert [chunk_to_dict(c) for c in second] == [
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "c1",
            "name": "f",
            "argumentsDelta": "",
        }
    ]


@pytest.mark.parametrize("ending", ["done", "close", "failure", "error payload"])
def test_the_waiting_delta_is_never_lost(ending):
    translator = ChatCompletionsTranslator(PROFILE)
    out = list(translator.feed_payload(tool(0, id="c1", name="f", args="")))
    try:
        if ending == "done":
            out.extend(translator.feed_payload(finish("tool_calls")))
            out.extend(translator.done())
        elif ending == "close":
            out.extend(translator.close())
        elif ending == "error payload":
            translator.feed_payload({"error": {"message": "boom"}})
        else:
            raise LlmError("aborted", ErrorCode.ABORTED)
    except LlmError as error:
        out.extend(translator.before_failure())
        out.append(Finish(reason=FinishReason.error(error.failure)))
    valid(out)
    assert deltas(out)[0] == {
        "type": "tool-call-delta",
        "index": 0,
        "id": "c1",
        "name": "f",
        "argumentsDelta": "",
    }


def test_a_call_opened_without_a_name_still_announces_at_once():
    # Unchanged: the id streams first, the name fills in later (rule 5).
    chunks = run(
        tool(0, id="c", function=False),
        tool(0, name="f", args="{}"),
        finish("tool_calls"),
    )
    assert deltas(chunks)[0] == {
        "type": "tool-call-delta",
        "index": 0,
        "id": "c",
        "argumentsDelta": "",
    }
    assert assemble(chunks).tool_calls == (
        ToolCallBlock(id="c", name="f", arguments="{}"),
    )


# --- 26.3: usage that leaves reasoning out -----------------------------------------


def xai_usage(**fields: Any) -> dict[str, Any]:
    usage = {
        "prompt_tokens": 14,
        "completion_tokens": 2,
        "total_tokens": 356,
        "completion_tokens_details": {"reasoning_tokens": 340},
    }
    usage.update(fields)
    return usage


def test_reasoning_left_out_of_completion_tokens_is_added_back():
    usage = map_usage(xai_usage())
    assert usage.output_tokens == 342
    assert usage.reasoning_tokens == 340


def test_reasoning_inside_completion_tokens_is_not_added_twice():
    usage = map_usage(
        {
            "prompt_tokens": 163,
            "completion_tokens": 241,
            "total_tokens": 404,
            "completion_tokens_details": {"reasoning_tokens": 204},
        },
        reasoning_left_out=True,
    )
    assert usage.output_tokens == 241


@pytest.mark.parametrize(
    ("prompt", "completion", "reasoning", "total", "declared", "left_out"),
    [
        (14, 2, 340, 356, False, True),  # total = p + c + r
        (14, 400, 340, 754, False, True),
        (14, 400, 340, 414, True, False),  # total = p + c
        (14, 2, 340, None, False, True),  # more reasoning than completion
        (14, 400, 340, None, False, False),  # no total: the declaration
        (14, 400, 340, None, True, True),
        (14, 400, 340, 999, True, True),  # a total matching neither
        (None, 400, 340, 754, False, False),
    ],
)
def test_the_convention_comes_from_the_counts_else_the_declaration(
    prompt, completion, reasoning, total, declared, left_out
):
    assert (
        reasoning_left_out_of_completion(
            prompt=prompt,
            completion=completion,
            reasoning=reasoning,
            total=total,
            declared=declared,
        )
        is left_out
    )


def test_usage_without_reasoning_details_is_unchanged():
    usage = map_usage({"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8})
    assert usage == TokenUsage(input_tokens=5, output_tokens=3)


def test_a_sum_above_the_safe_integer_is_not_reported():
    usage = map_usage(
        {
            "prompt_tokens": 1,
            "completion_tokens": 2**53 - 1,
            "completion_tokens_details": {"reasoning_tokens": 2**53 - 1},
        },
        reasoning_left_out=True,
    )
    assert usage.output_tokens is None


def test_a_declared_convention_reaches_the_usage_chunk():
    xai = WireProfile(provider="xAI", reasoning_left_out=True)
    reported = {
        "prompt_tokens": 20,
        "completion_tokens": 12,
        "completion_tokens_details": {"reasoning_tokens": 9},
    }
    assert (
        tail(run(text("42"), finish(), only_usage(reported), profile=xai))[
            0
        ].output_tokens
        == 21
    )
    assert tail(run(text("42"), finish(), only_usage(reported)))[0].output_tokens == 12


# --- 26.5: content as a list of typed parts ----------------------------------------


def parts(*items: Any) -> dict[str, Any]:
    return chunk({"content": list(items)})


def thinking(*texts: str) -> dict[str, Any]:
    return {
        "type": "thinking",
        "thinking": [{"type": "text", "text": t} for t in texts],
    }


def test_thinking_parts_are_reasoning_and_text_parts_are_text():
    chunks = run(
        chunk({"role": "assistant", "content": ""}),
        parts(thinking("Let me", " think.")),
        parts({"type": "text", "text": "Hi"}),
        text(" there"),
        finish(),
    )
    assert assemble(chunks).blocks() == (
        ReasoningBlock(text="Let me think."),
        TextBlock(text="Hi there"),
    )


def test_parts_of_one_delta_keep_their_order():
    chunks = run(
        parts(thinking("plan"), {"type": "text", "text": "answer"}),
        finish(),
    )
    assert assemble(chunks).blocks() == (
        ReasoningBlock(text="plan"),
        TextBlock(text="answer"),
    )


def test_citation_parts_are_passed_over():
    chunks = run(
        parts({"type": "text", "text": "Paris"}),
        parts({"type": "reference", "reference_ids": [1, 2]}),
        parts(
            {
                "type": "thinking",
                "thinking": [
                    {"type": "tool_reference", "tool": "web_search", "title": "x"},
                ],
            }
        ),
        parts({"type": "text", "text": "!"}),
        finish(),
    )
    assert assemble(chunks).blocks() == (TextBlock(text="Paris!"),)


def test_a_thinking_part_holding_plain_text_is_reasoning():
    chunks = run(parts({"type": "thinking", "thinking": "plain"}), text("x"), finish())
    assert assemble(chunks).blocks() == (
        ReasoningBlock(text="plain"),
        TextBlock(text="x"),
    )


@pytest.mark.parametrize(
    ("part", "what"),
    [
        ("text", "a content part that is not an object"),
        ({"text": "x"}, "a content part without a string type"),
        ({"type": "text", "text": 3}, "a text part that is not a string"),
        ({"type": "thinking", "thinking": 3}, "a thinking part that is not a list"),
        ({"type": "image_url", "image_url": {"url": "x"}}, "a image_url content part"),
        ({"type": "thinking", "thinking": [{"type": "audio"}]}, "a audio content part"),
        ({"type": "weird\nkind"}, "a (unprintable) content part"),
    ],
)
def test_a_part_the_adapter_cannot_read_is_malformed_never_dropped(part, what):
    chunks = run(parts(part), finish())
    reason = chunks[-1].reason
    assert reason.failure.code == ErrorCode.MALFORMED_RESPONSE
    assert what in reason.failure.message


# --- profile quirks: finish reasons, usage and error places, no [DONE] -------------


def test_a_servers_own_finish_reason_is_read_as_the_standard_one():
    together = WireProfile(provider="Together", finish_reasons={"eos": "stop"})
    assert tail(run(text("hi"), finish("eos"), profile=together))[1] == (
        FinishReason.STOP
    )
    # Without the declaration it stays an unknown reason (an error finish).
    assert tail(run(text("hi"), finish("eos")))[1].failure.code == "EOS"


def test_usage_at_a_declared_path_is_read_and_merged():
    groq = WireProfile(provider="Groq", usage_paths=(("x_groq", "usage"),))
    last = finish("stop")
    last["x_groq"] = {"id": "req_1", "usage": {"prompt_tokens": 5}}
    later = only_usage({"prompt_tokens": 5, "completion_tokens": 7})
    assert tail(run(text("hi"), last, later, profile=groq))[0] == TokenUsage(
        input_tokens=5, output_tokens=7
    )
    assert tail(run(text("hi"), last, profile=groq))[0] == TokenUsage(
        input_tokens=5, output_tokens=None
    )
    assert tail(run(text("hi"), last))[0] == TokenUsage.unknown()


def test_an_error_at_a_declared_path_fails_the_call():
    groq = WireProfile(provider="Groq", error_paths=(("x_groq", "error"),))
    stopped = chunk({})
    stopped["x_groq"] = {"id": "req_1", "error": "the model is overloaded"}
    chunks = run(text("partial"), stopped, finish(), profile=groq)
    failure = chunks[-1].reason.failure
    assert failure.code == ErrorCode.SERVER
    assert failure.message == "the model is overloaded"
    quiet = chunk({})
    quiet["x_groq"] = {"id": "req_1", "error": None}
    assert tail(run(text("ok"), quiet, finish(), profile=groq))[1] == (
        FinishReason.STOP
    )


def test_without_done_a_body_ending_after_the_finish_reason_is_whole():
    perplexity = WireProfile(provider="Perplexity", end_at_eof=True)
    chunks = run(text("Dogs bark."), finish(), profile=perplexity, done=False)
    assert tail(chunks)[1] == FinishReason.STOP
    cut = run(text("Dogs"), profile=perplexity, done=False)
    assert cut[-1].reason.failure.code == ErrorCode.STREAM_CLOSED
    # Other servers still need [DONE].
    assert run(text("x"), finish(), done=False)[-1].reason.failure.code == (
        ErrorCode.STREAM_CLOSED
    )


def test_a_call_the_server_ran_itself_is_a_server_block_never_a_tool_call():
    server_call = tool(0, id="ws_1", name="web_search", args='{"q":"x"')
    server_call["choices"][0]["delta"]["tool_calls"][0]["type"] = "web_search_call"
    chunks = run(
        server_call,
        tool(0, args="}"),
        text("Sunny."),
        tool(1, id="c2", name="f", args="{}"),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ServerToolCallBlock(
            id=CallId("ws_1"),
            name="web_search",
            input='{"q":"x"}',
            data={
                "type": "web_search_call",
                "id": "ws_1",
                "function": {"name": "web_search", "arguments": '{"q":"x"}'},
            },
        ),
        TextBlock(text="Sunny."),
        ToolCallBlock(id="c2", name="f", arguments="{}"),
    )
    alone = run(server_call, tool(0, args="}"), text("Sunny."), finish("tool_calls"))
    assert tail(alone)[1] == FinishReason.STOP
    assert tool_calls_of(assemble(alone).blocks()) == ()


def test_server_calls_end_when_another_item_begins_or_their_index_is_reused():
    def server(index: int | None, **fields: Any) -> dict[str, Any]:
        payload = tool(index, **fields)
        payload["choices"][0]["delta"]["tool_calls"][0]["type"] = "x_search_call"
        return payload

    chunks = run(
        text("Looking."),
        server(0, id="s1", name="x_search"),
        server(0, id="s2", name="x_search", args='{"q":1}'),
        server(None, name="code"),
        text("Found."),
        tool(0, args="late"),  # a late piece of a call already given: passed over
        finish("stop"),
    )
    blocks = assemble(chunks).blocks()
    assert [type(b).__name__ for b in blocks] == [
        "TextBlock",
        "ServerToolCallBlock",
        "ServerToolCallBlock",
        "ServerToolCallBlock",
        "TextBlock",
    ]
    first, second, third = blocks[1:4]
    assert (first.id, first.input) == ("s1", "{}")
    assert (second.id, second.input) == ("s2", '{"q":1}')
    assert (third.id, third.name) == ("srv_2", "code")
    assert tail(chunks)[1] == FinishReason.STOP


# --- reasoning_details kept for the replay (OpenRouter) ----------------------------


def detail(**fields: Any) -> dict[str, Any]:
    return chunk({"reasoning_details": [fields]})


def test_reasoning_details_are_merged_into_the_replay_state():
    openrouter = WireProfile(provider="OpenRouter", reasoning_details=True)
    chunks = run(
        detail(
            type="reasoning.text", text="Think", format="anthropic-claude-v1", index=0
        ),
        detail(type="reasoning.text", text=" more.", index=0),
        detail(type="reasoning.text", signature="c2ln", index=0),
        detail(type="reasoning.encrypted", data="ZW5j", id="rs_1", index=1, extra=1.5),
        text("Done."),
        finish(),
        profile=openrouter,
    )
    state = chunks[-1].replay_state
    assert state.response == {
        "wire": CHAT_REPLAY_WIRE,
        "reasoningDetails": [
            {
                "index": 0,
                "type": "reasoning.text",
                "text": "Think more.",
                "format": "anthropic-claude-v1",
                "signature": "c2ln",
            },
            {"index": 1, "type": "reasoning.encrypted", "data": "ZW5j", "id": "rs_1"},
        ],
    }


def test_reasoning_details_are_ignored_unless_the_profile_keeps_them():
    chunks = run(detail(type="reasoning.text", text="x", index=0), text("y"), finish())
    assert chunks[-1].replay_state is None


def test_no_replay_state_without_details_or_after_a_failure():
    openrouter = WireProfile(provider="OpenRouter", reasoning_details=True)
    assert run(text("y"), finish(), profile=openrouter)[-1].replay_state is None
    failed = run(
        detail(type="reasoning.text", text="x", index=0),
        text("y"),
        finish("content_filter"),
        profile=openrouter,
    )
    assert failed[-1].replay_state is None


@pytest.mark.parametrize(
    ("details", "what"),
    [
        ({"type": "reasoning.text"}, "a reasoning_details field that is not a list"),
        (["text"], "a reasoning detail that is not an object"),
    ],
)
def test_reasoning_details_of_the_wrong_shape_are_malformed(details, what):
    openrouter = WireProfile(provider="OpenRouter", reasoning_details=True)
    chunks = run(chunk({"reasoning_details": details}), profile=openrouter)
    assert chunks[-1].reason.failure.code == ErrorCode.MALFORMED_RESPONSE
    assert what in chunks[-1].reason.failure.message


# --- the waiting delta on every recorded chat stream --------------------------------

_FIXTURES = Path(__file__).parent.parent / "fixtures"
_CHAT_STREAMS = sorted(
    [
        *(_FIXTURES / "openai_compat").glob("*.sse"),
        *(_FIXTURES / "deepseek").glob("*.sse"),
    ]
)


@pytest.mark.parametrize(
    "path", _CHAT_STREAMS, ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_only_an_empty_tool_delta_ever_waits(path):
    # The name handling moves no chunk but a call's first delta without
    # argument text: fed event by event, a call started with no delta gets that
    # empty delta as the very next chunk, in the next event that writes
    # anything (the events between wrote nothing: a finish reason, the usage).
    translator = ChatCompletionsTranslator(
        WireProfile(provider="P", reasoning_fields=("reasoning_content", "reasoning"))
    )
    decoder = chat_decoder("P")
    feeds: list[list[Any]] = []
    try:
        for event in [*decoder.feed(path.read_bytes()), *decoder.close()]:
            if not translator.finished:
                feeds.append(translator.feed(event))
        if not translator.finished:
            feeds.append(translator.close())
    except LlmError:
        feeds.append(translator.before_failure())
    for at, out in enumerate(feeds):
        shown = {c.index for c in out if isinstance(c, ToolCallDelta)}
        waiting = [
            c.index
            for c in out
            if isinstance(c, BlockStart)
            and c.block_type == "tool-call"
            and c.index not in shown
        ]
        for index in waiting:
            later = next(i for i in range(at + 1, len(feeds)) if feeds[i])
            first = feeds[later][0]
            assert isinstance(first, ToolCallDelta)
            assert (first.index, first.arguments_delta) == (index, "")


def test_azure_style_filter_results_need_no_profile_field():
    # Azure's first chunk has empty choices and prompt_filter_results; its
    # chunks carry content_filter_results; a filtered answer ends
    # content_filter. The generic profile already reads all of it.
    first = {
        "id": "",
        "choices": [],
        "prompt_filter_results": [
            {"prompt_index": 0, "content_filter_results": {"hate": {"filtered": False}}}
        ],
    }
    filtered = text("Once upon")
    filtered["choices"][0]["content_filter_results"] = {
        "violence": {"filtered": False, "severity": "safe"}
    }
    chunks = run(first, filtered, finish("content_filter"))
    assert assemble(chunks).blocks() == (TextBlock(text="Once upon"),)
    assert tail(chunks)[1].failure.code == "CONTENT_FILTER"
