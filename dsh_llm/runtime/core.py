"""``LlmRuntime``: the one entry point, tying the registry, preparation and stream.

A provider enters the system with ``runtime.register_adapter(providers, adapter)``;
callers then stream with ``runtime.stream(options)``, where ``options.provider``
picks the adapter. Who owns what:

- ``dsh_llm.runtime.registry``: the route table, the registration handle, the
  adapters-updated listeners and the thread-safety of commits.
- ``dsh_llm.runtime.prepare``: checking adapter metadata and resolving a call
  config against it (pure).
- ``dsh_llm.runtime.stream``: the middleware waterfall and the adapter stage
  (bind, rewrite, police: exactly one finish, last).
- This module: ``LlmRuntime`` (the registry's public face, the middleware
  chain, the metadata calls) and ``PreparedLlmCall`` (one dispatch through the
  registration captured at preparation).

``count_tokens(options)`` asks the route's adapter to count a request's input
tokens (no middleware, one bounded request where the provider can count).

``stream(options)`` returns a lazy generator; a failed call ends with one
``Finish`` of kind ``error`` or ``aborted``, never raised. The runtime adds no
retry, cache or rate limit (``dsh_llm.retry``, ``dsh_llm.call``), and imports no
surface above it (for an async iterator use ``dsh_llm.aio.astream(runtime,
options)``). docs/runtime.md has the full list of guarantees.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Sequence

from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapter import LlmModelContext
from dsh_llm.adapter import LlmModelInfo
from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import ChunkStream
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import StreamMetadata
from dsh_llm.retry import RetryPolicy
from dsh_llm.runtime.prepare import AdapterDefaults
from dsh_llm.runtime.prepare import checked_catalog
from dsh_llm.runtime.prepare import checked_model_info
from dsh_llm.runtime.prepare import resolve_call_config
from dsh_llm.runtime.prepare import sends_config
from dsh_llm.runtime.registry import AdapterRegistration
from dsh_llm.runtime.registry import Registry
from dsh_llm.runtime.registry import find_route
from dsh_llm.runtime.stream import PreparedDispatch
from dsh_llm.runtime.stream import StreamMiddleware
from dsh_llm.runtime.stream import adapter_errors
from dsh_llm.runtime.stream import bind
from dsh_llm.runtime.stream import config_changed
from dsh_llm.runtime.stream import prepare_dispatch
from dsh_llm.runtime.stream import require_options
from dsh_llm.runtime.stream import rewrite
from dsh_llm.runtime.stream import waterfall
from dsh_llm.signal import AbortSignal

__all__ = ["LlmRuntime", "PreparedLlmCall"]


class PreparedLlmCall:
    """One call whose registration, model facts and config were resolved together.

    Returned by ``LlmRuntime.prepare_call``. ``stream(options)`` dispatches once
    through the registration captured at preparation, even if the route was
    replaced or disposed since.
    """

    __slots__ = ("_dispatch", "_dispatched", "_lock", "_runtime")

    def __init__(self, runtime: LlmRuntime, dispatch: PreparedDispatch) -> None:
        self._runtime = runtime
        self._dispatch = dispatch
        self._lock = threading.Lock()
        self._dispatched = False

    @property
    def config(self) -> LlmCallConfig:
        """The call config with the adapter's defaults materialised."""
        return self._dispatch.config

    @property
    def retry_policy(self) -> RetryPolicy:
        """The retry policy captured with the serving registration."""
        return self._dispatch.route.retry_policy

    @property
    def context(self) -> LlmModelContext | None:
        """The model's context capacity, when the adapter knows it."""
        return self._dispatch.model.context

    @property
    def input_modalities(self) -> tuple[str, ...] | None:
        """The model's accepted inputs, ``None`` when unknown."""
        return self._dispatch.model.input_modalities

    @property
    def model(self) -> LlmResolvedModelInfo:
        """Everything the adapter resolved about the model."""
        return self._dispatch.model

    @property
    def adapter_defaults(self) -> AdapterDefaults:
        """Which config fields the adapter filled in."""
        return self._dispatch.defaults

    def stream(self, options: GenerateOptions) -> ChunkStream:
        """Dispatch the call (once), through the middleware chain.

        ``options``' call-config fields (provider, model, reasoning effort,
        temperature, max tokens, stop) must equal ``config``.

        Raises:
            LlmError: ``INVALID_PREPARED_CALL`` when the call was already
                dispatched or ``options`` do not match ``config``.
        """
        require_options(options)
        with self._lock:
            if self._dispatched:
                raise LlmError(
                    "a prepared LLM call can only be dispatched once",
                    ErrorCode.INVALID_PREPARED_CALL,
                )
            if not sends_config(options, self._dispatch.config):
                raise config_changed()
            self._dispatched = True
        metadata = StreamMetadata()
        return ChunkStream(
            self._runtime._stream(options, self._dispatch, metadata),
            options,
            metadata,
        )

    def __repr__(self) -> str:
        config = self._dispatch.config
        return f"<PreparedLlmCall provider={config.provider!r} model={config.model!r}>"


