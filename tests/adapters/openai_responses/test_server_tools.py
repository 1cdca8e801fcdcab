"""Responses annotations and hosted tools (issue 30): what the translator makes
of them beyond the recorded streams, and what a replay sends back."""

from __future__ import annotations

from typing import Any

from dsh_llm.adapters.openai_responses.hosted import annotation_citation
from dsh_llm.adapters.openai_responses.profiles import OPENAI
from dsh_llm.adapters.openai_responses.request import build_responses_request
from dsh_llm.assembler import assemble_stream
from dsh_llm.assembler import collect
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import Source
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_user_message

from .test_translate_events import run
from .test_translate_fixtures import replay


def _turn(name: str) -> Message:
    chunks, error = replay(name)
    assert error is None
    assembler, _ = assemble_stream(chunks)
    return assembler.message(
        ModelSource(
            provider="openai", model="gpt-5.2", replay_state=assembler.replay_state
        )
    )


def _input(*messages: Message) -> list[dict[str, Any]]:
    options = GenerateOptions(
        provider="openai",
        model="gpt-5.2",
        messages=(create_user_message("Q"), *messages, create_user_message("More")),
    )
    items: list[dict[str, Any]] = build_responses_request(options, profile=OPENAI)[
        "input"
    ]
    return items[1:-1]


def test_a_web_search_turn_replays_its_item_and_annotations() -> None:
    sent = _input(_turn("openai_web_search_citations"))
    assert [item["type"] for item in sent] == ["web_search_call", "message"]
    assert sent[0]["id"] == "ws_68a1"
    assert sent[0]["action"]["query"] == "Lyon weather today"
    assert sent[1]["id"] == "msg_ws"
    assert sent[1]["content"][0]["annotations"] == [
        {
            "type": "url_citation",
            "url": "https://meteo.example.fr/lyon",
            "title": "Météo Lyon",
            "start_index": 15,
            "end_index": 31,
        }
    ]


def test_every_hosted_item_goes_back_once() -> None:
    for name, types in (
        ("openai_file_search_annotations_on_done", ["file_search_call", "message"]),
        ("openai_code_interpreter", ["code_interpreter_call", "message"]),
        ("openai_mcp_call", ["mcp_list_tools", "mcp_call", "mcp_call", "message"]),
    ):
        turn = _turn(name)
        sent = _input(turn)
        assert [item["type"] for item in sent] == types, name
        calls = [b for b in turn.content if isinstance(b, ServerToolCallBlock)]
        assert [item for item in sent if item["type"] != "message"] == [
            call.data for call in calls
        ]


def test_another_wires_server_blocks_and_citations_are_left_out() -> None:
    foreign = create_assistant_message(
        (
            ServerToolCallBlock(
                id=CallId("srvtoolu_1"),
                name="web_search",
                input="{}",
                data={"type": "server_tool_use", "id": "srvtoolu_1"},
            ),
            ServerToolResultBlock(
                tool_call_id=CallId("srvtoolu_1"),
                name="web_search",
                sources=(Source(url="https://example.com/"),),
            ),
            TextBlock(
                text="Sunny.",
                citations=(Citation(kind="url_citation", url="https://x/"),),
            ),
        ),
        provider="anthropic",
        model="claude",
    )
    assert _input(foreign) == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Sunny."}],
        }
    ]


def test_annotation_ranges_index_the_blocks_own_text() -> None:
    url = {"type": "url_citation", "url": "u", "start_index": 10, "end_index": 14}
    assert annotation_citation(url, 8) == Citation(
        kind="url_citation", url="u", text_start=2, text_end=6
    )
    assert annotation_citation(url, 12) == Citation(
        kind="url_citation", url="u", text_start=0, text_end=2
    )
    assert annotation_citation({"type": "future_annotation"}) is None
    assert annotation_citation("not an object") is None


ADDED = {
    "type": "response.output_item.added",
    "output_index": 0,
    "item": {"id": "ws_1", "type": "web_search_call", "status": "in_progress"},
}


def _completed(*output: Any) -> dict[str, Any]:
    return {
        "type": "response.completed",
        "response": {
            "id": "resp_1",
            "status": "completed",
            "output": list(output),
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    }


def _message(index: int, text: str) -> list[dict[str, Any]]:
    item = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": index,
            "content_index": 0,
            "delta": text,
        },
    ]


def test_text_after_a_hosted_item_waits_for_it_and_keeps_the_order() -> None:
    done = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    }
    final_message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Answer.", "annotations": []}],
    }
    chunks, error = run(
        ADDED,
        *_message(1, "Answer."),
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        _completed(done, final_message),
    )
    assert error is None
    reply = collect(chunks)
    assert [block.type for block in reply.message.content] == [
        "server-tool-call",
        "server-tool-result",
        "text",
    ]
    assert reply.finish == FinishReason.STOP


def test_a_hosted_item_never_finished_is_dropped_and_one_only_in_the_output_shows():
    chunks, error = run(ADDED, *_message(1, "Answer."), _completed())
    assert error is None
    assert [block.type for block in collect(chunks).message.content] == ["text"]

    only_output = {
        "type": "file_search_call",
        "id": "fs_1",
        "status": "completed",
        "queries": ["q"],
        "results": None,
    }
    chunks, error = run(_completed(only_output))
    assert error is None
    assert isinstance(chunks[-1], Finish)
    assert [block.type for block in collect(chunks).message.content] == [
        "server-tool-call",
        "server-tool-result",
    ]
