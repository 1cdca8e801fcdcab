"""The plugin contract: what a plugin provides and the scope ``apply`` receives.

A plugin is a module (or any object) with an ``apply(ctx, config)`` function
(``Plugin``); ``ctx`` is a ``PluginContext``. Loading plugins from a composition
is ``dsh_llm.plugins``'s job; a ``PluginContext`` can also be built directly, to
call a plugin's ``apply`` without a composition (in tests, or when embedding).
Contracts callers may rely on:

- ``ctx.llm`` is the shared ``LlmRuntime`` seen through the plugin's scope
  (``ScopedLlmRuntime``): registrations, middleware and listeners added through
  it are effects of the plugin; every other call goes to the runtime as is.
- ``ctx.effect(dispose)`` adds an effect of the plugin's own. ``ctx.dispose()``
  undoes every effect, newest first, once (idempotent); a disposer that raises
  is logged on ``dsh_llm`` and the others still run.
- A disposed context refuses new registrations, middleware, listeners and
  effects with ``REGISTRATION_DISPOSED``; one that was being added while the
  context was disposed is undone at once, so nothing outlives the plugin.
- ``ctx.get(name)`` gives ``ctx.llm`` for ``"llm"`` and the services the context
  was built with; any other name is an ``LlmError`` with code ``PLUGIN_LOAD``.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Protocol

from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapter import LlmModelInfo
from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.config import quoted
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import ChunkStream
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.retry import RetryPolicy
from dsh_llm.runtime import AdapterRegistration
from dsh_llm.runtime import LlmRuntime
from dsh_llm.runtime import PreparedLlmCall
from dsh_llm.runtime import StreamMiddleware
from dsh_llm.signal import AbortSignal

__all__ = ["Plugin", "PluginContext", "ScopedLlmRuntime"]

_log = logging.getLogger("dsh_llm")


class Plugin(Protocol):
    """What a plugin provides (a module satisfies it with module-level names).

    ``inject`` (a tuple of service names) and ``Config`` (an attrs class) are
    optional attributes and therefore not part of this protocol's required
    members.
    """

    def apply(self, ctx: PluginContext, config: Any) -> Callable[[], object] | None:
        """Do the plugin's work through ``ctx``; may return an undo function."""
        ...


