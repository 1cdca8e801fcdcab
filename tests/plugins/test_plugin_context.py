"""dsh_llm.plugins.context: the scope a plugin's apply() receives, its effects and
their disposal, used directly (without a composition)."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_llm import plugins
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import context as plugin_context
from dsh_llm.plugins.context import PluginContext
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import StreamChunk
from dsh_llm.runtime import LlmRuntime
from dsh_llm.runtime import StreamNext
from tests.runtime_adapters import DONE
from tests.runtime_adapters import Quiet


def test_registrations_are_disposed_with_their_plugin_scope() -> None:
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="scoped")
    handle = ctx.llm.register_adapter(["scoped-model"], Quiet())
    events: list[int] = []
    ctx.llm.on_adapters_updated(lambda: events.append(1))
    calls: list[str] = []

    def middleware(opts: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        calls.append(opts.provider)
        return next_()

    ctx.llm.use(middleware)
    assert [p.id for p in runtime.list_providers()] == ["scoped-model"]
    list(
        runtime.stream(GenerateOptions(provider="scoped-model", model="m", messages=()))
    )
    assert calls == ["scoped-model"]
    ctx.dispose()
    assert handle.disposed
    assert runtime.list_providers() == ()
    assert events == []  # the listener went before the registration
    list(runtime.stream(GenerateOptions(provider="x", model="m", messages=())))
    assert calls == ["scoped-model"]
    assert ctx.disposed
    assert "disposed" in repr(ctx)


def test_a_disposed_context_refuses_new_registrations_and_effects() -> None:
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="gone")
    ctx.dispose()
    actions: list[Callable[[], object]] = [
        lambda: ctx.llm.register_adapter(["r"], Quiet()),
        lambda: ctx.llm.use(lambda opts, next_: next_()),
        lambda: ctx.llm.on_adapters_updated(lambda: None),
        lambda: ctx.effect(lambda: None),
    ]
    for action in actions:
        with pytest.raises(LlmError) as caught:
            action()
        assert caught.value.code == ErrorCode.REGISTRATION_DISPOSED
    assert runtime.list_providers() == ()


def test_an_effect_can_be_run_early_and_then_does_not_run_again() -> None:
    ctx = PluginContext(LlmRuntime(), plugin_id="p")
    runs: list[int] = []
    run_now = ctx.effect(lambda: runs.append(1))
    run_now()
    run_now()
    ctx.dispose()
    assert runs == [1]
    with pytest.raises(TypeError):
        PluginContext(LlmRuntime(), plugin_id="q").effect(42)  # type: ignore[arg-type]


def test_a_plugin_disposing_its_own_registration_is_fine_on_dispose() -> None:
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="p")
    handle = ctx.llm.register_adapter(["r"], Quiet())
    handle.dispose()
    ctx.dispose()
    assert runtime.list_providers() == ()


def test_ctx_get_refuses_unknown_services_and_delegates_queries() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["r"], Quiet())
    ctx = PluginContext(runtime, plugin_id="p", services={"agents": 1})
    assert ctx.get("agents") == 1
    assert ctx.get("llm") is ctx.llm
    with pytest.raises(LlmError, match='no service "sessions"'):
        ctx.get("sessions")
    assert ctx.llm.list_providers() == runtime.list_providers()
    assert ctx.llm.list_models("r") == ()
    assert ctx.llm.provider_retry_policy("r") == runtime.provider_retry_policy("r")
    assert ctx.llm.resolve_model_info("r", "m").name == "m"
    config = LlmCallConfig(provider="r", model="m")
    assert ctx.llm.resolve_call_config(config) is config
    prepared = ctx.llm.prepare_call(config)
    assert prepared.config == config
    assert list(prepared.stream(GenerateOptions(provider="r", model="m", messages=())))
    stream = ctx.llm.stream(GenerateOptions(provider="r", model="m", messages=()))
    assert list(stream) == list(DONE)


def test_disposing_twice_runs_each_effect_once() -> None:
    ctx = PluginContext(LlmRuntime(), plugin_id="p")
    runs: list[int] = []
    ctx.effect(lambda: runs.append(1))
    ctx.dispose()
    ctx.dispose()
    assert runs == [1]


def test_a_registration_made_while_the_context_is_disposed_is_undone() -> None:
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="p")
    # The registry notifies listeners before register_adapter returns.
    runtime.on_adapters_updated(ctx.dispose)
    with pytest.raises(LlmError) as caught:
        ctx.llm.register_adapter(["r"], Quiet())
    assert caught.value.code == ErrorCode.REGISTRATION_DISPOSED
    assert runtime.list_providers() == ()


def test_middleware_added_while_the_context_is_disposed_is_removed() -> None:
    class DisposingRuntime(LlmRuntime):
        def use(self, middleware: Any, prepend: bool = False) -> Callable[[], None]:
            remove = super().use(middleware, prepend=prepend)
            ctx.dispose()  # another thread, between the check and the tracking
            return remove

    runtime = DisposingRuntime()
    runtime.register_adapter(["r"], Quiet())
    ctx = PluginContext(runtime, plugin_id="p")
    calls: list[str] = []

    def middleware(opts: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        calls.append(opts.provider)
        return next_()

    with pytest.raises(LlmError) as caught:
        ctx.llm.use(middleware)
    assert caught.value.code == ErrorCode.REGISTRATION_DISPOSED
    list(runtime.stream(GenerateOptions(provider="r", model="m", messages=())))
    assert calls == []


def test_the_plugins_module_re_exports_the_plugin_contract() -> None:
    for name in plugin_context.__all__:
        assert getattr(plugins, name) is getattr(plugin_context, name)
        assert name in plugins.__all__
