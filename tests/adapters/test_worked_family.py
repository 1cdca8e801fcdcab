"""The worked example of docs/writing-an-adapter.md: a seventh wire family in one
module, run as the docs show it against a loopback server."""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dsh_llm import LlmRuntime
from dsh_llm import collect
from dsh_llm.adapters import AdapterConfigError
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.validator import assert_chunk_sequence

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-an-adapter.md"


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    (code,) = re.findall(
        r"```python lines-family\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S
    )
    folder = tmp_path_factory.mktemp("family")
    (folder / "lines.py").write_text(code, encoding="utf-8")
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module("lines")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("lines", None)


def ndjson(*lines: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


DONE = {"type": "done", "reason": "stop", "usage": {"input": 4, "output": 6}}


def options(**changes: Any) -> GenerateOptions:
    return GenerateOptions.from_prompt("tiny", "hi", provider="lines", **changes)


def stream(lines: ModuleType, server: LoopbackServer, body: bytes) -> list[Any]:
    server.enqueue(
        Reply(body=body, split=5, headers={"Content-Type": "application/x-ndjson"})
    )
    with lines.LinesAdapter(base_url=server.url) as adapter:
        runtime = LlmRuntime()
        runtime.register_adapter(["lines"], adapter)
        chunks: list[StreamChunk] = list(runtime.stream(options()))
    assert_chunk_sequence(chunks, strict=True)
    return chunks


def test_the_family_streams_text_and_a_whole_tool_call(
    lines: ModuleType, server: LoopbackServer
) -> None:
    body = ndjson(
        {"type": "text", "text": "Let me "},
        {"type": "text", "text": "look."},
        {"type": "tool", "id": "t1", "name": "lookup", "args": {"q": "x"}},
        DONE,
    )
    chunks = stream(lines, server, body)
    reply = collect(chunks)
    assert reply.text == "Let me look."
    assert reply.tool_calls == (
        ToolCallBlock(id="t1", name="lookup", arguments='{"q":"x"}'),
    )
    assert reply.finish.kind == "tool-calls"  # corrected by the writer
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (4, 6)  # type: ignore[union-attr]
    (request,) = server.requests
    assert request.path == "/generate"
    assert json.loads(request.body)["prompt"] == [{"role": "user", "text": "hi"}]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (ndjson({"type": "text", "text": "half"}), ErrorCode.STREAM_CLOSED),
        (
            ndjson({"type": "text", "text": "x"}, {"type": "error", "message": "gone"}),
            ErrorCode.SERVER,
        ),
        (ndjson({"type": "text"}, ["not", "typed"]), ErrorCode.MALFORMED_RESPONSE),
        (ndjson({**DONE}), ErrorCode.EMPTY_RESPONSE),
    ],
    ids=["cut", "error-line", "bad-line", "empty"],
)
def test_every_failure_ends_as_an_error_never_a_success(
    lines: ModuleType, server: LoopbackServer, body: bytes, code: str
) -> None:
    chunks = stream(lines, server, body)
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == code


def test_what_the_family_cannot_honour_is_refused_before_any_io(
    lines: ModuleType,
) -> None:
    adapter = lines.LinesAdapter(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(LlmError) as caught:
        list(adapter.stream(options(reasoning_effort="high")))
    assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    with pytest.raises(AdapterConfigError) as bad:
        lines.LinesAdapter(base_url="ftp://x")
    assert str(bad.value).startswith("llm-lines: baseURL must be")


def test_the_row_makes_a_plugin_a_composition_loads(
    lines: ModuleType, server: LoopbackServer, tmp_path: Path
) -> None:
    from dsh_llm.plugins import load_composition
    from dsh_llm.plugins.builtin import BuiltinPlugin

    lines.PLUGIN = BuiltinPlugin(lines.ROW)
    composition = tmp_path / "dsh.yml"
    composition.write_text(
        f"- id: mine\n  name: lines:PLUGIN\n  config: {{baseURL: '{server.url}'}}\n",
        encoding="utf-8",
    )
    server.enqueue(Reply(body=ndjson({"type": "text", "text": "ok"}, DONE)))
    with load_composition(composition) as loaded:
        assert [p.id for p in loaded.runtime.list_providers()] == ["lines"]
        tools = (ToolSchema(name="f", description="", parameters={"type": "object"}),)
        reply = collect(loaded.runtime.stream(options(tools=tools)))
    assert reply.text == "ok"
    (request,) = server.requests
    assert json.loads(request.body)["tools"] == [
        {"name": "f", "parameters": {"type": "object"}}
    ]
