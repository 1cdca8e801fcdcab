"""``dsh_llm.routing`` over real adapters and loopback servers: ``retrying``
retries a stream only before its first chunk reached the consumer, ``failover``
moves to the next route on retryable failures (429, 5xx, a refused connection)
and never after content; both compose from a YAML file."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.assembler import collect
from dsh_llm.config import ConfigError
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.routing import FailoverEvent
from dsh_llm.routing import StreamRetryEvent
from dsh_llm.routing import current_attempt
from dsh_llm.routing import failover
from dsh_llm.routing import retrying
from dsh_llm.routing.plugins import RetryingConfig
from dsh_llm.runtime import LlmRuntime
from dsh_llm.runtime import StreamNext
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal
from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events
from dsh_llm.validator import validate_stream

from ..adapters.chat_chunks import finish
from ..adapters.chat_chunks import only_usage
from ..adapters.chat_chunks import text
from ..adapters.chat_chunks import usage

FAST = {
    "mode": "normal",
    "maxRetries": 3,
    "backoff": {"initialDelayMs": 1, "maxDelayMs": 2, "jitterRatio": 0},
}


@pytest.fixture
def primary() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
        assert srv.wait_until_idle(), "a connection was left open"


@pytest.fixture
def backup() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
        assert srv.wait_until_idle(), "a connection was left open"


_ADAPTERS: list[OpenAICompatAdapter] = []


@pytest.fixture
def runtime(primary: LoopbackServer, backup: LoopbackServer) -> Iterator[LlmRuntime]:
    # Set up after the servers, so the adapters close before their idle check.
    yield LlmRuntime()
    while _ADAPTERS:
        _ADAPTERS.pop().close()


def _register(runtime: LlmRuntime, route: str, base_url: str) -> None:
    # The adapter's own retry policy is irrelevant: stream() never retries.
    adapter = OpenAICompatAdapter(f"{base_url}/v1")
    _ADAPTERS.append(adapter)
    runtime.register_adapter([route], adapter)


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _options(provider: str = "primary", **fields: Any) -> GenerateOptions:
    return GenerateOptions(
        provider=provider,
        model="caller-model",
        messages=(create_user_message("hi"),),
        **fields,
    )


def _answer(words: str = "hello", prompt: int = 3) -> Reply:
    return Reply(body=sse_events([text(words), finish("stop", usage(prompt, 1))]))


def _status(status: int, **headers: str) -> Reply:
    return Reply(
        status=status,
        reason="Nope",
        headers={"content-type": "application/json", **headers},
        body=b'{"error":{"message":"try later"}}',
        framing="length",
    )


def _finish(chunks: list[StreamChunk]) -> Finish:
    last = chunks[-1]
    assert isinstance(last, Finish)
    return last


# --- retrying ---------------------------------------------------------------------


@pytest.mark.parametrize("failures", [1, 3])
def test_retrying_fails_n_times_then_succeeds(
    runtime: LlmRuntime, primary: LoopbackServer, failures: int
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(*[_status(503)] * failures, _answer("finally"))
    events: list[StreamRetryEvent] = []
    runtime.use(retrying(FAST, on_retry=events.append))

    chunks = list(validate_stream(runtime.stream(_options()), strict=True))

    assert collect(chunks).message.content[0].text == "finally"  # type: ignore[union-attr]
    assert len(primary.requests) == failures + 1
    assert [e.attempt for e in events] == list(range(1, failures + 1))
    assert {e.failure.code for e in events} == {ErrorCode.SERVER.value}
    assert all(e.provider == "primary" and e.model == "caller-model" for e in events)


def test_retrying_gives_up_after_the_budget_with_the_last_failure(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(*[_status(503)] * 4)
    events: list[StreamRetryEvent] = []
    runtime.use(retrying(FAST, on_retry=events.append))

    chunks = list(runtime.stream(_options()))

    finish_chunk = _finish(chunks)
    assert finish_chunk.reason.kind == "error"
    assert finish_chunk.reason.failure is not None
    assert finish_chunk.reason.failure.code == ErrorCode.SERVER.value
    assert len(primary.requests) == 4
    assert len(events) == 3


def test_retrying_does_not_retry_a_code_outside_the_policy(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(_status(400))
    runtime.use(retrying(FAST))

    chunks = list(runtime.stream(_options()))

    failure = _finish(chunks).reason.failure
    assert failure is not None
    assert failure.code == ErrorCode.INVALID_REQUEST.value
    assert len(primary.requests) == 1


def test_retrying_waits_what_retry_after_asks(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(_status(429, **{"retry-after": "2"}), _answer())
    waits: list[float] = []

    def sleep(delay_ms: float, signal: AbortSignal | None) -> bool:
        waits.append(delay_ms)
        return False

    policy = {"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 5000}}
    runtime.use(retrying(policy, sleep=sleep))

    chunks = list(runtime.stream(_options()))

    assert _finish(chunks).reason.kind == "stop"
    assert waits == [2000]


def test_retrying_stops_when_retry_after_exceeds_the_policy(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(_status(429, **{"retry-after": "60"}))
    runtime.use(retrying(FAST))

    chunks = list(runtime.stream(_options()))

    failure = _finish(chunks).reason.failure
    assert failure is not None
    assert failure.code == ErrorCode.RATE_LIMIT.value
    assert len(primary.requests) == 1


def test_retrying_never_retries_after_text_reached_the_consumer(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    # Text, then the connection is reset: TRANSPORT, a code the policy retries.
    primary.enqueue(
        Reply(body=(*sse_events([text("par")], done=False), Cut(reset=True))),
        _answer("a second answer"),
    )
    events: list[StreamRetryEvent] = []
    runtime.use(retrying(FAST, on_retry=events.append))

    chunks = list(validate_stream(runtime.stream(_options()), strict=True))

    failure = _finish(chunks).reason.failure
    assert failure is not None
    assert failure.code == ErrorCode.TRANSPORT.value
    assert len(primary.requests) == 1
    assert events == []
    assert "a second answer" not in repr(chunks)


def test_retrying_hands_the_failed_attempts_usage_to_on_retry(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    # A stop with no content after usage: usage, then finish{error, EMPTY_RESPONSE}.
    empty = Reply(body=sse_events([finish("stop"), only_usage(usage(7, 0))]))
    primary.enqueue(empty, _answer(prompt=9))
    events: list[StreamRetryEvent] = []
    runtime.use(retrying(FAST, on_retry=events.append))

    chunks = list(validate_stream(runtime.stream(_options()), strict=True))

    assert [e.failure.code for e in events] == [ErrorCode.EMPTY_RESPONSE.value]
    assert events[0].usage is not None
    assert events[0].usage.input_tokens == 7
    usages = [c.usage for c in chunks if isinstance(c, UsageChunk)]
    assert [u.input_tokens for u in usages] == [9]


def test_retrying_passes_the_last_failures_usage_on(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(Reply(body=sse_events([finish("stop"), only_usage(usage(7, 0))])))
    runtime.use(retrying({"mode": "normal", "maxRetries": 0}))

    chunks = list(validate_stream(runtime.stream(_options()), strict=True))

    assert isinstance(chunks[-2], UsageChunk)
    assert chunks[-2].usage == TokenUsage(input_tokens=7, output_tokens=0)
    assert _finish(chunks).reason.failure.code == ErrorCode.EMPTY_RESPONSE.value  # type: ignore[union-attr]


def test_abort_during_back_off_ends_before_the_delay(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(_status(503))
    delay_ms = 60_000
    controller = AbortController()
    timers: list[threading.Timer] = []

    def abort_soon(event: StreamRetryEvent) -> None:
        timer = threading.Timer(0.05, controller.abort)
        timers.append(timer)
        timer.start()

    policy = {
        "mode": "normal",
        "backoff": {"initialDelayMs": delay_ms, "maxDelayMs": delay_ms},
    }
    runtime.use(retrying(policy, on_retry=abort_soon))

    started = time.monotonic()
    chunks = list(runtime.stream(_options(signal=controller.signal)))
    elapsed = time.monotonic() - started

    assert elapsed < delay_ms / 1000
    finish_chunk = _finish(chunks)
    assert finish_chunk.reason.kind == "aborted"
    assert finish_chunk.reason.failure is not None
    assert finish_chunk.reason.failure.code == ErrorCode.ABORTED.value
    assert len(primary.requests) == 1
    for timer in timers:
        timer.join()


def test_an_aborted_signal_is_never_retried(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(_status(503), _answer())
    controller = AbortController()
    events: list[StreamRetryEvent] = []
    runtime.use(retrying(FAST, on_retry=events.append))
    stream = runtime.stream(_options(signal=controller.signal))
    controller.abort()

    chunks = list(stream)

    assert _finish(chunks).reason.kind == "aborted"
    assert events == []


def test_retrying_handles_a_raised_llm_error_below_it(runtime: LlmRuntime) -> None:
    calls: list[int] = []

    def flaky(options: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        calls.append(current_attempt())
        if len(calls) < 3:
            raise LlmError("busy", ErrorCode.SERVER)
        raise LlmError("bad request", ErrorCode.INVALID_REQUEST)

    runtime.use(retrying(FAST))
    runtime.use(flaky)

    with pytest.raises(LlmError) as caught:
        list(runtime.stream(_options()))
    assert caught.value.code == ErrorCode.INVALID_REQUEST.value
    assert calls == [1, 2, 3]


def test_retrying_applies_only_to_its_providers(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(_status(503), _answer())
    runtime.use(retrying(FAST, providers=["other"]))

    chunks = list(runtime.stream(_options()))

    assert _finish(chunks).reason.kind == "error"
    assert len(primary.requests) == 1


def test_closing_the_stream_closes_the_attempt(
    runtime: LlmRuntime, primary: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    primary.enqueue(
        Reply(body=sse_events([text("a"), text("b"), finish("stop", usage(1, 2))]))
    )
    runtime.use(retrying(FAST))
    stream = runtime.stream(_options())

    next(stream)
    stream.close()
    # The primary fixture asserts the connection was closed.


# --- failover ---------------------------------------------------------------------


def _failover_runtime(
    runtime: LlmRuntime, primary_url: str, backup: LoopbackServer, **options: Any
) -> list[FailoverEvent]:
    _register(runtime, "primary", primary_url)
    _register(runtime, "backup", backup.url)
    events: list[FailoverEvent] = []
    runtime.use(
        failover(
            "chat",
            [("primary", "model-a"), ("backup", "model-b")],
            on_failover=events.append,
            **options,
        )
    )
    return events


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (_status(429), ErrorCode.RATE_LIMIT),
        (_status(500), ErrorCode.SERVER),
        (_status(503), ErrorCode.SERVER),
    ],
)
def test_failover_moves_on_after_a_retryable_status(
    runtime: LlmRuntime,
    primary: LoopbackServer,
    backup: LoopbackServer,
    reply: Reply,
    code: ErrorCode,
) -> None:
    events = _failover_runtime(runtime, primary.url, backup)
    primary.enqueue(reply)
    backup.enqueue(_answer("from backup"))

    chunks = list(validate_stream(runtime.stream(_options("chat")), strict=True))

    assert collect(chunks).message.content[0].text == "from backup"  # type: ignore[union-attr]
    assert primary.requests[0].json()["model"] == "model-a"
    assert backup.requests[0].json()["model"] == "model-b"
    assert [(e.failed_provider, e.next_provider) for e in events] == [
        ("primary", "backup")
    ]
    assert events[0].failure.code == code.value
    assert events[0].after_content is False


def test_failover_moves_on_after_a_refused_connection(
    runtime: LlmRuntime, backup: LoopbackServer
) -> None:
    events = _failover_runtime(runtime, _closed_port_url(), backup)
    backup.enqueue(_answer("from backup"))

    chunks = list(runtime.stream(_options("chat")))

    assert _finish(chunks).reason.kind == "stop"
    assert events[0].failure.code == ErrorCode.TRANSPORT.value


def test_failover_passes_other_routes_through(
    runtime: LlmRuntime, primary: LoopbackServer, backup: LoopbackServer
) -> None:
    _failover_runtime(runtime, primary.url, backup)
    primary.enqueue(_status(503))

    chunks = list(runtime.stream(_options("primary")))

    assert _finish(chunks).reason.kind == "error"
    assert primary.requests[0].json()["model"] == "caller-model"
    assert backup.requests == ()


def test_failover_does_not_move_on_for_a_code_that_would_not_help(
    runtime: LlmRuntime, primary: LoopbackServer, backup: LoopbackServer
) -> None:
    events = _failover_runtime(runtime, primary.url, backup)
    primary.enqueue(_status(400))

    chunks = list(runtime.stream(_options("chat")))

    failure = _finish(chunks).reason.failure
    assert failure is not None
    assert failure.code == ErrorCode.INVALID_REQUEST.value
    assert backup.requests == ()
    assert events == []


def test_failover_moves_on_for_a_configured_code(
    runtime: LlmRuntime, primary: LoopbackServer, backup: LoopbackServer
) -> None:
    _failover_runtime(runtime, primary.url, backup, on_codes=["INVALID_REQUEST"])
    primary.enqueue(_status(400))
    backup.enqueue(_answer())

    chunks = list(runtime.stream(_options("chat")))

    assert _finish(chunks).reason.kind == "stop"


def test_failover_surfaces_the_last_routes_failure(
    runtime: LlmRuntime, primary: LoopbackServer, backup: LoopbackServer
) -> None:
    events = _failover_runtime(runtime, primary.url, backup)
    primary.enqueue(_status(503))
    backup.enqueue(_status(429))

    chunks = list(runtime.stream(_options("chat")))

    failure = _finish(chunks).reason.failure
    assert failure is not None
    assert failure.code == ErrorCode.RATE_LIMIT.value
    assert len(events) == 1


def test_failover_never_moves_on_after_text(
    runtime: LlmRuntime, primary: LoopbackServer, backup: LoopbackServer
) -> None:
    events = _failover_runtime(runtime, primary.url, backup)
    primary.enqueue(
        Reply(body=(*sse_events([text("par")], done=False), Cut(reset=True)))
    )

    chunks = list(validate_stream(runtime.stream(_options("chat")), strict=True))

    failure = _finish(chunks).reason.failure
    assert failure is not None
    assert failure.code == ErrorCode.TRANSPORT.value
    assert backup.requests == ()
    assert events == []


def test_restart_after_content_is_opt_in_and_never_silent(
    runtime: LlmRuntime, primary: LoopbackServer, backup: LoopbackServer
) -> None:
    with pytest.raises(ValueError, match="on_failover"):
        failover("chat", [("primary", None)], restart_after_content=True)
    events = _failover_runtime(runtime, primary.url, backup, restart_after_content=True)
    primary.enqueue(
        Reply(body=(*sse_events([text("par")], done=False), Cut(reset=True)))
    )
    backup.enqueue(_answer("whole"))
    seen_at: list[int] = []
    chunks: list[StreamChunk] = []
    for chunk in runtime.stream(_options("chat")):
        chunks.append(chunk)
        if events and not seen_at:
            seen_at.append(len(chunks))

    assert [e.after_content for e in events] == [True]
    # The event came before the first chunk of the new stream, which is whole.
    restart = seen_at[0] - 1
    assert list(validate_stream(chunks[restart:], strict=True))
    assert collect(chunks[restart:]).message.content[0].text == "whole"  # type: ignore[union-attr]
    assert "par" in repr(chunks[:restart])


def test_failover_then_retrying_retries_each_route(
    runtime: LlmRuntime, primary: LoopbackServer, backup: LoopbackServer
) -> None:
    _register(runtime, "primary", primary.url)
    _register(runtime, "backup", backup.url)
    attempts: list[tuple[str, int]] = []

    def record(options: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        attempts.append((options.provider, current_attempt()))
        return next_()

    runtime.use(failover("chat", [("primary", None), ("backup", None)]))
    runtime.use(retrying({"mode": "normal", "maxRetries": 1, **_backoff()}))
    runtime.use(record)
    primary.enqueue(_status(503), _status(503))
    backup.enqueue(_status(503), _answer())

    chunks = list(runtime.stream(_options("chat")))

    assert _finish(chunks).reason.kind == "stop"
    assert attempts == [("primary", 1), ("primary", 2), ("backup", 1), ("backup", 2)]


def _backoff() -> dict[str, Any]:
    return {"backoff": {"initialDelayMs": 1, "maxDelayMs": 2, "jitterRatio": 0}}


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        failover("chat", [])
    with pytest.raises(ValueError, match="twice"):
        failover("chat", [("a", None), ("a", "m")])
    with pytest.raises(ValueError, match="ABORTED"):
        failover("chat", [("a", None)], on_codes=["ABORTED"])
    with pytest.raises(ValueError, match=r"^policy\.mode"):
        retrying({"mode": "sometimes"})


# --- composition file -------------------------------------------------------------


def _composition(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "llm.yml"
    path.write_text(body, encoding="utf-8")
    return path


def test_failover_and_retrying_load_from_yaml(
    tmp_path: Path, primary: LoopbackServer, backup: LoopbackServer
) -> None:
    path = _composition(
        tmp_path,
        f"""\
