"""ResponsesTranslator on the recorded-style streams of
``tests/fixtures/openai_responses``: every fixture decoded under several byte
splits gives exactly its expected chunks, strictly valid; the facts each edge
case is about are asserted on their own as well."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.openai_responses.profiles import PROFILES
from dsh_llm.adapters.openai_responses.translate import ResponsesTranslator
from dsh_llm.assembler import assemble_stream
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import UsageChunk
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.transport.sse import SseDecoder
from dsh_llm.validator import validate_stream

FIXTURES = Path(__file__).parents[2] / "fixtures" / "openai_responses"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.sse"))
FAILED = (
    "ollama_runner_error_eof",
    "openai_error_only",
    "openai_error_then_failed",
    "openai_failed_only",
    "openai_failed_then_error",
    "openrouter_upstream_error_payload",
    "vllm_engine_error",
)
"""Fixtures whose stream fails (the translator raises): an error event, a
``response.failed``, a body that ends before a terminal event."""
SERVICES = {"copilot": "openai"}
"""Responses-compatible services without a profile of their own (the fixture
name's prefix), each with the profile its fixtures replay under."""


def server_of(name: str) -> str:
    """The profile fixture ``name`` replays under (its ``<server>_`` prefix)."""
    prefix = name.split("_")[0]
    return SERVICES.get(prefix, prefix)


def _pieces(body: bytes, split: str) -> list[bytes]:
    if split == "whole":
        return [body]
    if split == "random":
        rng = random.Random(len(body))
        out, at = [], 0
        while at < len(body):
            step = rng.randint(1, 40)
            out.append(body[at : at + step])
            at += step
        return out
    size = int(split)
    return [body[at : at + size] for at in range(0, len(body), size)]


def replay(
    name: str, split: str = "whole"
) -> tuple[list[StreamChunk], LlmError | None]:
    """Decode and translate fixture ``name`` as the read loop drives them: what
    a runtime consumer sees (for a raised failure, what the translator owes
    before it and the error finish the runtime makes of it), and that error."""
    body = (FIXTURES / f"{name}.sse").read_bytes()
    translator = ResponsesTranslator(PROFILES[server_of(name)])
    decoder = SseDecoder(terminal_data=None, provider="test")
    chunks: list[StreamChunk] = []
    try:
        for piece in _pieces(body, split):
            for event in decoder.feed(piece):
                if not translator.finished:
                    chunks.extend(translator.feed(event))
        for event in decoder.close():
            chunks.extend(translator.feed(event))
        chunks.extend(translator.close())
    except LlmError as exc:
        chunks.extend(translator.before_failure())
        chunks.append(Finish(reason=FinishReason.error(exc.failure)))
        return chunks, exc
    return chunks, None


def _expected(name: str) -> list[dict[str, Any]]:
    return [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]


@pytest.mark.parametrize("split", ["whole", "1", "7", "random"])
@pytest.mark.parametrize("name", NAMES)
def test_every_fixture_gives_its_expected_strict_chunks(name, split):
    chunks, error = replay(name, split)
    assert [chunk_to_dict(c) for c in chunks] == _expected(name)
    # A failure is raised, never yielded by the translator.
    assert (error is not None) == (name in FAILED)
    assert list(validate_stream(chunks, strict=True)) == chunks


def test_every_fixture_has_its_expected_chunks_and_a_known_server():
    assert len(NAMES) >= 30
    assert (
        sorted(p.name.removesuffix(".chunks.jsonl") for p in FIXTURES.glob("*.jsonl"))
        == NAMES
    )
    assert {name.split("_")[0] for name in NAMES} == set(PROFILES) | set(SERVICES)


def _tail(name: str) -> tuple[Any, FinishReason, Any]:
    chunks, _ = replay(name)
    usage, finish = chunks[-2:]
    assert isinstance(usage, UsageChunk)
    assert isinstance(finish, Finish)
    return usage.usage, finish.reason, finish.replay_state


def _ends(name: str) -> list[Any]:
    chunks, _ = replay(name)
    return [c.block for c in chunks if isinstance(c, BlockEnd)]


def test_full_turn_is_reasoning_text_call_with_disjoint_usage():
    usage, reason, replay_state = _tail("openai_full_turn")
    assert [b.type for b in _ends("openai_full_turn")] == [
        "reasoning",
        "text",
        "tool-call",
    ]
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        28,
        384,
        0,
    )
    assert (usage.output_tokens, usage.reasoning_tokens) == (96, 64)
    assert reason == FinishReason.TOOL_CALLS
    assert replay_state.blocks[0]["encrypted_content"] == "gAAAAABpQ-enc"
    assert replay_state.blocks[1]["phase"] == "commentary"
    assert replay_state.blocks[2] == {
        "type": "function_call",
        "id": "fc_7",
        "call_id": "call_k2",
        "name": "get_weather",
    }