class ScopedLlmRuntime:
    """``ctx.llm``: the runtime as a plugin sees it.

    Registrations, middleware and listeners added through it are undone when the
    plugin is disposed; everything else is passed to the runtime as is.
    """

    __slots__ = ("_context", "_runtime")

    def __init__(self, runtime: LlmRuntime, context: PluginContext) -> None:
        self._runtime = runtime
        self._context = context

    @property
    def runtime(self) -> LlmRuntime:
        """The shared runtime behind this scope."""
        return self._runtime

    def register_adapter(
        self, providers: Sequence[str], adapter: LlmAdapter
    ) -> AdapterRegistration:
        """``LlmRuntime.register_adapter``, disposed with the plugin."""
        context = self._context
        context._check_open()
        handle = self._runtime.register_adapter(
            providers, adapter, on_commit=lambda h: context._track(h.dispose)
        )
        if context.disposed:
            # Disposed while registering: the snapshot it disposed may have
            # missed this handle, so release it here.
            handle.dispose()
            context._check_open()
        return handle

    def use(
        self, middleware: StreamMiddleware, prepend: bool = False
    ) -> Callable[[], None]:
        """``LlmRuntime.use``, removed with the plugin."""
        self._context._check_open()
        return self._scoped(self._runtime.use(middleware, prepend=prepend))

    def on_adapters_updated(self, listener: Callable[[], object]) -> Callable[[], None]:
        """``LlmRuntime.on_adapters_updated``, removed with the plugin."""
        self._context._check_open()
        return self._scoped(self._runtime.on_adapters_updated(listener))

    def _scoped(self, remove: Callable[[], None]) -> Callable[[], None]:
        try:
            return self._context.effect(remove)
        except LlmError:
            # The plugin was disposed meanwhile: nobody would remove it later.
            remove()
            raise

    def stream(self, options: GenerateOptions) -> ChunkStream:
        """``LlmRuntime.stream``."""
        return self._runtime.stream(options)

    def list_providers(self) -> tuple[LlmProviderInfo, ...]:
        """``LlmRuntime.list_providers``."""
        return self._runtime.list_providers()

    def list_models(self, provider: str) -> tuple[LlmModelInfo, ...]:
        """``LlmRuntime.list_models``."""
        return self._runtime.list_models(provider)

    def provider_retry_policy(self, provider: str) -> RetryPolicy:
        """``LlmRuntime.provider_retry_policy``."""
        return self._runtime.provider_retry_policy(provider)

    def resolve_model_info(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> LlmResolvedModelInfo:
        """``LlmRuntime.resolve_model_info``."""
        return self._runtime.resolve_model_info(provider, model, signal)

    def resolve_call_config(
        self, config: LlmCallConfig, signal: AbortSignal | None = None
    ) -> LlmCallConfig:
        """``LlmRuntime.resolve_call_config``."""
        return self._runtime.resolve_call_config(config, signal)

    def prepare_call(
        self, config: LlmCallConfig, signal: AbortSignal | None = None
    ) -> PreparedLlmCall:
        """``LlmRuntime.prepare_call``."""
        return self._runtime.prepare_call(config, signal)


class PluginContext:
    """What ``apply(ctx, config)`` receives: the plugin's scope.

    Everything done through it is undone by ``dispose()`` in reverse order. Build
    one directly to call a plugin's ``apply`` without a composition (in tests, or
    when embedding).

    Args:
        runtime: The runtime ``ctx.llm`` registers into.
        plugin_id: The plugin's id (used in logs and errors).
        environ: What ``ctx.environ`` gives (default: ``os.environ``).
        services: Further services for ``ctx.get`` besides ``"llm"``.
    """

    def __init__(
        self,
        runtime: LlmRuntime,
        *,
        plugin_id: str,
        environ: Mapping[str, str] | None = None,
        services: Mapping[str, object] | None = None,
    ) -> None:
        self._id = plugin_id
        self._llm = ScopedLlmRuntime(runtime, self)
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._services = dict(services or {})
        self._logger = logging.getLogger(f"dsh_llm.plugins.{plugin_id}")
        self._lock = threading.Lock()
        self._keys = itertools.count()
        self._effects: dict[int, Callable[[], object]] = {}
        self._disposed = False

    @property
    def id(self) -> str:
        """The plugin's id in its composition."""
        return self._id

    @property
    def llm(self) -> ScopedLlmRuntime:
        """The runtime, scoped to this plugin."""
        return self._llm

    @property
    def logger(self) -> logging.Logger:
        """The plugin's logger, ``dsh_llm.plugins.<id>``."""
        return self._logger

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment the plugin reads (variables such as API keys)."""
        return self._environ

    @property
    def disposed(self) -> bool:
        """Whether ``dispose()`` has run."""
        return self._disposed

    def get(self, name: str) -> object:
        """The service ``name`` (``"llm"`` gives ``ctx.llm``).

        Raises:
            LlmError: ``PLUGIN_LOAD`` when no such service is provided.
        """
        if name == "llm":
            return self._llm
        if name not in self._services:
            raise LlmError(
                f'plugin "{self._id}": no service "{name}" is provided '
                f"(provided: {quoted(['llm', *self._services])})",
                ErrorCode.PLUGIN_LOAD,
            )
        return self._services[name]

    def effect(self, dispose: Callable[[], object]) -> Callable[[], None]:
        """Run ``dispose()`` when the plugin is disposed.

        Returns:
            A function that runs ``dispose`` now (once) instead.

        Raises:
            LlmError: ``REGISTRATION_DISPOSED`` when the plugin was disposed.
        """
        if not callable(dispose):
            raise TypeError(f"effect() needs a callable, got {type(dispose).__name__}")
        self._check_open()
        return self._track(dispose)

    def _track(self, dispose: Callable[[], object]) -> Callable[[], None]:
        with self._lock:
            key = next(self._keys)
            self._effects[key] = dispose

        def run_now() -> None:
            with self._lock:
                pending = self._effects.pop(key, None)
            if pending is not None:
                pending()

        return run_now

    def _check_open(self) -> None:
        if self._disposed:
            raise LlmError(
                f'plugin "{self._id}" was disposed; its context cannot register '
                "anything",
                ErrorCode.REGISTRATION_DISPOSED,
            )

    def dispose(self) -> None:
        """Undo everything done through this context, newest first.

        Idempotent. A disposer that raises is logged and the others still run.
        """
        with self._lock:
            if self._disposed:
                return
            self._disposed = True
            effects = list(self._effects.values())
            self._effects.clear()
        for dispose in reversed(effects):
            try:
                dispose()
            except Exception:
                _log.exception('dsh_llm: plugin "%s": a disposer failed', self._id)

    def __repr__(self) -> str:
        return f"<PluginContext {self._id!r}{' disposed' if self._disposed else ''}>"
