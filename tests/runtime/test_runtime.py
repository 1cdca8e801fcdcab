"""dsh_llm.runtime: routing, metadata, call config, middleware and stream().

Registering is tested in test_registration.py, prepared calls in
test_runtime_prepared.py."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_llm import LlmRuntime as ExportedRuntime
from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.runtime import StreamNext
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal
from tests.runtime_adapters import EFFORTS
from tests.runtime_adapters import SCRIPT
from tests.runtime_adapters import ModelAdapter
from tests.runtime_adapters import RaisingAdapter
from tests.runtime_adapters import ScriptedAdapter
from tests.runtime_adapters import drain
from tests.runtime_adapters import image_block
from tests.runtime_adapters import only_finish
from tests.runtime_adapters import options

# --- routing and registration -----------------------------------------------------


def test_root_package_exports_the_runtime() -> None:
    assert ExportedRuntime is LlmRuntime


def test_stream_routes_to_the_registered_adapter() -> None:
    runtime = LlmRuntime()
    adapter = ScriptedAdapter()
    runtime.register_adapter(["test-provider"], adapter)
    assert drain(runtime.stream(options("test-provider"))) == list(SCRIPT)
    assert adapter.last.provider == "test-provider"


def test_direct_call_messages_and_options_arrive_by_identity() -> None:
    runtime = LlmRuntime()
    adapter = ScriptedAdapter()
    runtime.register_adapter(["route"], adapter)
    message = create_user_message("hello")
    request = options(messages=(message,))
    drain(runtime.stream(request))
    assert adapter.last is request
    assert adapter.last.messages[0] is message


def test_stream_is_lazy_until_the_first_chunk_is_requested() -> None:
    runtime = LlmRuntime()
    adapter = ScriptedAdapter()
    runtime.register_adapter(["route"], adapter)
    stream = runtime.stream(options())
    assert adapter.seen == []
    assert next(stream) == SCRIPT[0]
    assert len(adapter.seen) == 1
    stream.close()


def test_stream_refuses_something_that_is_not_generate_options() -> None:
    with pytest.raises(TypeError, match="GenerateOptions"):
        LlmRuntime().stream({"provider": "route"})  # type: ignore[arg-type]


# --- metadata ---------------------------------------------------------------------


def test_defaults_name_the_route_and_advertise_no_models() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["plain"], ScriptedAdapter())
    assert runtime.list_providers() == (LlmProviderInfo(id="plain", name="plain"),)
    assert runtime.list_models("plain") == ()
    assert runtime.resolve_model_info("plain", "unlisted") == LlmResolvedModelInfo(
        provider="plain", id="unlisted", name="unlisted"
    )
    for call in (
        lambda: runtime.list_models("missing"),
        lambda: runtime.resolve_model_info("missing", "m"),
        lambda: runtime.resolve_call_config(
            LlmCallConfig(provider="missing", model="m")
        ),
        lambda: runtime.prepare_call(LlmCallConfig(provider="missing", model="m")),
    ):
        with pytest.raises(LlmError) as caught:
            call()
        assert caught.value.code == ErrorCode.NO_ADAPTER


def test_unsupported_effort_ends_the_stream_before_the_adapter_is_called() -> None:
    runtime = LlmRuntime()
    adapter = ModelAdapter()
    runtime.register_adapter(["route"], adapter)
    finish = only_finish(drain(runtime.stream(options(reasoning_effort="high"))))
    assert finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
    assert adapter.seen == []


def test_materialised_defaults_reach_the_adapter_in_its_options() -> None:
    runtime = LlmRuntime()
    reasoning = LlmModelReasoningInfo(efforts=EFFORTS, default_effort="ultra")
    adapter = ModelAdapter(model={"reasoning": reasoning, "default_max_tokens": 512})
    runtime.register_adapter(["route"], adapter)
    message = create_user_message("hi")
    drain(runtime.stream(options(messages=(message,), temperature=0.5)))
    assert adapter.last.reasoning_effort == "ultra"
    assert adapter.last.max_tokens == 512
    assert adapter.last.temperature == 0.5
    assert adapter.last.messages[0] is message


def test_resolve_call_config_passes_the_signal_and_abort_surfaces_unchanged() -> None:
    reason = RuntimeError("cancel reasoning")
    started = threading.Event()

    class Blocking(ScriptedAdapter):
        def resolve_model(
            self, provider: str, model: str, signal: AbortSignal | None = None
        ) -> LlmResolvedModelInfo:
            assert signal is not None
            started.set()
            signal.wait(5)
            signal.throw_if_aborted()
            raise AssertionError("the signal was not aborted")

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Blocking())
    controller = AbortController()
    outcome: list[BaseException] = []

    def resolve() -> None:
        try:
            runtime.resolve_call_config(
                LlmCallConfig(provider="route", model="m"), controller.signal
            )
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=resolve)
    worker.start()
    assert started.wait(5)
    controller.abort(reason)
    worker.join(5)
    assert outcome == [reason]


# --- failures become one terminal finish ------------------------------------------


def test_unknown_provider_ends_with_an_error_finish_naming_no_adapter() -> None:
    finish = only_finish(drain(LlmRuntime().stream(options("nope"))))
    assert finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.NO_ADAPTER
    assert "no adapter registered" in finish.reason.failure.message


class _RaisingIterable:
    def __init__(self, failure: Exception) -> None:
        self.failure = failure

    def __iter__(self) -> Iterator[StreamChunk]:
        raise self.failure


class _FailingIterator:
    """An iterator whose __next__ raises; records whether close() was called."""

    def __init__(self, failure: Exception, before: Iterable[StreamChunk] = ()) -> None:
        self.failure = failure
        self.before = list(before)
        self.closed = 0

    def __iter__(self) -> _FailingIterator:
        return self

    def __next__(self) -> StreamChunk:
        if self.before:
            return self.before.pop(0)
        raise self.failure

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize("boundary", ["call", "iter", "next"])
def test_adapter_failures_at_every_boundary_become_one_error_finish(
    boundary: str,
) -> None:
    original = LlmError(f"{boundary} failed", "BOUNDARY_FAILED")
    failing = _FailingIterator(original)

    class Adapter(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Any:
            if boundary == "call":
                raise original
            if boundary == "iter":
                return _RaisingIterable(original)
            return failing

    runtime = LlmRuntime()
    runtime.register_adapter(["test"], Adapter())
    assert drain(runtime.stream(options("test"))) == [
        Finish(
            reason=FinishReason.error(
                LlmFailure(message=f"{boundary} failed", code="BOUNDARY_FAILED")
            )
        )
    ]
    assert failing.closed == 0


def test_a_failure_after_partial_output_ends_with_exactly_one_finish() -> None:
    failing = _FailingIterator(ValueError("wire broke"), SCRIPT[:2])

    class Adapter(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Any:
            return failing

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Adapter())
    chunks = drain(runtime.stream(options()))
    assert chunks[:2] == list(SCRIPT[:2])
    finish = only_finish(chunks)
    assert finish.reason == FinishReason.error(
        LlmFailure(message="wire broke", code="UNKNOWN")
    )
    assert failing.closed == 0


def test_a_generator_adapter_raising_mid_stream_ends_with_one_finish() -> None:
    class Adapter(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            yield SCRIPT[0]
            raise LlmError("stream from provider failed", "TRANSPORT")

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Adapter())
    chunks = drain(runtime.stream(options()))
    assert chunks[0] == SCRIPT[0]
    assert only_finish(chunks).reason.failure == LlmFailure(
        message="stream from provider failed", code="TRANSPORT"
    )


def test_the_first_finish_ends_the_stream_and_adapter_code_after_it_never_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed: list[bool] = []

    class Adapter(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            try:
                yield from SCRIPT
                raise LlmError("closing the response failed", "TRANSPORT")
            finally:
                closed.append(True)

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Adapter())
    with caplog.at_level("WARNING", logger="dsh_llm"):
        chunks = drain(runtime.stream(options()))
    assert chunks == list(SCRIPT)
    assert closed == [True]
    assert caplog.records == []


def test_a_failure_while_closing_after_the_finish_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Adapter(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            try:
                yield from SCRIPT
            finally:
                raise OSError("socket already gone")

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Adapter())
    with caplog.at_level("WARNING", logger="dsh_llm"):
        chunks = drain(runtime.stream(options()))
    assert chunks == list(SCRIPT)
    (record,) = caplog.records
    assert 'provider "route"' in record.getMessage()
    assert isinstance(record.exc_info and record.exc_info[1], OSError)


def test_a_consumer_stopping_at_the_finish_still_closes_the_adapter() -> None:
    class Closable:
        """An adapter stream that is an iterator with close(), not a generator."""

        def __init__(self) -> None:
            self.chunks = iter(SCRIPT)
            self.closed = False

        def __iter__(self) -> Closable:
            return self

        def __next__(self) -> StreamChunk:
            return next(self.chunks)

        def close(self) -> None:
            self.closed = True

    streams: list[Closable] = []

    class Adapter(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Any:
            streams.append(Closable())
            return streams[-1]

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Adapter())
    stream = runtime.stream(options())
    for chunk in stream:
        if isinstance(chunk, Finish):
            break
    stream.close()
    assert streams[0].closed
    # And when the consumer reads on after the finish.
    assert drain(runtime.stream(options())) == list(SCRIPT)
    assert streams[1].closed


def test_chunks_after_the_first_finish_are_not_read() -> None:
    second = Finish(reason=FinishReason.error(LlmFailure(message="x", code="LATE")))
    adapter = ScriptedAdapter([*SCRIPT, second, SCRIPT[0]])
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], adapter)
    assert drain(runtime.stream(options())) == list(SCRIPT)


def test_an_adapter_ending_without_a_finish_gets_a_stream_closed_finish() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], ScriptedAdapter(SCRIPT[:4]))
    chunks = drain(runtime.stream(options()))
    assert chunks[:4] == list(SCRIPT[:4])
    assert only_finish(chunks).reason == FinishReason.error(
        LlmFailure(
            message='the adapter for provider "route" ended its stream without a '
            "finish",
            code="STREAM_CLOSED",
        )
    )


def test_a_non_chunk_ends_the_stream_with_an_invalid_chunk_finish() -> None:
    closed: list[bool] = []

    class Adapter(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Iterator[Any]:
            try:
                yield SCRIPT[0]
                yield 42
                yield from SCRIPT[1:]
            finally:
                closed.append(True)

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Adapter())
    chunks = drain(runtime.stream(options()))
    assert chunks[0] == SCRIPT[0]
    assert only_finish(chunks).reason == FinishReason.error(
        LlmFailure(
            message='the adapter for provider "route" yielded a value of type int, '
            "not a stream chunk",
            code="INVALID_CHUNK",
        )
    )
    assert len(chunks) == 2
    assert closed == [True]


def test_foreign_exceptions_are_reported_as_unknown() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["test"], RaisingAdapter(KeyError("plain failure")))
    finish = only_finish(drain(runtime.stream(options("test"))))
    assert finish.reason == FinishReason.error(
        LlmFailure(message="'plain failure'", code="UNKNOWN")
    )


def test_structured_llm_error_facts_are_kept_in_the_finish() -> None:
    failure = LlmError(
        "provider busy",
        "RATE_LIMIT",
        status=429,
        provider_retry_after_ms=1500,
        request_id="req-7",
    )
    runtime = LlmRuntime()
    runtime.register_adapter(["test"], RaisingAdapter(failure))
    finish = only_finish(drain(runtime.stream(options("test"))))
    assert finish.reason == FinishReason.error(
        LlmFailure(
            message="provider busy",
            code="RATE_LIMIT",
            status=429,
            provider_retry_after_ms=1500,
            request_id="req-7",
        )
    )


def test_a_failure_with_an_aborted_signal_is_an_aborted_finish() -> None:
    controller = AbortController()
    controller.abort("cancelled")
    runtime = LlmRuntime()
    runtime.register_adapter(["test"], RaisingAdapter(RuntimeError("stopped")))
    finish = only_finish(
        drain(runtime.stream(options("test", signal=controller.signal)))
    )
    assert finish.reason == FinishReason.aborted(
        LlmFailure(message="stopped", code="UNKNOWN")
    )


def test_an_aborted_code_is_an_aborted_finish_even_without_a_signal() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["test"], RaisingAdapter(LlmError("stop", "ABORTED")))
    finish = only_finish(drain(runtime.stream(options("test"))))
    assert finish.reason.kind == "aborted"


def test_base_exceptions_are_not_normalised() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["test"], RaisingAdapter(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        drain(runtime.stream(options("test")))


# --- middleware, consumers and cleanup --------------------------------------------


def test_middleware_and_consumer_failures_propagate() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["test"], ScriptedAdapter())
    middleware_failure = RuntimeError("middleware failed")

    def broken(opts: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        raise middleware_failure

    remove = runtime.use(broken)
    with pytest.raises(RuntimeError) as caught:
        drain(runtime.stream(options("test")))
    assert caught.value is middleware_failure
    remove()

    consumer_failure = RuntimeError("consumer failed")

    def consume() -> None:
        for _ in runtime.stream(options("test")):
            raise consumer_failure

    with pytest.raises(RuntimeError) as consumed:
        consume()
    assert consumed.value is consumer_failure


def test_closing_the_consumer_closes_the_adapter_generator() -> None:
    closed = threading.Event()

    class Endless(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            try:
                yield BlockStart(index=0, block_type="text")
                while True:
                    yield TextDelta(index=0, text="x")
            finally:
                closed.set()

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Endless())
    stream = runtime.stream(options())
    next(stream)
    next(stream)
    assert not closed.is_set()
    stream.close()
    assert closed.is_set()


def test_early_close_runs_adapter_cleanup_and_its_failure_propagates() -> None:
    cleanup = RuntimeError("cleanup failed")

    class Closing:
        closes = 0

        def __iter__(self) -> Closing:
            return self

        def __next__(self) -> StreamChunk:
            return SCRIPT[0]

        def close(self) -> None:
            Closing.closes += 1
            raise cleanup

    class Adapter(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Any:
            return Closing()

    runtime = LlmRuntime()
    runtime.register_adapter(["test"], Adapter())
    stream = runtime.stream(options("test"))
    next(stream)
    with pytest.raises(RuntimeError) as caught:
        stream.close()
    assert caught.value is cleanup
    assert Closing.closes == 1


def test_early_close_of_an_iterator_without_close_is_fine() -> None:
    class Adapter(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Any:
            return iter([SCRIPT[0], SCRIPT[1]])

    runtime = LlmRuntime()
    runtime.register_adapter(["test"], Adapter())
    stream = runtime.stream(options("test"))
    next(stream)
    stream.close()


def test_middleware_can_prepend_chunks() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["test-model"], ScriptedAdapter())
    extra = (
        BlockStart(index=99, block_type="text"),
        BlockEnd(index=99, block=TextBlock(text="")),
    )

    def wrap(opts: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        inner = next_()
        yield from extra
        yield from inner

    runtime.use(wrap)
    chunks = drain(runtime.stream(options("test-model", model="dynamic-model")))
    assert chunks == [*extra, *SCRIPT]


def test_middleware_reroutes_before_the_adapter_is_looked_up() -> None:
    runtime = LlmRuntime()
    adapter = ScriptedAdapter()
    runtime.register_adapter(["routed"], adapter)
    runtime.use(lambda opts, next_: next_(opts.evolve(provider="routed")))
    drain(runtime.stream(options("initial")))
    assert adapter.last.provider == "routed"


def test_effort_default_is_applied_after_routing_middleware() -> None:
    runtime = LlmRuntime()
    reasoning = LlmModelReasoningInfo(efforts=EFFORTS, default_effort="standard")
    adapter = ModelAdapter(model={"reasoning": reasoning})
    runtime.register_adapter(["routed"], adapter)
    seen: list[GenerateOptions] = []

    def route(opts: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        seen.append(opts)
        return next_(opts.evolve(provider="routed"))

    remove = runtime.use(route)
    drain(runtime.stream(options("initial")))
    assert seen[0].reasoning_effort is None
    assert adapter.last.reasoning_effort == "standard"
    remove()
    drain(runtime.stream(options("routed")))
    assert adapter.last.reasoning_effort == "standard"
    assert len(seen) == 1


def test_middleware_order_first_added_is_outermost_and_prepend_goes_first() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], ScriptedAdapter())
    calls: list[str] = []

    def named(
        label: str,
    ) -> Callable[[GenerateOptions, StreamNext], Iterator[StreamChunk]]:
        def middleware(
            opts: GenerateOptions, next_: StreamNext
        ) -> Iterator[StreamChunk]:
            calls.append(label)
            return next_()

        return middleware

    runtime.use(named("first"))
    remove_second = runtime.use(named("second"))
    runtime.use(named("zeroth"), prepend=True)
    drain(runtime.stream(options()))
    assert calls == ["zeroth", "first", "second"]
    remove_second()
    remove_second()
    calls.clear()
    drain(runtime.stream(options()))
    assert calls == ["zeroth", "first"]


def test_middleware_may_short_circuit_without_calling_next() -> None:
    runtime = LlmRuntime()
    adapter = ScriptedAdapter()
    runtime.register_adapter(["route"], adapter)
    cached = (UsageChunk(usage=TokenUsage.unknown()), Finish(reason=FinishReason.STOP))
    runtime.use(lambda opts, next_: iter(cached))
    assert drain(runtime.stream(options())) == list(cached)
    assert adapter.seen == []


def test_next_refuses_a_replacement_that_is_not_generate_options() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], ScriptedAdapter())
    runtime.use(lambda opts, next_: next_({"provider": "x"}))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        drain(runtime.stream(options()))


# --- replay state -----------------------------------------------------------------


def _historical(provider: str) -> Message:
    return create_assistant_message(
        "old response",
        provider=provider,
        model="old-model",
        replay_state=ReplayEnvelope(response={"private": "state"}),
    )


def test_replay_state_is_kept_for_the_same_adapter_instance() -> None:
    runtime = LlmRuntime()
    adapter = ScriptedAdapter()
    runtime.register_adapter(["historical", "target"], adapter)
    message = _historical("historical")
    drain(runtime.stream(options("target", messages=(message,))))
    assert adapter.last.messages[0] is message


def test_replay_state_is_stripped_for_another_adapter_keeping_identity() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["historical"], ScriptedAdapter())
    target = ScriptedAdapter()
    runtime.register_adapter(["target"], target)
    message = _historical("historical")
    untouched = create_user_message("next question")
    gone = _historical("unregistered")
    request = options("target", messages=(message, untouched, gone))
    drain(runtime.stream(request))
    sent = target.last.messages
    assert sent[0].source == ModelSource(provider="historical", model="old-model")
    assert sent[0].id == message.id
    assert sent[0].content == message.content
    assert sent[1] is untouched
    assert sent[2].source == ModelSource(provider="unregistered", model="old-model")
    assert request.messages[0].source == message.source


def test_a_prepared_call_strips_foreign_replay_state_too() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["historical"], ScriptedAdapter())
    target = ScriptedAdapter()
    runtime.register_adapter(["target", "own"], target)
    foreign, own = _historical("historical"), _historical("own")
    prepared = runtime.prepare_call(LlmCallConfig(provider="target", model="model"))
    drain(prepared.stream(options("target", messages=(foreign, own))))
    sent = target.last.messages
    assert sent[0].source == ModelSource(provider="historical", model="old-model")
    assert sent[0].id == foreign.id
    assert sent[1] is own


# --- images for text-only models --------------------------------------------------


def test_images_are_projected_to_text_after_the_middleware_saw_them() -> None:
    runtime = LlmRuntime()
    adapter = ModelAdapter(**{"text-only": {"input_modalities": ("text",)}})
    runtime.register_adapter(["route"], adapter)
    image = image_block("a")
    nested = ToolResultBlock(tool_call_id=CallId("call-1"), content=(image,))
    message = create_user_message([image, nested])
    plain = create_user_message("no image")
    seen: list[GenerateOptions] = []

    def watch(opts: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        seen.append(opts)
        return next_()

    runtime.use(watch)
    drain(runtime.stream(options(model="text-only", messages=(message, plain))))
    assert seen[0].messages[0] is message
    omitted = TextBlock(
        text="[image omitted because this model accepts text only; "
        "attachment sha256:aaaaaaaa]"
    )
    sent = adapter.last.messages
    assert sent[0].content == (
        omitted,
        ToolResultBlock(tool_call_id=CallId("call-1"), content=(omitted,)),
    )
    assert sent[1] is plain
    drain(runtime.stream(options(model="vision", messages=(message,))))
    assert adapter.last.messages[0] is message


def test_repr_names_the_routes() -> None:
    runtime = LlmRuntime()
    handle = runtime.register_adapter(["a"], ScriptedAdapter())
    assert "'a'" in repr(runtime)
    assert "ScriptedAdapter" in repr(handle)
    prepared = runtime.prepare_call(LlmCallConfig(provider="a", model="m"))
    assert repr(prepared) == "<PreparedLlmCall provider='a' model='m'>"
    handle()
    assert "disposed" in repr(handle)


# --- layering ----------------------------------------------------------------------


def test_importing_the_runtime_does_not_import_the_async_bridge() -> None:
    # Layers never reach up: the runtime does not import the surfaces above it
    # (the async bridge, the plugins, the CLI).
    script = (
        "import sys\n"
        "import dsh_llm.runtime\n"
        "assert 'dsh_llm.aio' not in sys.modules, 'dsh_llm.aio was imported'\n"
        "from dsh_llm import LlmRuntime\n"
        "assert 'dsh_llm.aio' not in sys.modules, 'dsh_llm.aio was imported'\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok\n", "")


def test_the_runtime_leaves_the_async_iterator_to_the_bridge() -> None:
    # The runtime never reaches up into dsh_llm.aio: the async surface is
    # dsh_llm.aio.astream(runtime, options).
    assert not hasattr(LlmRuntime, "astream")


@pytest.mark.parametrize("method", ["list_models", "resolve_model", "prepare_call"])
def test_a_plain_exception_from_adapter_metadata_is_an_llm_error(method: str) -> None:
    failure = ValueError(f"boom in {method}")

    class Buggy(ScriptedAdapter):
        def list_models(self, provider: str) -> Any:
            if method == "list_models":
                raise failure
            return super().list_models(provider)

        def resolve_model(
            self, provider: str, model: str, signal: AbortSignal | None = None
        ) -> LlmResolvedModelInfo:
            if method == "resolve_model":
                raise failure
            return super().resolve_model(provider, model, signal)

        def prepare_call(self, *args: Any) -> Any:
            if method == "prepare_call":
                raise failure
            return super().prepare_call(*args)

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Buggy())
    config = LlmCallConfig(provider="route", model="m")
    call: Callable[[], object] = {
        "list_models": lambda: runtime.list_models("route"),
        "resolve_model": lambda: runtime.resolve_model_info("route", "m"),
        "prepare_call": lambda: runtime.prepare_call(config),
    }[method]
    with pytest.raises(LlmError) as caught:
        call()
    assert caught.value.code == "UNKNOWN"
    assert caught.value.message == f"boom in {method}"
    assert caught.value.__cause__ is failure


def test_an_aborted_resolve_surfaces_only_the_abort_reason_unchanged() -> None:
    controller = AbortController()
    controller.abort()

    class Failing(ScriptedAdapter):
        def resolve_model(
            self, provider: str, model: str, signal: AbortSignal | None = None
        ) -> LlmResolvedModelInfo:
            raise ValueError("socket shut down")

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Failing())
    with pytest.raises(LlmError) as caught:
        runtime.resolve_model_info("route", "m", controller.signal)
    assert caught.value.code == "UNKNOWN"


# --- rule 7 repaired, never silently ----------------------------------------------


def _stream_of(script: Iterable[StreamChunk], route: str) -> list[StreamChunk]:
    runtime = LlmRuntime()
    runtime.register_adapter([route], ScriptedAdapter(script))
    return drain(runtime.stream(options(provider=route)))


def test_a_usage_yielded_after_the_finish_is_moved_before_it_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    *blocks, usage, finish = SCRIPT
    late = [*blocks, finish, usage]
    with caplog.at_level("WARNING", logger="dsh_llm"):
        first = _stream_of(late, "late-usage")
        second = _stream_of(late, "late-usage")
    assert first == second == list(SCRIPT)
    (record,) = caplog.records
    assert 'provider "late-usage" yielded its usage after its finish' in record.message
    assert "rule 7" in record.message


def test_a_successful_finish_without_usage_gets_an_unknown_usage_and_a_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    *blocks, _usage, finish = SCRIPT
    with caplog.at_level("WARNING", logger="dsh_llm"):
        chunks = _stream_of([*blocks, finish], "no-usage")
    assert chunks == [*blocks, UsageChunk(usage=TokenUsage.unknown()), finish]
    (record,) = caplog.records
    assert 'provider "no-usage" finished without a usage' in record.message


def test_a_failure_finish_may_come_without_usage_unchanged_and_unlogged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failed = Finish(
        reason=FinishReason.error(LlmFailure(message="gone", code="SERVER"))
    )
    script = [*SCRIPT[:2], failed]
    with caplog.at_level("WARNING", logger="dsh_llm"):
        chunks = _stream_of(script, "failed-without-usage")
    assert chunks == script
    assert caplog.records == []
