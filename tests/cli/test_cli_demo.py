"""``dsh-llm demo`` and ``dsh_llm.cli.demo``: the scripted DeepSeek stream, read by the
real ``DeepSeekAdapter`` over loopback HTTP, with no key and no network."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.assembler import collect
from dsh_llm.cli.console import JsonLinesPrinter
from dsh_llm.cli.demo import DEMO_PROMPT
from dsh_llm.cli.demo import demo_options
from dsh_llm.cli.demo import demo_reply
from dsh_llm.cli.demo import demo_wire_events
from dsh_llm.cli.demo import run_demo
from dsh_llm.protocol import Finish
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.serde import chunk_from_json
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.validator import assert_chunk_sequence

from ..cli_run import offline_env
from ..cli_run import run_cli
from ..proxy_env import use_proxy

REASONING = (
    "The user wants the current weather in Paris and whether to take an umbrella. "
    "I can't know live weather myself, but the get_weather tool can: call it for "
    "Paris in celsius, then answer from its result."
)
TEXT = "Let me check the live forecast for Paris before I answer."
ARGUMENTS = '{"city": "Paris", "unit": "celsius"}'
USAGE = TokenUsage(
    input_tokens=259, output_tokens=96, cache_read_tokens=1024, reasoning_tokens=41
)
# A proxy that accepts no connection: the demo must never try to use it.
DEAD_PROXY = "http://127.0.0.1:9"


class RecordingSink:
    """Keeps each chunk with the time it was shown."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, StreamChunk]] = []
        self.ended = False

    def write(self, chunk: StreamChunk) -> None:
        self.seen.append((time.monotonic(), chunk))

    def end(self) -> None:
        self.ended = True

    @property
    def chunks(self) -> list[StreamChunk]:
        return [chunk for _, chunk in self.seen]


def _offline_env() -> dict[str, str]:
    return offline_env()


# --- the command ----------------------------------------------------------------------


