"""Anthropic citations and server tools (issue 30): what the translator makes
of ``citations_delta``, ``server_tool_use``/``mcp_tool_use`` and the result
blocks beyond the recorded streams, and what a replay sends back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_llm.adapters.anthropic.request import build_messages_request
from dsh_llm.adapters.anthropic.server_tools import citation_of
from dsh_llm.adapters.anthropic.server_tools import result_block
from dsh_llm.adapters.anthropic.server_tools import wire_citation
from dsh_llm.assembler import collect
from dsh_llm.errors import ErrorCode
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_user_message

from .replay import recorded_turn
from .test_translate import STOP
from .test_translate import block_delta
from .test_translate import block_start
from .test_translate import block_stop
from .test_translate import dicts
from .test_translate import message_delta
from .test_translate import run
from .test_translate import start


def _turn(name: str) -> Message:
    return recorded_turn(name, "claude-sonnet-4-5")


def _assistant_content(*messages: Message) -> list[dict[str, Any]]:
    options = GenerateOptions(
        provider="anthropic",
        model="claude-sonnet-4-5",
        messages=(create_user_message("Q"), *messages, create_user_message("Go on")),
    )
    body = build_messages_request(options, model_max_tokens=1024)
    turn = body["messages"][1]
    assert turn["role"] == "assistant"
    content: list[dict[str, Any]] = turn["content"]
    return content


def test_a_web_search_turn_replays_its_blocks_encrypted_content_and_citations() -> None:
    sent = _assistant_content(_turn("web_search_citations"))

    assert [block["type"] for block in sent] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "text",
    ]
    assert sent[1] == {
        "type": "server_tool_use",
        "id": "srvtoolu_01WS",
        "name": "web_search",
        "input": {"query": "Oslo weather today"},
    }
    assert sent[2]["content"][0]["encrypted_content"] == (
        "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5"
    )
    assert sent[3] == {
        "type": "text",
        "text": "It is sunny in Oslo today, about 21 °C.",
        "citations": [
            {
                "type": "web_search_result_location",
                "cited_text": "Sunny, 21 °C in Oslo this afternoon.",
                "url": "https://weather.example.com/oslo",
                "title": "Oslo forecast",
                "encrypted_index": "Eo8BCioIAhgBIiQ3YTAw",
            }
        ],
    }


@pytest.mark.parametrize(
    "name", ["web_fetch", "code_execution", "mcp_tool", "web_search_error"]
)
def test_every_server_block_goes_back_as_received(name: str) -> None:
    turn = _turn(name)
    sent = _assistant_content(turn)
    server = [
        block
        for block in turn.content
        if isinstance(block, ServerToolCallBlock | ServerToolResultBlock)
    ]
    assert server
    assert [block for block in sent if block["type"] != "text"] == [
        block.data for block in server
    ]


def test_document_citations_go_back_in_the_wire_shape() -> None:
    sent = _assistant_content(_turn("document_citations"))
    citations = [c for block in sent for c in block.get("citations", ())]
    assert citations == [
        {
            "type": "char_location",
            "cited_text": "The grass is green.",
            "document_index": 0,
            "document_title": "Nature facts",
            "start_char_index": 0,
            "end_char_index": 20,
        },
        {
            "type": "page_location",
            "cited_text": "The sky is blue.",
            "document_index": 1,
            "document_title": "Sky report.pdf",
            "start_page_number": 2,
            "end_page_number": 3,
        },
        {
            "type": "content_block_location",
            "cited_text": "Blue skies",
            "document_index": 2,
            "document_title": None,
            "start_block_index": 0,
            "end_block_index": 1,
        },
        {
            "type": "search_result_location",
            "cited_text": "Skies are blue by day.",
            "search_result_index": 0,
            "source": "https://kb.example.com/sky",
            "title": "Sky KB",
            "start_block_index": 0,
            "end_block_index": 0,
        },
    ]
    # Each kind reads back to the citation it came from.
    for wire in citations:
        citation = citation_of(wire)
        assert citation is not None
        assert wire_citation(citation) == wire


def test_another_providers_server_blocks_and_citations_are_left_out() -> None:
    foreign = create_assistant_message(
        (
            ServerToolCallBlock(
                id=CallId("ws_1"),
                name="web_search",
                input="{}",
                data={"type": "web_search_call", "id": "ws_1", "status": "completed"},
            ),
            TextBlock(
                text="Sunny.",
                citations=(
                    Citation(kind="url_citation", url="https://example.com/"),
                    # An Anthropic kind without what the API needs back.
                    Citation(kind="web_search_result_location", url="https://x/"),
                ),
            ),
        ),
        provider="openai",
        model="gpt-5.2",
    )
    assert _assistant_content(foreign) == [{"type": "text", "text": "Sunny."}]


def test_a_server_call_keeps_its_place_among_blocks_the_provider_interleaves() -> None:
    chunks = run(
        start(),
        block_start(
            0, {"type": "server_tool_use", "id": "srv_1", "name": "web_search"}
        ),
        block_start(1, {"type": "text", "text": ""}),
        block_delta(1, {"type": "text_delta", "text": "while searching"}),
        block_delta(0, {"type": "input_json_delta", "partial_json": '{"query":"q"}'}),
        block_stop(0),
        block_stop(1),
        message_delta("end_turn"),
        STOP,
    )
    shown = dicts(chunks)
    assert [c.get("blockType") for c in shown if c["type"] == "block-start"] == [
        "server-tool-call",
        "text",
    ]
    assert shown[-1]["reason"] == {"kind": "stop"}


def test_a_server_call_cut_by_max_tokens_is_dropped() -> None:
    chunks = run(
        start(),
        block_start(0, {"type": "text", "text": "Let me search."}),
        block_stop(0),
        block_start(
            1, {"type": "server_tool_use", "id": "srv_1", "name": "web_search"}
        ),
        block_delta(1, {"type": "input_json_delta", "partial_json": '{"que'}),
        message_delta("max_tokens"),
        STOP,
    )
    dicts(chunks)  # strict
    assert [type(c) for c in chunks if isinstance(c, BlockStart | BlockEnd)] == [
        BlockStart,
        BlockEnd,
    ]
    assert chunks[-1] == Finish(
        reason=FinishReason.MAX_TOKENS, replay_state=chunks[-1].replay_state
    )


def test_a_server_call_never_closed_is_a_cut_answer() -> None:
    chunks = run(
        start(),
        block_start(
            0, {"type": "server_tool_use", "id": "srv_1", "name": "web_search"}
        ),
        message_delta("end_turn"),
        STOP,
    )
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.STREAM_CLOSED


@pytest.mark.parametrize(
    ("block", "delta", "what"),
    [
        (
            {"type": "server_tool_use", "id": "srv_1", "name": "web_search"},
            {"type": "input_json_delta", "partial_json": "{not json"},
            "a server tool input that is not JSON",
        ),
        (
            {"type": "thinking", "thinking": ""},
            {"type": "citations_delta", "citation": {"type": "char_location"}},
            "a citations_delta on a thinking block",
        ),
    ],
)
def test_malformed_server_tool_and_citation_events(
    block: dict[str, Any], delta: dict[str, Any], what: str
) -> None:
    chunks = run(start(), block_start(0, block), block_delta(0, delta), block_stop(0))
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.MALFORMED_RESPONSE
    assert what in finish.reason.failure.message


def test_a_whole_text_block_with_citations_in_message_start() -> None:
    payload = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "model": "claude-x",
            "usage": {"input_tokens": 3},
            "stop_reason": "end_turn",
            "content": [
                {
                    "type": "text",
                    "text": "Cited.",
                    "citations": [
                        {
                            "type": "char_location",
                            "cited_text": "c",
                            "document_index": 0,
                            "start_char_index": 1,
                            "end_char_index": 2,
                        }
                    ],
                }
            ],
        },
    }
    from .test_translate import event

    reply = collect(run(event(payload), STOP))
    assert reply.citations == (
        Citation(kind="char_location", cited_text="c", source_index=0, start=1, end=2),
    )
    assert reply.text == "Cited."


def test_result_names_come_from_the_call_or_the_block_type() -> None:
    orphan = result_block(
        {"type": "tool_search_tool_result", "tool_use_id": "srv_9", "content": {}},
        "tool_search",
    )
    assert orphan.name == "tool_search"
    assert orphan.output is None
    assert orphan.is_error is None
    chunks = run(
        start(),
        block_start(
            0, {"type": "web_search_tool_result", "tool_use_id": "srv_x", "content": []}
        ),
        block_stop(0),
        message_delta("end_turn"),
        STOP,
    )
    ended = [c.block for c in chunks if isinstance(c, BlockEnd)]
    assert ended == [
        ServerToolResultBlock(
            tool_call_id=CallId("srv_x"),
            name="web_search",
            data={
                "type": "web_search_tool_result",
                "tool_use_id": "srv_x",
                "content": [],
            },
        )
    ]
    assert json.dumps(ended[0].data)
