"""Gemini grounding and code execution (dsh_llm.adapters.gemini.grounding): the
citations of grounding supports on the text block (UTF-8 byte offsets turned
into code points, checked against the segment), the searches and URL context
as server tool blocks, code parts as server tool blocks, and what goes back in
the next request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.gemini.grounding import GroundingState
from dsh_llm.adapters.gemini.grounding import code_call
from dsh_llm.adapters.gemini.grounding import code_result
from dsh_llm.adapters.gemini.grounding import replayed_part
from dsh_llm.adapters.gemini.request import build_generate_request
from dsh_llm.adapters.gemini.translate import GeminiTranslator
from dsh_llm.assembler import collect
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_user_message
from dsh_llm.protocol import tool_calls_of
from dsh_llm.transport.sse import SseDecoder
from dsh_llm.transport.sse import SseEvent
from dsh_llm.validator import validate_stream

from ..wire_replay import replay

FIXTURES = Path(__file__).parents[2] / "fixtures" / "gemini"


def _event(payload: dict[str, Any]) -> SseEvent:
    return SseEvent(json.dumps(payload))


def _candidate(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"candidates": [{"content": {"parts": parts, "role": "model"}, **fields}]}


def _run(*payloads: dict[str, Any]) -> list[Any]:
    translator = GeminiTranslator()
    out: list[Any] = []
    for payload in payloads:
        out.extend(translator.feed(_event(payload)))
    out.extend(translator.close())
    return list(validate_stream(out, strict=True))


def _support(start: int | None, end: int, text: str | None, *indices: int) -> Any:
    segment: dict[str, Any] = {"endIndex": end}
    if start:
        segment["startIndex"] = start
    if text is not None:
        segment["text"] = text
    return {"segment": segment, "groundingChunkIndices": list(indices)}


WEB = [
    {"web": {"uri": "https://a.example/", "title": "a.example"}},
    {"web": {"uri": "https://b.example/", "title": "b.example"}},
]


def _ended(chunks: list[Any]) -> list[Any]:
    return [c.block for c in chunks if isinstance(c, BlockEnd)]


# --- citations ------------------------------------------------------------------------


def test_segment_byte_offsets_become_code_points_of_the_block():
    # "é" and "€" are 2 and 3 UTF-8 bytes: byte 9 is code point 6.
    text = "Café: 5€ a cup."
    start = len("Café: ".encode())
    end = len(text.encode())
    chunks = _run(
        _candidate([{"text": text}]),
        _candidate(
            [{"text": ""}],
            finishReason="STOP",
            groundingMetadata={
                "groundingChunks": WEB,
                "groundingSupports": [_support(start, end, "5€ a cup.", 0)],
            },
        ),
    )
    (block, *_) = _ended(chunks)
    (citation,) = block.citations
    assert (citation.text_start, citation.text_end) == (6, len(text))
    assert block.text[citation.text_start : citation.text_end] == "5€ a cup."
    assert citation == Citation(
        kind="grounding",
        cited_text="5€ a cup.",
        url="https://a.example/",
        title="a.example",
        source_index=0,
        text_start=6,
        text_end=15,
    )


def test_one_citation_per_support_and_chunk_index_streamed_as_they_arrive():
    chunks = _run(
        _candidate([{"text": "One. Two."}]),
        _candidate(
            [{"text": ""}],
            groundingMetadata={
                "groundingChunks": WEB,
                "groundingSupports": [_support(0, 4, "One.", 0, 1)],
            },
        ),
        _candidate(
            [{"text": ""}],
            finishReason="STOP",
            groundingMetadata={
                "groundingChunks": WEB,
                "groundingSupports": [
                    _support(0, 4, "One.", 0, 1),
                    _support(5, 9, "Two.", 1),
                ],
            },
        ),
    )
    cited = [c.citations for c in chunks if isinstance(c, TextDelta) and c.citations]
    assert [[(x.source_index, x.cited_text) for x in group] for group in cited] == [
        [(0, "One."), (1, "One.")],
        [(1, "Two.")],
    ]
    block = _ended(chunks)[0]
    assert block.citations == cited[0] + cited[1]


def test_offsets_that_miss_the_segment_text_are_found_by_the_text():
    # A server counting characters, not bytes: the text places the segment.
    text = "Ünïcödé first. Then this."
    chunks = _run(
        _candidate(
            [{"text": text}],
            finishReason="STOP",
            groundingMetadata={
                "groundingChunks": WEB,
                "groundingSupports": [_support(15, 25, "Then this.", 0)],
            },
        )
    )
    (citation,) = _ended(chunks)[0].citations
    assert text[citation.text_start : citation.text_end] == "Then this."


def test_a_segment_neither_range_nor_text_places_has_no_range():
    chunks = _run(
        _candidate(
            [{"text": "Short."}],
            finishReason="STOP",
            groundingMetadata={
                "groundingChunks": WEB,
                "groundingSupports": [_support(0, 400, "Not in the answer.", 1)],
            },
        )
    )
    (citation,) = _ended(chunks)[0].citations
    assert citation.text_start is None
    assert citation.text_end is None
    assert citation.url == "https://b.example/"


def test_a_chunk_index_beyond_the_chunks_still_cites_by_index():
    state = GroundingState()
    state.note({"groundingMetadata": {"groundingSupports": [_support(0, 2, "Hi", 7)]}})
    (citation,) = state.new_citations("Hi", 0)
    assert citation.source_index == 7
    assert citation.url is None


def test_offsets_count_from_the_answers_first_text_byte():
    # Text, a code part, text: the second block starts at byte 6.
    chunks = _run(
        _candidate([{"text": "First "}]),
        _candidate([{"executableCode": {"language": "PYTHON", "code": "1"}}]),
        _candidate([{"codeExecutionResult": {"outcome": "OUTCOME_OK"}}]),
        _candidate(
            [{"text": "second."}],
            finishReason="STOP",
            groundingMetadata={
                "groundingChunks": WEB,
                "groundingSupports": [
                    _support(0, 5, "First", 0),
                    _support(6, 13, "second.", 1),
                ],
            },
        ),
    )
    first, _call, _result, second, *_ = _ended(chunks)
    assert first.citations == ()  # it ended before the metadata came
    (citation,) = second.citations
    assert (citation.text_start, citation.text_end) == (0, 7)


def test_reasoning_is_never_cited():
    chunks = _run(
        _candidate(
            [{"text": "thinking", "thought": True}],
            finishReason="STOP",
            groundingMetadata={
                "groundingChunks": WEB,
                "groundingSupports": [_support(0, 8, "thinking", 0)],
            },
        )
    )
    assert not any(isinstance(c, TextDelta) for c in chunks)


@pytest.mark.parametrize(
    "metadata",
    [
        [],
        {"groundingSupports": {}},
        {"groundingSupports": [{"segment": {"endIndex": "4"}}]},
        {"groundingSupports": [{"segment": {"endIndex": 4, "text": 4}}]},
        {"groundingSupports": [_support(0, 4, "x", -1)]},
        {
            "groundingChunks": [{"web": []}],
            "groundingSupports": [_support(0, 1, "x", 0)],
        },
    ],
)
def test_grounding_of_the_wrong_shape_is_malformed(metadata):
    translator = GeminiTranslator()
    translator.feed(_event(_candidate([{"text": "xxxx"}])))
    with pytest.raises(LlmError) as caught:
        translator.feed(_event(_candidate([], groundingMetadata=metadata)))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


@pytest.mark.parametrize(
    "metadata",
    [
        {"webSearchQueries": "q"},
        {"webSearchQueries": [1]},
        {"groundingChunks": {}},
    ],
)
def test_search_metadata_of_the_wrong_shape_is_malformed_at_the_end(metadata):
    translator = GeminiTranslator()
    translator.feed(
        _event(
            _candidate([{"text": "x"}], finishReason="STOP", groundingMetadata=metadata)
        )
    )
    with pytest.raises(LlmError) as caught:
        translator.close()
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


# --- searches and url context ---------------------------------------------------------


def test_the_search_is_a_server_call_and_result_after_the_text():
    chunks = replay(
        (FIXTURES / "grounding_google_search.sse").read_bytes(),
        "whole",
        SseDecoder(terminal_data=None, provider="Gemini"),
        GeminiTranslator(),
    )
    text, call, result = _ended(chunks)
    assert isinstance(call, ServerToolCallBlock)
    assert call.name == "google_search"
    assert json.loads(call.input) == {
        "queries": ["euro 2024 final", "spain european championship titles"]
    }
    assert isinstance(result, ServerToolResultBlock)
    assert result.tool_call_id == call.id
    assert [s.title for s in result.sources] == ["uefa.com", "wikipedia.org"]
    # The search entry point Google asks to display is kept on the result.
    assert "renderedContent" in result.data["groundingMetadata"]["searchEntryPoint"]
    assert isinstance(text, TextBlock)
    assert len(text.citations) == 3
    (finish,) = [c for c in chunks if isinstance(c, Finish)]
    assert finish.reason.kind == "stop"


def test_metadata_repeated_on_chunks_merges_and_cites_each_support_once():
    chunks = replay(
        (FIXTURES / "grounding_repeated_on_chunks.sse").read_bytes(),
        "whole",
        SseDecoder(terminal_data=None, provider="Gemini"),
        GeminiTranslator(),
    )
    text, _call, result = _ended(chunks)
    assert [c.source_index for c in text.citations] == [0, 1]
    merged = result.data["groundingMetadata"]
    assert merged["searchEntryPoint"] == {"renderedContent": "<div></div>"}
    assert len(merged["groundingChunks"]) == 2


def test_retrieval_grounding_is_named_retrieval_with_snippets():
    state = GroundingState()
    state.note(
        {
            "groundingMetadata": {
                "retrievalQueries": ["refunds"],
                "groundingChunks": [
                    {"retrievedContext": {"uri": "gs://b/p.pdf", "text": "14 days"}}
                ],
            }
        }
    )
    call, result = state.server_blocks(lambda: "srv_0")
    assert call.name == result.name == "retrieval"
    assert json.loads(call.input) == {"queries": ["refunds"]}
    assert result.sources[0].snippet == "14 days"


def test_no_metadata_makes_no_server_blocks():
    assert GroundingState().server_blocks(lambda: "x") == []
    state = GroundingState()
    state.note({"groundingMetadata": {"searchEntryPoint": {"renderedContent": ""}}})
    assert state.server_blocks(lambda: "x") == []


def test_url_context_fails_only_when_no_url_was_retrieved():
    state = GroundingState()
    state.note(
        {
            "urlContextMetadata": {
                "urlMetadata": [
                    {
                        "retrievedUrl": "https://x.example/",
                        "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_UNSAFE",
                    }
                ]
            }
        }
    )
    call, result = state.server_blocks(lambda: "srv_9")
    assert call.name == "url_context"
    assert json.loads(call.input) == {"urls": ["https://x.example/"]}
    assert result.is_error is True
    assert result.tool_call_id == "srv_9"


# --- code execution -------------------------------------------------------------------


def test_code_parts_are_server_blocks_that_never_make_a_tool_calls_finish():
    chunks = _run(
        _candidate(
            [{"executableCode": {"language": "PYTHON", "code": "print(1)"}}],
        ),
        _candidate(
            [{"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}}],
            finishReason="STOP",
        ),
    )
    call, result = _ended(chunks)
    assert isinstance(call, ServerToolCallBlock)
    assert call.name == "code_execution"
    assert json.loads(call.input) == {"language": "PYTHON", "code": "print(1)"}
    assert result.tool_call_id == call.id
    assert (result.output, result.is_error) == ("1\n", False)
    assert tool_calls_of(_ended(chunks)) == ()
    assert chunks[-1].reason.kind == "stop"


def test_a_result_with_no_call_before_it_gets_an_id_of_its_own():
    chunks = _run(
        {
            "responseId": "r1",
            **_candidate(
                [{"codeExecutionResult": {"outcome": "OUTCOME_DEADLINE_EXCEEDED"}}],
                finishReason="STOP",
            ),
        }
    )
    (result,) = _ended(chunks)
    assert result.tool_call_id == "srv_r1_0"
    assert result.is_error is True
    assert result.output is None


def test_ids_gemini_gives_code_parts_are_kept():
    call = code_call({"executableCode": {"code": "1", "id": "c7"}}, "c7")
    result = code_result({"codeExecutionResult": {"id": "c7"}}, "c7")
    assert call.id == result.tool_call_id == "c7"
    assert result.is_error is None
    chunks = _run(
        _candidate([{"executableCode": {"code": "1", "id": "exec-1"}}]),
        _candidate(
            [{"codeExecutionResult": {"outcome": "OUTCOME_OK", "id": "exec-1"}}],
            finishReason="STOP",
        ),
    )
    assert [b.id for b in _ended(chunks)[:1]] == ["exec-1"]


@pytest.mark.parametrize(
    "part",
    [
        {"executableCode": "print(1)"},
        {"executableCode": {"code": 1}},
        {"codeExecutionResult": []},
        {"codeExecutionResult": {"outcome": 0}},
        {"codeExecutionResult": {"output": ["1"]}},
    ],
)
def test_code_parts_of_the_wrong_shape_are_malformed(part):
    with pytest.raises(LlmError) as caught:
        GeminiTranslator().feed(_event(_candidate([part])))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


# --- what goes back -------------------------------------------------------------------


def _answer(name: str) -> Message:
    body = (FIXTURES / f"{name}.sse").read_bytes()
    chunks = replay(
        body,
        "whole",
        SseDecoder(terminal_data=None, provider="Gemini"),
        GeminiTranslator(),
    )
    return collect(iter(chunks)).message


def _sent_parts(answer: Message) -> list[dict[str, Any]]:
    options = GenerateOptions(
        provider="gemini",
        model="gemini-3-flash-preview",
        messages=(create_user_message("q"), answer, create_user_message("and?")),
    )
    body = build_generate_request(options)
    return body["contents"][1]["parts"]


def test_code_execution_goes_back_as_the_parts_it_came_in_signature_included():
    parts = _sent_parts(_answer("code_execution_two_results_signed"))
    assert [next(iter(p)) for p in parts] == [
        "executableCode",
        "codeExecutionResult",
        "codeExecutionResult",
        "text",
    ]
    assert parts[0]["thoughtSignature"].startswith("EjQK")


def test_searches_and_citations_go_back_as_nothing_but_the_text():
    answer = _answer("grounding_google_search")
    assert [type(b).__name__ for b in answer.content] == [
        "TextBlock",
        "ServerToolCallBlock",
        "ServerToolResultBlock",
    ]
    assert _sent_parts(answer) == [{"text": answer.content[0].text}]


def test_another_providers_server_blocks_are_left_out():
    foreign_call = ServerToolCallBlock(
        id=CallId("srvtoolu_1"),
        name="web_search",
        input='{"query":"x"}',
        data={"type": "server_tool_use", "id": "srvtoolu_1"},
    )
    foreign_result = ServerToolResultBlock(
        tool_call_id=CallId("srvtoolu_1"),
        name="web_search",
        data={"type": "web_search_tool_result", "content": []},
    )
    assert replayed_part(foreign_call) is None
    assert replayed_part(foreign_result) is None
    answer = create_assistant_message(
        (foreign_call, foreign_result, TextBlock(text="Done.")),
        provider="anthropic",
        model="claude-sonnet-5",
    )
    assert _sent_parts(answer) == [{"text": "Done."}]


def test_the_replayed_part_is_a_copy():
    block = code_call({"executableCode": {"code": "1"}}, "c1")
    part = replayed_part(block)
    part["thoughtSignature"] = "changed"
    assert "thoughtSignature" not in block.data
