"""Properties of GeminiTranslator over generated streams: every stream is
strict-valid under any split, text and arguments are kept exactly, and the
finish follows rule 8."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from dsh_llm.adapters.gemini.translate import GeminiTranslator
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.transport.sse import SseDecoder

from ...attachments.images import png
from ..wire_replay import replay

_PNG = base64.b64encode(png(2, 2)).decode()
_text = st.text(min_size=0, max_size=12)
_args = st.dictionaries(
    st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3
)
_part = st.one_of(
    st.builds(lambda t: {"text": t}, _text),
    st.builds(lambda t: {"text": t, "thought": True}, _text),
    st.builds(
        lambda s: {"text": "", "thoughtSignature": s},
        st.text("abcXYZ=", min_size=1, max_size=8),
    ),
    st.builds(
        lambda n, a: {"functionCall": {"name": n, "args": a}},
        st.sampled_from(["f", "g"]),
        _args,
    ),
    st.just({"executableCode": {"language": "PYTHON", "code": "1"}}),
    st.just({"inlineData": {"mimeType": "image/png", "data": _PNG}}),
)
_chunk = st.lists(_part, max_size=4)
_reason = st.sampled_from([None, "STOP", "MAX_TOKENS", "SAFETY", "OTHER"])


def _body(
    chunks: list[list[dict[str, Any]]], reason: str | None, early: str | None
) -> bytes:
    """The stream of ``chunks``, the last one carrying ``reason`` and every other
    one ``early`` (Vertex AI sends ``STOP`` on every chunk; LiteLLM ``null``)."""
    out = b""
    for position, parts in enumerate(chunks):
        candidate: dict[str, Any] = {
            "content": {"parts": parts, "role": "model"},
            "index": 0,
        }
        if position == len(chunks) - 1:
            if reason is not None:
                candidate["finishReason"] = reason
        elif early != "absent":
            candidate["finishReason"] = early
        payload = {
            "candidates": [candidate],
            "usageMetadata": {"promptTokenCount": 3},
            "responseId": "r",
        }
        out += b"data: " + json.dumps(payload).encode() + b"\r\n\r\n"
    return out


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(_chunk, min_size=1, max_size=5),
    reason=_reason,
    early=st.sampled_from(["absent", None, "STOP"]),
    split=st.sampled_from(["whole", "1", "7", "random-a"]),
)
def test_generated_streams_are_strict_and_lossless(chunks, reason, early, split):
    result = replay(
        _body(chunks, reason, early),
        split,
        SseDecoder(terminal_data=None),
        GeminiTranslator(),
    )
    finish = result[-1]
    assert isinstance(finish, Finish)
    parts = [part for parts in chunks for part in parts]
    blocks = [c.block for c in result if isinstance(c, BlockEnd)]
    calls = [b for b in blocks if isinstance(b, ToolCallBlock)]
    expected_calls = [p["functionCall"] for p in parts if "functionCall" in p]
    if reason is None and early == "STOP" and len(chunks) > 1:
        # The last reason seen wins: an earlier chunk's STOP.
        reason = "STOP"
    if reason is None:
        assert finish.reason.failure is not None
        assert finish.reason.failure.code == "STREAM_CLOSED"
        return
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        (c["name"], c["args"]) for c in expected_calls
    ]
    texts = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    thoughts = "".join(b.text for b in blocks if isinstance(b, ReasoningBlock))
    assert texts == "".join(
        p["text"] for p in parts if "text" in p and not p.get("thought")
    )
    assert thoughts == "".join(p["text"] for p in parts if p.get("thought"))
    images = [b for b in blocks if isinstance(b, ImageBlock)]
    assert len(images) == sum("inlineData" in p for p in parts)
    if reason == "STOP":
        if calls:
            assert finish.reason.kind == "tool-calls"
        elif blocks:
            assert finish.reason.kind == "stop"
        else:
            assert finish.reason.failure.code == "EMPTY_RESPONSE"  # type: ignore[union-attr]
    elif reason == "MAX_TOKENS":
        assert finish.reason.kind == "max-tokens"
    else:
        assert finish.reason.kind == "error"