def test_demo_streams_validates_and_reports_without_key_or_network(tmp_path):
    result = run_cli("demo", env=_offline_env(), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Traceback" not in result.stderr
    assert out.startswith("dsh-llm demo: the real DeepSeekAdapter reads a scripted")
    assert f"user: {DEMO_PROMPT}\n" in out
    lines = out.splitlines()
    assert TEXT in lines
    tool_line = lines[lines.index(TEXT) + 1]
    assert json.loads(tool_line) == {
        "type": "tool-call",
        "id": "call_00_Dm0ParisWx",
        "name": "get_weather",
        "arguments": ARGUMENTS,
    }
    assert (
        "strict validation: passed (23 chunks, 3 blocks, each block-start -> "
        "deltas -> block-end, then usage, then finish)"
    ) in lines
    assert "assembled assistant message, 3 blocks:" in lines
    assert f"  [0] reasoning  {json.dumps(REASONING)}" in lines
    assert f"  [1] text       {json.dumps(TEXT)}" in lines
    assert f"  [2] tool-call  get_weather({ARGUMENTS}) id call_00_Dm0ParisWx" in lines
    assert "usage: input 259, cache read 1024, output 96 (reasoning 41)" in lines
    assert lines[-1] == "finish: tool-calls"
    # Reasoning goes to stderr, marked, never mixed into the text on stdout.
    assert result.stderr == f"[reasoning] {REASONING}\n"
    assert "[reasoning]" not in out


def test_demo_json_writes_strict_valid_chunks_to_stdout(tmp_path):
    # Through the console script this time (the test above uses python -m).
    result = subprocess.run(
        ["dsh-llm", "demo", "--json"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_offline_env(),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    chunks = [chunk_from_json(line) for line in result.stdout.splitlines()]
    assert_chunk_sequence(chunks, strict=True)
    assert len(chunks) == 23
    assembled = collect(chunks)
    assert assembled.reasoning == REASONING
    assert assembled.text == TEXT
    assert [(c.name, c.arguments) for c in assembled.tool_calls] == [
        ("get_weather", ARGUMENTS)
    ]
    assert assembled.usage == USAGE
    assert result.stderr == "strict validation: passed (23 chunks, 3 blocks)\n"


# --- the module -----------------------------------------------------------------------


def test_demo_wire_is_a_deepseek_stream_with_cache_hits():
    events = demo_wire_events()
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(event["object"] == "chat.completion.chunk" for event in events)
    last = events[-1]
    assert last["choices"][0]["finish_reason"] == "tool_calls"
    usage = last["usage"]
    assert usage["prompt_tokens"] == (
        usage["prompt_cache_hit_tokens"] + usage["prompt_cache_miss_tokens"]
    )
    assert usage["prompt_cache_hit_tokens"] > 0
    assert all(event["usage"] is None for event in events[:-1])


def test_run_demo_delivers_each_chunk_live_and_cleans_up():
    threads_before = threading.active_count()
    saved = {name: os.environ.get(name) for name in ("no_proxy", "NO_PROXY")}
    sink = RecordingSink()
    urls: list[str] = []

    result = run_demo(sink, pace=1.0, announce=urls.append)

    assert sink.ended
    assert_chunk_sequence(sink.chunks, strict=True)
    assert result.chunks == len(sink.chunks) == 23
    assert result.blocks == 3
    assert result.server_url == urls[0]
    assert [type(b) for b in result.response.message.content] == [
        ReasoningBlock,
        TextBlock,
        ToolCallBlock,
    ]
    assert result.response.usage == USAGE
    assert result.response.finish.kind == "tool-calls"
    # Paced: the first chunk is shown long before the last arrives, so a person
    # watches the text being written (the script pauses about 1.3 s in all).
    first, last = sink.seen[0][0], sink.seen[-1][0]
    assert last - first > 0.5
    # The server and its threads are gone again; the environment was never edited.
    assert {name: os.environ.get(name) for name in saved} == saved
    deadline = time.monotonic() + 5
    while threading.active_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == threads_before


def test_run_demo_ignores_deepseek_variables_and_proxies(monkeypatch):
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "")
    # Every proxy variable, and no no_proxy entry to exempt the loopback server.
    use_proxy(monkeypatch, DEAD_PROXY)
    sink = RecordingSink()

    result = run_demo(sink, pace=0)

    assert result.response.finish.kind == "tool-calls"


def test_run_demo_aborted_through_its_signal_ends_with_an_aborted_finish():
    controller = AbortController()
    sink = RecordingSink()

    class AbortAtFirstText(RecordingSink):
        def write(self, chunk: StreamChunk) -> None:
            super().write(chunk)
            if chunk.type == "text-delta":
                controller.abort()

    sink = AbortAtFirstText()
    result = run_demo(sink, signal=controller.signal, pace=1.0)

    assert result.response.finish.kind == "aborted"
    assert result.response.finish.failure is not None
    assert result.response.finish.failure.code == "ABORTED"
    assert isinstance(sink.chunks[-1], Finish)
    assert_chunk_sequence(sink.chunks, strict=True)


def test_demo_reply_at_pace_zero_is_read_identically_by_the_adapter():
    with LoopbackServer() as server:
        server.enqueue(demo_reply(0))
        with DeepSeekAdapter("sk-test", base_url=server.url, environ={}) as adapter:
            chunks = list(adapter.stream(demo_options()))
        body = server.requests[0].json()
    assert_chunk_sequence(chunks, strict=True)
    assert collect(chunks).text == TEXT
    assert body["messages"][-1] == {"role": "user", "content": DEMO_PROMPT}
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert body["stream"] is True


def test_demo_reply_refuses_a_negative_pace():
    with pytest.raises(ValueError, match="pace must be >= 0"):
        demo_reply(-1)


def test_json_lines_printer_writes_one_compact_line_per_chunk(capsys):
    import sys

    printer = JsonLinesPrinter(sys.stdout)
    sink = RecordingSink()
    run_demo(sink, pace=0)
    for chunk in sink.chunks:
        printer.write(chunk)
    printer.end()
    lines = capsys.readouterr().out.splitlines()
    assert [chunk_from_json(line) for line in lines] == sink.chunks
    assert all(": " not in line[:20] for line in lines)
