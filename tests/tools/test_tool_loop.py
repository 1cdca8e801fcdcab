"""run_tools over real loopback servers: each step streamed and yielded, tools
run once per call with arguments parsed at block-end, results (errors included)
sent back after the assistant turn, and every way the loop stops."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any
from typing import Literal

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.aio import astream
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.runtime import LlmRuntime
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_body
from dsh_llm.tools import ToolRunner
from dsh_llm.tools import run_tools
from dsh_llm.tools import tool_schema
from dsh_llm.validator import assert_chunk_sequence

from ..adapters.chat_chunks import finish
from ..adapters.chat_chunks import text
from ..adapters.chat_chunks import tool


def _tool_step(*calls: tuple[str, str, str]) -> Reply:
    payloads: list[dict[str, Any]] = []
    for index, (call_id, name, args) in enumerate(calls):
        # Arguments arrive in two deltas: parsed only once the block has ended.
        payloads.append(tool(index, id=call_id, name=name, args=args[:3]))
        payloads.append(tool(index, args=args[3:]))
    payloads.append(finish("tool_calls"))
    return Reply(body=sse_body(payloads), split=5)


def _text_step(value: str) -> Reply:
    return Reply(body=sse_body([text(value), finish("stop")]))


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


def _adapter(server: LoopbackServer) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(server.url)


calls: list[Any] = []


def get_weather(city: str, unit: Literal["C", "F"] = "C") -> dict[str, Any]:
    """The weather in a city.

    Longer text the model does not need."""
    calls.append(city)
    return {"city": city, "temp": 21, "unit": unit}


def broken(city: str) -> str:
    """Always fails."""
    raise RuntimeError(f"no data for {city}")


def _options(**fields: Any) -> GenerateOptions:
    return GenerateOptions.from_prompt("m", "weather in Paris?", **fields)


def _steps(chunks: list[StreamChunk]) -> list[list[StreamChunk]]:
    steps: list[list[StreamChunk]] = [[]]
    for item in chunks:
        steps[-1].append(item)
        if isinstance(item, Finish):
            steps.append([])
    return steps[:-1]


def test_a_tool_call_runs_and_its_result_is_sent_back(server):
    calls.clear()
    server.enqueue(_tool_step(("c1", "get_weather", '{"city": "Paris"}')))
    server.enqueue(_text_step("21 C in Paris"))
    with _adapter(server) as adapter:
        loop = run_tools(adapter, _options(), tools={"get_weather": get_weather})
        chunks = list(loop)
    result = loop.result
    assert calls == ["Paris"]
    assert result.text == "21 C in Paris"
    assert result.stop_reason == "finished"
    assert result.steps == 2
    for step in _steps(chunks):
        assert_chunk_sequence(step, strict=True)
    assert len(_steps(chunks)) == 2
    roles = [message.role for message in result.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert result.messages[1].tool_calls[0].name == "get_weather"
    first, second = (request.json() for request in server.requests)
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert first["tools"][0]["function"]["description"] == "The weather in a city."
    sent = second["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "c1"
    assert sent[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": json.dumps({"city": "Paris", "temp": 21, "unit": "C"}),
    }


def test_errors_become_is_error_results_and_the_loop_goes_on(server):
    server.enqueue(
        _tool_step(
            ("c1", "broken", '{"city": "Oslo"}'),
            ("c2", "missing", "{}   "),
            ("c3", "get_weather", "[1, 2]"),
            ("c4", "get_weather", '{"city": '),
        )
    )
    server.enqueue(_text_step("sorry"))
    with _adapter(server) as adapter:
        result = run_tools(
            adapter, _options(), tools=[broken, get_weather], max_steps=3
        ).run()
    outcomes = [
        block
        for message in result.messages
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]
    assert [block.is_error for block in outcomes] == [True, True, True, True]
    texts = [block.content[0].text for block in outcomes]  # type: ignore[union-attr]
    assert texts[0] == "RuntimeError: no data for Oslo"
    assert "no tool named 'missing'" in texts[1]
    assert "must be a JSON object" in texts[2]
    assert "not valid JSON" in texts[3]
    assert result.text == "sorry"


def test_the_step_bound_stops_the_loop(server):
    for n in range(3):
        server.enqueue(_tool_step((f"c{n}", "get_weather", '{"city": "Rome"}')))
    with _adapter(server) as adapter:
        result = run_tools(
            adapter, _options(), {"get_weather": get_weather}, max_steps=2
        ).run()
    assert result.stop_reason == "max-steps"
    assert result.steps == 2
    assert len(server.requests) == 2
    assert result.messages[-1].content[0].tool_call_id == "c1"  # type: ignore[union-attr]


def test_an_abort_between_steps_stops_before_the_next_call(server):
    controller = AbortController()

    def stop_after(city: str) -> str:
        """Aborts the loop."""
        controller.abort()
        return "done"

    server.enqueue(_tool_step(("c1", "stop_after", '{"city": "Rome"}')))
    with _adapter(server) as adapter:
        result = run_tools(
            adapter, _options(signal=controller.signal), [stop_after]
        ).run()
    assert result.stop_reason == "aborted"
    assert len(server.requests) == 1


def test_a_failed_step_through_the_runtime_ends_the_loop_as_failed(server):
    server.enqueue(Reply(status=500, body=b'{"error": {"message": "boom"}}'))
    runtime = LlmRuntime()
    with _adapter(server) as adapter:
        runtime.register_adapter(["local"], adapter)
        result = run_tools(runtime, _options(provider="local"), [get_weather]).run()
    assert result.stop_reason == "failed"
    assert not result.response.ok
    assert result.response.finish.failure is not None


def test_an_adapter_error_propagates_and_result_is_unset(server):
    server.enqueue(Reply(status=401, body=b'{"error": {"message": "bad key"}}'))
    with _adapter(server) as adapter:
        loop = run_tools(adapter, _options(), [get_weather])
        with pytest.raises(LlmError) as caught:
            list(loop)
    assert caught.value.code == ErrorCode.AUTH
    with pytest.raises(LlmError):
        _ = loop.result


def test_yield_from_returns_the_result(server):
    server.enqueue(_text_step("hello"))

    returned: list[Any] = []

    def outer(adapter: OpenAICompatAdapter) -> Iterator[StreamChunk]:
        returned.append((yield from run_tools(adapter, _options(), {})))

    with _adapter(server) as adapter:
        chunks = list(outer(adapter))
    assert returned[0].text == "hello"
    assert isinstance(chunks[-1], Finish)


def test_explicit_tool_schemas_are_kept(server):
    server.enqueue(_text_step("ok"))
    schema = ToolSchema(name="get_weather", description="mine", parameters={})
    with _adapter(server) as adapter:
        run_tools(adapter, _options(tools=[schema]), [get_weather]).run()
    assert server.requests[0].json()["tools"][0]["function"]["description"] == "mine"


def test_the_async_bridge_drives_the_loop(server):
    server.enqueue(_tool_step(("c1", "get_weather", '{"city": "Lima"}')))
    server.enqueue(_text_step("warm"))

    async def main(adapter: OpenAICompatAdapter) -> list[StreamChunk]:
        runner = ToolRunner(adapter, {"get_weather": get_weather})
        got: list[StreamChunk] = []
        async with contextlib.aclosing(astream(runner, _options())) as chunks:
            async for item in chunks:
                got.append(item)
        assert runner.result.text == "warm"
        return got

    with _adapter(server) as adapter:
        got = asyncio.run(main(adapter))
    assert sum(isinstance(item, Finish) for item in got) == 2


def test_tool_schema_reads_the_signature():
    schema = tool_schema(get_weather)
    assert schema.name == "get_weather"
    assert schema.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"enum": ["C", "F"]},
        },
        "required": ["city"],
    }
    assert tool_schema(lambda x, *a, **k: 0, name="f").parameters == {
        "type": "object",
        "properties": {"x": {}},
        "required": ["x"],
    }


def test_bad_arguments_are_refused_at_once():
    with pytest.raises(ValueError, match="max_steps"):
        ToolRunner(LlmRuntime(), {}, max_steps=0)
    with pytest.raises(TypeError):
        ToolRunner(object(), {})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ToolRunner(LlmRuntime(), {"x": 1})  # type: ignore[dict-item]