def test_done_after_the_terminal_event_changes_nothing():
    assert replay("openai_text_only") == replay("openai_text_then_done")


def test_an_empty_output_is_empty_response_after_usage():
    usage, reason, _ = _tail("openai_empty_output")
    assert usage.input_tokens == 9
    assert reason.failure is not None
    assert reason.failure.code == "EMPTY_RESPONSE"


def test_parallel_calls_keep_their_call_ids_in_added_order():
    ends = _ends("openai_parallel_calls")
    assert [(b.id, b.name) for b in ends] == [
        ("call_a", "get_weather"),
        ("call_b", "get_time"),
    ]


def test_overlapping_calls_are_never_interleaved():
    ends = _ends("openrouter_overlapping_calls")
    assert [b.arguments for b in ends] == ['{"city":"Bern"}', '{"tz":"UTC"}']


def test_several_items_each_get_a_block_and_phases_are_kept():
    _, reason, replay_state = _tail("openai_several_items")
    kinds = [b.type for b in _ends("openai_several_items")]
    assert kinds == ["reasoning", "text", "tool-call", "reasoning", "tool-call", "text"]
    assert [e.get("phase") for e in replay_state.blocks if e["type"] == "message"] == [
        "commentary",
        "final_answer",
    ]
    assert reason == FinishReason.TOOL_CALLS


def test_summary_parts_join_with_a_blank_line():
    assert _ends("openai_summary_parts")[0].text == "First, parse.\n\nThen answer."


def test_reasoning_without_summary_is_an_empty_block_with_its_replay_entry():
    ends = _ends("openai_reasoning_without_summary")
    _, _, replay_state = _tail("openai_reasoning_without_summary")
    assert ends[0].type == "reasoning"
    assert ends[0].text == ""
    assert replay_state.blocks[0]["encrypted_content"] == "gAAAAB-only-encrypted"


def test_a_refusal_keeps_its_text_and_ends_in_the_refusal_error():
    _, reason, replay_state = _tail("openai_refusal")
    assert _ends("openai_refusal")[0].text == "I can't help with that."
    assert reason.failure == LlmFailure(
        message="model stopped: refusal", code="REFUSAL"
    )
    assert replay_state is None


def test_max_output_tokens_is_max_tokens_and_the_assembler_drops_the_cut_call():
    chunks, _ = replay("openai_max_output_tokens")
    _, reason, _ = _tail("openai_max_output_tokens")
    assert reason == FinishReason.MAX_TOKENS
    assembled, _ = assemble_stream(iter(chunks))
    assert not any(isinstance(b, ToolCallBlock) for b in assembled.blocks())


def test_completed_with_an_incomplete_item_is_max_tokens():
    _, reason, _ = _tail("lmstudio_completed_with_incomplete_item")
    assert reason == FinishReason.MAX_TOKENS


