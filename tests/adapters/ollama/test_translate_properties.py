"""Properties of OllamaTranslator over generated NDJSON bodies: every stream is
strict-valid under any split, text and arguments are kept exactly, and the
finish follows rule 8."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from dsh_llm.adapters.ollama.translate import OllamaTranslator
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.transport.ndjson import NdjsonDecoder

from ..wire_replay import replay

_text = st.text(max_size=10)
_args = st.dictionaries(
    st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3
)
_call = st.builds(
    lambda n, a: {"function": {"index": 0, "name": n, "arguments": a}},
    st.sampled_from(["f", "g"]),
    _args,
)
_message = st.fixed_dictionaries(
    {"role": st.just("assistant"), "content": _text},
    optional={"thinking": _text, "tool_calls": st.lists(_call, max_size=2)},
)


def _body(messages: list[dict[str, Any]], reason: str | None, done: bool) -> bytes:
    lines = [{"model": "m", "message": m, "done": False} for m in messages]
    if done:
        last: dict[str, Any] = {
            "model": "m",
            "message": {"role": "assistant", "content": ""},
            "done": True,
        }
        if reason is not None:
            last["done_reason"] = reason
        last["eval_count"] = 3
        lines.append(last)
    return b"".join(
        json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines
    )


@settings(max_examples=150, deadline=None)
@given(
    messages=st.lists(_message, max_size=5),
    reason=st.sampled_from([None, "stop", "length", "load"]),
    done=st.booleans(),
    split=st.sampled_from(["whole", "1", "7", "random-b"]),
)
def test_generated_streams_are_strict_and_lossless(messages, reason, done, split):
    result = replay(
        _body(messages, reason, done), split, NdjsonDecoder(), OllamaTranslator()
    )
    finish = result[-1]
    assert isinstance(finish, Finish)
    if not done or reason is None:
        assert finish.reason.failure is not None
        assert finish.reason.failure.code == "STREAM_CLOSED"
        return
    blocks = [c.block for c in result if isinstance(c, BlockEnd)]
    calls = [b for b in blocks if isinstance(b, ToolCallBlock)]
    expected = [c["function"] for m in messages for c in m.get("tool_calls", [])]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        (f["name"], f["arguments"]) for f in expected
    ]
    assert "".join(b.text for b in blocks if isinstance(b, TextBlock)) == "".join(
        m["content"] for m in messages
    )
    assert "".join(b.text for b in blocks if isinstance(b, ReasoningBlock)) == "".join(
        m.get("thinking", "") for m in messages
    )
    if reason == "stop":
        if calls:
            assert finish.reason.kind == "tool-calls"
        elif blocks:
            assert finish.reason.kind == "stop"
        else:
            assert finish.reason.failure.code == "EMPTY_RESPONSE"  # type: ignore[union-attr]
    elif reason == "length":
        assert finish.reason.kind == "max-tokens"
    else:
        assert finish.reason.failure.code == "EMPTY_RESPONSE"  # type: ignore[union-attr]
