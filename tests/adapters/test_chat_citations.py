"""Citations on the chat-completions wire (dsh_llm.adapters.chat.citations and
the translator): Perplexity's and xAI's lists, ``url_citation`` annotations,
Azure On Your Data's context, each given once at the end of its text block."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_llm.adapters.chat.citations import CitationLog
from dsh_llm.adapters.chat.citations import annotation_citations
from dsh_llm.adapters.chat.citations import context_citations
from dsh_llm.adapters.chat.citations import listed_citations
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.translate import ChatCompletionsTranslator
from dsh_llm.assembler import collect
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Citation
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.validator import validate_stream

from .chat_chunks import chunk
from .chat_chunks import finish
from .chat_chunks import text
from .chat_chunks import tool

PROFILE = WireProfile(provider="Test")
URLS = ["https://a.example/", "https://b.example/"]
RESULTS = [
    {"title": "A", "url": "https://a.example/"},
    {"title": "B", "url": "https://b.example/"},
]


def _run(*payloads: dict[str, Any]) -> list[Any]:
    translator = ChatCompletionsTranslator(PROFILE)
    out: list[Any] = []
    for payload in payloads:
        out.extend(translator.feed_payload(payload))
    out.extend(translator.done())
    return list(validate_stream(out, strict=True))


def _listed(payload: dict[str, Any], **lists: Any) -> dict[str, Any]:
    return {**payload, **lists}


def _blocks(chunks: list[Any]) -> list[Any]:
    return [c.block for c in chunks if isinstance(c, BlockEnd)]


def _annotation(url: str, start: int | None = None, end: int | None = None) -> Any:
    inner: dict[str, Any] = {"url": url, "title": url[8:]}
    if start is not None:
        inner["start_index"] = start
        inner["end_index"] = end
    return {"type": "url_citation", "url_citation": inner}


# --- lists on every chunk -------------------------------------------------------------


def test_repeated_lists_are_given_once_at_the_end_of_the_text():
    chunks = _run(
        _listed(text("Dogs"), citations=URLS, search_results=RESULTS),
        _listed(text(" bark[1]."), citations=URLS, search_results=RESULTS),
        _listed(finish("stop"), citations=URLS, search_results=RESULTS),
    )
    cited = [c for c in chunks if isinstance(c, TextDelta) and c.citations]
    assert len(cited) == 1
    assert cited[0].text == ""
    assert cited[0].citations == (
        Citation(kind="url", url=URLS[0], title="A", source_index=0),
        Citation(kind="url", url=URLS[1], title="B", source_index=1),
    )
    (block,) = _blocks(chunks)
    assert block.citations == cited[0].citations
    assert chunks[-1].reason.kind == "stop"


def test_a_list_that_grows_adds_only_the_new_citations():
    chunks = _run(
        _listed(text("One"), citations=URLS[:1]),
        _listed(text(" two."), citations=URLS),
        finish("stop"),
    )
    (block,) = _blocks(chunks)
    assert [c.url for c in block.citations] == URLS


def test_a_search_result_of_another_url_lends_no_title():
    cited = listed_citations(
        ["https://a.example/"], [{"title": "Other", "url": "https://z.example/"}]
    )
    assert cited == [Citation(kind="url", url="https://a.example/", source_index=0)]
    assert listed_citations(None, RESULTS)[1].title == "B"


@pytest.mark.parametrize(
    ("urls", "results"),
    [
        ("https://a.example/", None),
        ({"url": "x"}, None),
        ([1, None, ""], [[], "x", 3]),
        (None, {"title": "A"}),
    ],
)
def test_lists_of_another_shape_are_passed_over(urls, results):
    assert listed_citations(urls, results) == []
    chunks = _run(
        _listed(text("Hi."), citations=urls, search_results=results), finish("stop")
    )
    (block,) = _blocks(chunks)
    assert block == TextBlock(text="Hi.")


# --- annotations ----------------------------------------------------------------------


def test_annotations_keep_their_range_in_the_block():
    chunks = _run(
        text("See the docs"),
        text(" (docs.example)."),
        chunk({"annotations": [_annotation("https://docs.example/", 13, 28)]}),
        finish("stop"),
    )
    (block,) = _blocks(chunks)
    (citation,) = block.citations
    assert citation.kind == "url_citation"
    assert block.text[citation.text_start : citation.text_end] == "(docs.example)."


def test_annotation_ranges_count_from_the_messages_first_character():
    # Text, a tool call, more text: the second block starts at character 6.
    chunks = _run(
        text("First."),
        tool(0, id="call_1", name="f", args="{}"),
        text("Second."),
        chunk(
            {
                "annotations": [
                    _annotation("https://one.example/", 0, 6),
                    _annotation("https://two.example/", 6, 13),
                ]
            }
        ),
        finish("tool_calls"),
    )
    first, call, second = _blocks(chunks)
    assert isinstance(call, ToolCallBlock)
    assert first.citations == ()  # it ended before the annotations came
    one, two = second.citations
    assert (one.text_start, one.text_end) == (None, None)  # not in this block
    assert (two.text_start, two.text_end) == (0, 7)
    assert chunks[-1].reason.kind == "tool-calls"


def test_citations_after_their_text_ended_get_a_text_block_of_their_own():
    chunks = _run(
        text("Calling."),
        tool(0, id="call_1", name="f", args="{}"),
        _listed(finish("tool_calls"), citations=URLS[:1]),
    )
    _text, _call, cited = _blocks(chunks)
    assert cited == TextBlock(
        text="", citations=(Citation(kind="url", url=URLS[0], source_index=0),)
    )


def test_the_same_annotation_twice_is_one_citation():
    twice = [_annotation("https://a.example/", 0, 2)] * 2
    chunks = _run(text("Hi"), chunk({"annotations": twice}), finish("stop"))
    assert len(_blocks(chunks)[0].citations) == 1


@pytest.mark.parametrize(
    "annotations",
    [
        {"type": "url_citation"},
        ["x", {"type": "file_citation"}, {"type": "url_citation", "url_citation": 1}],
    ],
)
def test_annotations_of_another_shape_are_passed_over(annotations):
    assert annotation_citations(annotations) == []


def test_a_reversed_or_negative_range_is_dropped():
    (reversed_range,) = annotation_citations([_annotation("https://a/", 9, 2)])
    (negative,) = annotation_citations([_annotation("https://a/", -1, 2)])
    assert (reversed_range.text_start, reversed_range.text_end) == (None, None)
    assert negative.text_start is None


def test_citations_never_go_on_reasoning_or_refusal():
    chunks = _run(
        chunk({"reasoning_content": "hm", "annotations": [_annotation("https://a/")]}),
        chunk({"refusal": "No."}),
        finish("stop"),
    )
    reasoning, refusal, cited = _blocks(chunks)
    assert not hasattr(reasoning, "citations")
    assert refusal.citations == ()
    assert [c.url for c in cited.citations] == ["https://a/"]


# --- Azure On Your Data ---------------------------------------------------------------


def test_azure_context_citations_come_with_the_first_delta_and_end_the_text():
    context = {
        "citations": [
            {"content": "Chunk one.", "title": "Doc", "filepath": "doc.pdf"},
            "not an object",
        ],
        "intent": "x",
    }
    chunks = _run(
        chunk({"role": "assistant", "context": context}),
        text("Answer [doc1]."),
        finish("stop"),
    )
    (block,) = _blocks(chunks)
    assert block.citations == (
        Citation(
            kind="url",
            title="Doc",
            filename="doc.pdf",
            cited_text="Chunk one.",
            source_index=0,
        ),
    )


@pytest.mark.parametrize("context", [[], {"citations": {}}, "x"])
def test_context_of_another_shape_is_passed_over(context):
    assert context_citations(context) == []


# --- the log --------------------------------------------------------------------------


def test_the_log_takes_each_citation_once_and_moves_ranges_into_the_block():
    log = CitationLog()
    citation = Citation(kind="url_citation", url="u", text_start=10, text_end=12)
    log.add([citation, citation])
    assert log
    (moved,) = log.take(10, 2)
    assert (moved.text_start, moved.text_end) == (0, 2)
    assert not log
    log.add([citation])
    assert not log  # seen before
    assert log.take(0, 0) == []


def test_collect_keeps_the_citations():
    reply = collect(
        iter(_run(_listed(text("Hi."), citations=URLS[:1]), finish("stop")))
    )
    (block,) = reply.message.content
    assert [c.url for c in block.citations] == URLS[:1]