def test_content_filter_is_an_error_finish():
    _, reason, _ = _tail("openai_content_filter")
    assert reason.failure is not None
    assert reason.failure.code == "CONTENT_FILTER"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("openai_error_then_failed", "SERVER"),
        ("openai_failed_then_error", "RATE_LIMIT"),
        ("openai_error_only", "CONTEXT_WINDOW_EXCEEDED"),
        ("openai_failed_only", "VECTOR_STORE_TIMEOUT"),
    ],
)
def test_failures_are_raised_and_end_in_exactly_one_error_finish(name, code):
    chunks, error = replay(name)
    assert error is not None
    assert error.code == code
    finishes = [c for c in chunks if isinstance(c, Finish)]
    assert len(finishes) == 1
    assert finishes[0] is chunks[-1]
    assert finishes[0].reason.failure is not None
    assert finishes[0].reason.failure.code == code


def test_a_failure_with_usage_reports_it_before_the_finish_with_the_block_open():
    chunks, _ = replay("openai_failed_then_error")
    assert [type(c) for c in chunks] == [BlockStart, TextDelta, UsageChunk, Finish]
    assert isinstance(chunks[-2], UsageChunk)
    assert chunks[-2].usage.input_tokens == 30


def test_eof_before_a_terminal_event_is_stream_closed():
    chunks, error = replay("ollama_runner_error_eof")
    assert error is not None
    assert error.code == ErrorCode.STREAM_CLOSED
    assert error.message == (
        "Ollama (Responses API) stream ended before its terminal event "
        "(response.completed, response.incomplete or response.failed)"
    )
    # The open block stays open: no usage was reported, no finish but the error.
    assert [type(c) for c in chunks] == [BlockStart, TextDelta, Finish]


def test_events_after_the_terminal_one_produce_nothing():
    chunks, _ = replay("openai_terminal_then_more")
    assert isinstance(chunks[-1], Finish)
    assert sum(isinstance(c, Finish) for c in chunks) == 1


def test_out_of_order_done_keeps_added_order_and_the_late_encrypted_reasoning():
    _, _, replay_state = _tail("openrouter_out_of_order_done")
    assert [b.type for b in _ends("openrouter_out_of_order_done")] == [
        "reasoning",
        "text",
        "tool-call",
    ]
    assert replay_state.blocks[0]["encrypted_content"] == "gAAAAB-openrouter-late"


def test_ollama_reused_index_keeps_the_text_and_both_calls():
    ends = _ends("ollama_text_then_calls_reused_index")
    assert [b.type for b in ends] == ["text", "tool-call", "tool-call"]
    assert ends[0].text == "Let me check."


def test_non_dense_indexes_give_dense_blocks():
    assert [b.type for b in _ends("openrouter_non_dense_indexes")] == [
        "tool-call",
        "text",
        "tool-call",
    ]


def test_missing_item_done_is_closed_from_the_terminal_output():
    ends = _ends("vllm_missing_item_done")
    assert [b.type for b in ends] == ["text", "tool-call"]
    assert ends[1].arguments == '{"tz":"UTC"}'


def test_vllm_repeated_first_fragment_is_not_doubled():
    assert (
        _ends("vllm_raw_reasoning_repeated_fragment")[1].arguments == '{"city":"Lyon"}'
    )


def test_arguments_done_longer_than_the_deltas_adds_the_rest():
    assert _ends("openai_arguments_done_longer")[0].arguments == '{"city":"Nice"}'


def test_a_call_without_arguments_ends_with_braces():
    assert _ends("openai_call_without_arguments")[0].arguments == "{}"


def test_encrypted_content_comes_from_done_never_from_added():
    _, _, replay_state = _tail("openai_encrypted_partial_on_added")
    assert replay_state.blocks[0]["encrypted_content"] == "gAAAAB-final-complete"


@pytest.mark.parametrize(
    "name", ["vllm_raw_reasoning_repeated_fragment", "vllm_reasoning_part_events"]
)
def test_vllm_raw_reasoning_is_a_reasoning_block_with_its_content_for_replay(name):
    _, _, replay_state = _tail(name)
    assert _ends(name)[0].type == "reasoning"
    assert replay_state.blocks[0]["content"][0]["type"] == "reasoning_text"