- id: primary
  name: llm-openai-compatible
  config: {{providers: [primary], baseURL: "{primary.url}/v1"}}
- id: backup
  name: llm-openai-compatible
  config: {{providers: [backup], baseURL: "{backup.url}/v1"}}
- id: failover
  name: dsh_llm.routing.plugins:FAILOVER_PLUGIN
  config:
    alias: chat
    routes: [{{provider: primary, model: model-a}}, {{provider: backup}}]
    onCodes: [QUOTA]
- id: retrying
  name: dsh_llm.routing.plugins:RETRYING_PLUGIN
  config:
    policy:
      mode: normal
      maxRetries: 1
      backoff: {{initialDelayMs: 1, maxDelayMs: 2}}
    providers: [primary]
""",
    )
    primary.enqueue(_status(503), _status(503))
    backup.enqueue(_answer("from backup"))
    with load_composition(path, environ={}) as composition:
        chunks = list(composition.runtime.stream(_options("chat")))

    assert collect(chunks).message.content[0].text == "from backup"  # type: ignore[union-attr]
    assert len(primary.requests) == 2
    assert backup.requests[0].json()["model"] == "caller-model"


@pytest.mark.parametrize(
    ("plugin", "config", "key"),
    [
        ("FAILOVER_PLUGIN", "{alias: chat, routes: []}", "routes"),
        ("FAILOVER_PLUGIN", "{routes: [{provider: a}]}", "alias"),
        (
            "FAILOVER_PLUGIN",
            "{alias: c, routes: [{provider: a}, {provider: a}]}",
            "routes[1].provider",
        ),
        (
            "FAILOVER_PLUGIN",
            "{alias: c, routes: [{provider: a, modle: m}]}",
            "routes[0].modle",
        ),
        (
            "FAILOVER_PLUGIN",
            "{alias: c, routes: [{provider: a}], onCodes: [ABORTED]}",
            "onCodes",
        ),
        (
            "FAILOVER_PLUGIN",
            "{alias: c, routes: [{provider: a}], restartAfterContent: 1}",
            "restartAfterContent",
        ),
        (
            "RETRYING_PLUGIN",
            "{policy: {mode: normal, backoff: {maxDelayMs: 0}}}",
            "policy.backoff.maxDelayMs",
        ),
        ("RETRYING_PLUGIN", "{policy: {mode: sometimes}}", "policy.mode"),
        ("RETRYING_PLUGIN", "{providers: []}", "providers"),
        ("RETRYING_PLUGIN", "{retries: 3}", "retries"),
    ],
)
def test_bad_routing_config_is_a_load_error_naming_the_key(
    tmp_path: Path, plugin: str, config: str, key: str
) -> None:
    path = _composition(
        tmp_path,
        f"- id: routing\n  name: dsh_llm.routing.plugins:{plugin}\n"
        f"  config: {config}\n",
    )
    runtime = LlmRuntime()
    with pytest.raises(PluginLoadError) as caught:
        load_composition(path, runtime, environ={})
    assert caught.value.key == key
    assert f'config key "{key}"' in caught.value.message
    assert len(runtime._middleware) == 0


def test_every_bad_key_of_a_retry_policy_is_named_as_data(tmp_path: Path) -> None:
    config = "{policy: {mode: sometimes, retries: 3}}"  # two problems at once
    path = _composition(
        tmp_path,
        "- id: routing\n  name: dsh_llm.routing.plugins:RETRYING_PLUGIN\n"
        f"  config: {config}\n",
    )
    with pytest.raises(PluginLoadError) as caught:
        load_composition(path, LlmRuntime(), environ={})
    key = caught.value.key
    assert key in {"policy.mode", "policy.retries"}
    assert f'config key "{key}" ' in caught.value.message
    with pytest.raises(ConfigError) as direct:
        RetryingConfig(policy={"mode": "sometimes", "retries": 3})
    assert {key for key, _ in direct.value.problems} == {
        "policy.mode",
        "policy.retries",
    }


def test_disposing_the_plugin_removes_its_middleware(tmp_path: Path) -> None:
    path = _composition(
        tmp_path,
        "- id: retrying\n  name: dsh_llm.routing.plugins:RETRYING_PLUGIN\n",
    )
    runtime = LlmRuntime()
    composition = load_composition(path, runtime, environ={})
    assert len(runtime._middleware) == 1
    composition.dispose()
    assert len(runtime._middleware) == 0


def test_setup_cfg_declares_the_routing_entry_points() -> None:
    import configparser

    from dsh_llm.plugins import resolve_plugin
    from dsh_llm.routing.plugins import FAILOVER_PLUGIN
    from dsh_llm.routing.plugins import RETRYING_PLUGIN

    parser = configparser.ConfigParser()
    parser.read(Path(__file__).parents[2] / "setup.cfg", encoding="utf-8")
    lines = parser["options.entry_points"]["dsh_llm.plugins"].strip().splitlines()
    declared = dict(line.replace(" ", "").split("=") for line in lines)
    assert resolve_plugin(declared["llm-failover"]) is FAILOVER_PLUGIN
    assert resolve_plugin(declared["llm-retrying"]) is RETRYING_PLUGIN


def _scripted(
    scripts: dict[str, list[StreamChunk]],
) -> Callable[[GenerateOptions, StreamNext], Iterator[StreamChunk]]:
    """A middleware standing in for the adapters: each route's chunks."""

    def middleware(
        options: GenerateOptions, next_: StreamNext
    ) -> Iterator[StreamChunk]:
        yield from scripts[options.provider]

    return middleware