class LlmRuntime:
    """The adapter registry and streaming entry point. Safe to share between
    threads; docs/runtime.md lists the guarantees."""

    def __init__(self) -> None:
        self._registry = Registry()
        self._lock = threading.Lock()
        self._middleware: tuple[tuple[object, StreamMiddleware], ...] = ()

    # --- registration -------------------------------------------------------

    @property
    def registry(self) -> Registry:
        """The route table behind this runtime."""
        return self._registry

    def register_adapter(
        self,
        providers: Sequence[str],
        adapter: LlmAdapter,
        *,
        on_commit: Callable[[AdapterRegistration], object] | None = None,
    ) -> AdapterRegistration:
        """Serve the routes ``providers`` with ``adapter``.

        Registration is all-or-nothing: every route and the adapter's metadata
        are checked before anything changes. The retry policy of each route is
        captured now.

        Args:
            providers: The route names (a list or tuple of non-empty strings).
            adapter: The adapter instance; one instance may serve many routes.
            on_commit: Called with the handle inside the commit, before any
                listener runs or another thread can dispose it (a plugin
                scope tracks the handle with it).

        Returns:
            The handle: call it or ``dispose()`` to release the routes,
            ``replace()`` to swap them.

        Raises:
            LlmError: ``INVALID_ADAPTER`` for no route, an empty route name, a
                non-``LlmAdapter`` or metadata whose id differs from its route or
                whose name is empty; ``DUPLICATE_ADAPTER`` for a route listed twice
                or held by another registration. Nothing is registered then.
                An ``INVARIANT`` raised by an ``on_adapters_updated`` listener
                is re-raised after the registration is undone (the listeners
                are told of the undo too).
        """
        return self._registry.register(providers, adapter, on_commit=on_commit)

    def on_adapters_updated(self, listener: Callable[[], object]) -> Callable[[], None]:
        """Call ``listener()`` after every registry commit (register, replace,
        dispose), with the new registry already readable.

        A listener that raises is logged and the others still run; nothing is
        vetoed. The first exception whose ``code`` is ``"INVARIANT"`` is re-raised
        after every listener ran. Listeners must be synchronous: a returned
        coroutine is closed and logged.

        Returns:
            A function removing the listener (idempotent).
        """
        return self._registry.on_adapters_updated(listener)

    # --- metadata -----------------------------------------------------------

    def list_providers(self) -> tuple[LlmProviderInfo, ...]:
        """The registered routes' display facts, in registration order."""
        return tuple(route.info for route in self._registry.routes.values())

    def provider_retry_policy(self, provider: str) -> RetryPolicy:
        """The retry policy captured when ``provider`` was registered.

        Raises:
            LlmError: ``NO_ADAPTER`` when no adapter serves ``provider``.
        """
        return find_route(self._registry.routes, provider).retry_policy

    def list_models(self, provider: str) -> tuple[LlmModelInfo, ...]:
        """The models the adapter of ``provider`` advertises (advisory).

        Raises:
            LlmError: ``NO_ADAPTER``; ``INVALID_CATALOG`` when an entry is not an
                ``LlmModelInfo`` of this route with a non-empty id and name, a
                str or ``None`` description, or repeats an id; what the adapter
                raised, as an ``LlmError`` (``UNKNOWN`` for a plain exception).
        """
        route = find_route(self._registry.routes, provider)
        with adapter_errors():
            models = route.adapter.list_models(provider)
        return checked_catalog(provider, models)

    def resolve_model_info(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> LlmResolvedModelInfo:
        """Everything the adapter of ``provider`` knows about ``model``, checked.

        ``signal`` is passed to the adapter; what the adapter raises on abort
        propagates unchanged.

        Raises:
            LlmError: ``NO_ADAPTER``; ``INVALID_MODEL_INFO``,
                ``INVALID_MODEL_CONTEXT``, ``INVALID_MODEL_MAX_TOKENS`` or
                ``INVALID_MODEL_REASONING`` when the adapter's answer is invalid;
                what the adapter raised, as an ``LlmError`` (``UNKNOWN`` for a
                plain exception).
        """
        route = find_route(self._registry.routes, provider)
        with adapter_errors(signal):
            resolved = route.adapter.resolve_model(provider, model, signal)
        return checked_model_info(provider, model, resolved)

    def resolve_call_config(
        self, config: LlmCallConfig, signal: AbortSignal | None = None
    ) -> LlmCallConfig:
        """Check ``config`` against its model and fill in the adapter's defaults.

        A missing ``max_tokens`` becomes the model's ``default_max_tokens``; a
        missing reasoning effort becomes the model's default effort. An explicit
        effort must be one the model offers exactly (no clamping, no aliases).
        No I/O to the provider happens here beyond what ``resolve_model`` does.

        Returns:
            ``config`` itself when nothing changed, else a new config.

        Raises:
            LlmError: ``NO_ADAPTER``; ``UNSUPPORTED_REASONING_EFFORT``; the
                model-metadata codes of ``resolve_model_info``.
        """
        info = self.resolve_model_info(config.provider, config.model, signal)
        return resolve_call_config(config, info)

    def prepare_call(
        self, config: LlmCallConfig, signal: AbortSignal | None = None
    ) -> PreparedLlmCall:
        """Resolve ``config`` and bind it to the current registration of its route.

        One route lookup and one ``adapter.prepare_call``, so the model facts and
        the dispatch come from the same adapter generation.

        Raises:
            LlmError: as ``resolve_call_config``.
        """
        dispatch = prepare_dispatch(config, signal, self._registry.routes)
        return PreparedLlmCall(self, dispatch)

    # --- middleware and streaming -------------------------------------------

    def use(
        self, middleware: StreamMiddleware, prepend: bool = False
    ) -> Callable[[], None]:
        """Add ``middleware`` to the ``llm/stream`` waterfall.

        The first added is outermost; ``prepend=True`` puts it first instead.
        Streams already started keep the chain they started with.

        Returns:
            A function removing this middleware (idempotent).
        """
        token = object()
        with self._lock:
            entry = (token, middleware)
            self._middleware = (
                (entry, *self._middleware) if prepend else (*self._middleware, entry)
            )

        def remove() -> None:
            with self._lock:
                self._middleware = tuple(
                    item for item in self._middleware if item[0] is not token
                )

        return remove

    def stream(self, options: GenerateOptions) -> ChunkStream:
        """Stream one model call (lazy: nothing runs before the first ``next()``;
        the ``ChunkStream`` carries ``options``).

        A failed call ends with one ``Finish`` of kind ``error`` or ``aborted``
        carrying the failure; it is not raised. Closing the stream closes the
        adapter's iterator.

        Raises:
            TypeError: when ``options`` is not a ``GenerateOptions``.
        """
        require_options(options)
        metadata = StreamMetadata()
        return ChunkStream(self._stream(options, None, metadata), options, metadata)

    def _stream(
        self,
        options: GenerateOptions,
        prepared: PreparedDispatch | None,
        metadata: StreamMetadata,
    ) -> Generator[StreamChunk, None, None]:
        chain = tuple(mw for _, mw in self._middleware)
        registry = self._registry

        def run() -> Generator[StreamChunk, None, None]:
            yield from waterfall(chain, 0, options, prepared, registry, metadata)

        return run()

    def count_tokens(self, options: GenerateOptions) -> int:
        """The input tokens ``options`` would cost on their route, counted by
        the route's adapter (``LlmAdapter.count_tokens``) before any call.

        The request is the one the adapter stage would give the adapter (the
        model's defaults filled in, images projected to text for a text-only
        model, foreign replay state removed); middleware does not run.

        Raises:
            TypeError: when ``options`` is not a ``GenerateOptions``.
            LlmError: ``NO_ADAPTER``; the model-metadata codes of
                ``prepare_call``; ``UNSUPPORTED_OPTION`` when the adapter cannot
                count; what counting raises (an ``LlmError``; ``UNKNOWN`` for a
                plain exception).
        """
        require_options(options)
        routes = self._registry.routes
        prepared, options = bind(options, None, routes)
        options = rewrite(options, prepared, routes)
        with adapter_errors(options.signal):
            return prepared.route.adapter.count_tokens(options)

    def __repr__(self) -> str:
        return f"<LlmRuntime providers={list(self._registry.routes)}>"