def test_ollama_zeros_are_unknown_and_its_plain_thinking_is_kept_for_replay():
    usage, _, replay_state = _tail("ollama_thinking_zeros")
    assert (usage.input_tokens, usage.output_tokens) == (26, 31)
    assert usage.cache_read_tokens is None
    assert usage.reasoning_tokens is None
    assert replay_state.blocks[0]["encrypted_content"] == "User asks for Lyon."


def test_hosted_tools_are_server_blocks_and_unknown_events_give_nothing():
    # The web search is a server tool call and its result; the prefixed
    # ``openai:mcp_list_tools``, audio and unknown events give no block; the
    # annotation that came after its message ended joins no block.
    ends = _ends("openai_hosted_tools_and_unknown")
    assert [b.type for b in ends] == ["server-tool-call", "server-tool-result", "text"]
    assert ends[2] == TextBlock(text="Sunny in Lyon.")


def test_sequence_gaps_repeats_and_minus_one_are_logged_not_fatal(caplog):
    caplog.set_level("DEBUG", logger="dsh_llm.adapters.openai_responses.translate")
    for name in ("openai_sequence_gap", "vllm_sequence_minus_one"):
        caplog.clear()
        chunks, error = replay(name)
        assert error is None
        assert isinstance(chunks[-1], Finish)
        assert chunks[-1].reason == FinishReason.STOP
        records = [r for r in caplog.records if "sequence_number" in r.getMessage()]
        assert records
        assert records[0].levelname == "WARNING"


def test_a_dense_stream_logs_nothing(caplog):
    caplog.set_level("DEBUG", logger="dsh_llm.adapters.openai_responses.translate")
    replay("openai_full_turn")
    assert not caplog.records


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("copilot_item_ids_per_event", ["reasoning", "text"]),
        ("copilot_call_ids_per_event", ["reasoning", "text", "tool-call"]),
    ],
)
def test_ids_that_change_on_every_event_give_each_item_one_block(name, kinds):
    # Every event of an item carries a fresh item_id (GitHub Copilot): items
    # are the output_index's, and what output_item.done and the terminal
    # output repeat adds nothing.
    chunks, error = replay(name)
    assert error is None
    ends = _ends(name)
    assert [b.type for b in ends] == kinds
    assert ends[0].text == "Check the forecast.\n\nThen answer."
    assert ends[1].text.startswith("Sunny in Lyon")
    assert sum(isinstance(c, BlockStart) for c in chunks) == len(kinds)
    streamed = "".join(c.text for c in chunks if isinstance(c, TextDelta))
    assert streamed == ends[1].text
    _, reason, replay_state = _tail(name)
    assert reason == (
        FinishReason.TOOL_CALLS if "tool-call" in kinds else FinishReason.STOP
    )
    # The entries carry the ids the finished items (output_item.done) had.
    body = (FIXTURES / f"{name}.sse").read_text(encoding="utf-8")
    done_ids = [
        event["item"]["id"]
        for event in _payloads(body)
        if event["type"] == "response.output_item.done"
    ]
    assert [entry["id"] for entry in replay_state.blocks] == done_ids
    assert replay_state.blocks[0]["encrypted_content"] == "gAAAAB-copilot-enc"
    if "tool-call" in kinds:
        assert (ends[2].id, ends[2].arguments) == (
            "call_cp7Hq2",
            '{"tz":"Europe/Paris"}',
        )


def _payloads(body: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])
        for line in body.splitlines()
        if line.startswith("data: ")
    ]


def test_a_bare_error_payload_from_a_proxy_is_an_error_finish_with_its_status():
    chunks, _ = replay("openrouter_upstream_error_payload")
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure == LlmFailure(
        message="Provider returned error", code="SERVER", status=502
    )


def test_an_engine_error_event_wins_over_the_failed_event_after_it():
    chunks, _ = replay("vllm_engine_error")
    assert sum(isinstance(c, Finish) for c in chunks) == 1
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == "SERVER"