def _text_stream(words: str, end: Finish) -> list[StreamChunk]:
    return [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text=words),
        BlockEnd(index=0, block=TextBlock(text=words)),
        UsageChunk(usage=TokenUsage(input_tokens=5, output_tokens=2)),
        end,
    ]


SERVER_ERROR = Finish(
    reason=FinishReason.error(LlmFailure(message="busy", code="SERVER"))
)


def test_a_restart_hands_the_failed_routes_late_usage_to_on_failover() -> None:
    runtime = LlmRuntime()
    events: list[FailoverEvent] = []
    runtime.use(
        failover(
            "chat",
            [("primary", None), ("backup", None)],
            restart_after_content=True,
            on_failover=events.append,
        )
    )
    runtime.use(
        _scripted(
            {
                "primary": _text_stream("cut", SERVER_ERROR),
                "backup": _text_stream("whole", Finish(reason=FinishReason.STOP)),
            }
        )
    )

    chunks = list(runtime.stream(_options("chat")))

    (event,) = events
    assert event.after_content is True
    assert event.usage == TokenUsage(input_tokens=5, output_tokens=2)
    # The failed route's usage and finish are not in the stream; the answer's are.
    assert chunks[:3] == _text_stream("cut", SERVER_ERROR)[:3]
    assert chunks[3:] == _text_stream("whole", Finish(reason=FinishReason.STOP))


def test_without_restart_a_late_failure_is_passed_on_unchanged() -> None:
    runtime = LlmRuntime()
    events: list[FailoverEvent] = []
    runtime.use(
        failover(
            "chat", [("primary", None), ("backup", None)], on_failover=events.append
        )
    )
    runtime.use(
        _scripted(
            {
                "primary": _text_stream("cut", SERVER_ERROR),
                "backup": _text_stream("whole", Finish(reason=FinishReason.STOP)),
            }
        )
    )

    chunks = list(runtime.stream(_options("chat")))

    assert chunks == _text_stream("cut", SERVER_ERROR)
    assert events == []
