"""``LlmRuntime``: the adapter registry, the stream middleware, and call preparation.

A provider enters the system with ``runtime.register_adapter(providers, adapter)``;
callers then stream with ``runtime.stream(options)``, where ``options.provider``
picks the adapter. Contracts callers may rely on:

- Registration is all-or-nothing. Every route and the adapter's metadata are
  checked before anything changes (``INVALID_ADAPTER``, ``DUPLICATE_ADAPTER``);
  the handle it returns is callable, has ``dispose()`` (idempotent) and
  ``replace(providers)`` (an atomic swap; ``REGISTRATION_DISPOSED`` after
  disposal). The retry policy of each route is captured at registration. The
  handle and the checks of what a registration captures are
  ``dsh_llm.runtime.registry``'s; the route table is this module's.
- Thread safety: mutations are serialised by one ``threading.RLock`` and publish
  a new route table in one assignment (copy on write), so a thread that streams
  while another registers, replaces or disposes sees either the table before or
  the table after a change, never a half-applied one. Listeners of
  ``on_adapters_updated`` run after the commit, outside the lock.
- ``stream(options)`` returns a lazy generator. Middleware added with ``use()``
  runs first (the first added is outermost); the adapter is looked up after it.
  Whatever fails in the adapter stage (no route, bad model metadata, an adapter
  that raises when called or while iterated) ends the stream with exactly one
  ``Finish`` of kind ``error`` (``aborted`` when ``options.signal`` is aborted or
  the failure's code is ``ABORTED``) carrying ``normalize_llm_failure(exc)``.
  Middleware, consumer and adapter-cleanup exceptions are never converted.
  Closing the returned generator closes the adapter's iterator.
- Defaults the adapter declares for the model (``default_max_tokens``, a default
  reasoning effort) are written into the options the adapter receives. A
  reasoning effort the model does not offer is refused before the adapter is
  called (``UNSUPPORTED_REASONING_EFFORT``). The checks of the adapter's model
  metadata and the call-config resolution are ``dsh_llm.runtime.prepare``'s.
- Replay state in a message's ``ModelSource`` reaches the adapter only when the
  message's historical route is served by the same adapter instance; otherwise
  the message is passed with its replay state removed (provider, model and id
  kept). Untouched messages are passed by identity.
- The stream ends at the adapter's first ``Finish``: the runtime then closes the
  adapter's iterator (what that raises is logged, not passed on) and reads
  nothing more. An adapter that ends without a finish gets one of kind ``error``
  with code ``STREAM_CLOSED``; one that yields an object that is not a chunk is
  closed and gets one with code ``INVALID_CHUNK``. So a runtime consumer sees
  exactly one finish, last. Beyond that the runtime does not check the chunk
  grammar (``dsh_llm.validator`` does), and it adds no retry, cache or rate
  limit (see ``dsh_llm.retry``).
- Importing this module imports no surface (the layers above the runtime,
  such as the async bridge, the plugins and the CLI, are never reached up to):
  the async bridge ``dsh_llm.aio`` is imported when ``astream`` is first called.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import inspect
import logging
import threading
from collections.abc import (
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Final, Protocol

import attrs

from dsh_llm.adapter import (
    LlmAdapter,
    LlmModelContext,
    LlmModelInfo,
    LlmProviderInfo,
    LlmResolvedModelInfo,
    PreparedAdapterCall,
)
from dsh_llm.errors import ErrorCode, LlmError, normalize_llm_failure
from dsh_llm.protocol import (
    CHUNK_TYPES,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmCallConfig,
    Message,
    ModelSource,
    StreamChunk,
)
from dsh_llm.retry import RetryPolicy
from dsh_llm.runtime.prepare import MAX_SAFE_INTEGER as MAX_SAFE_INTEGER
from dsh_llm.runtime.prepare import (
    AdapterDefaults,
    adapter_defaults,
    checked_catalog,
    checked_model_info,
    project_text_only,
    resolve_call_config,
)
from dsh_llm.runtime.registry import (
    AdapterRegistration,
    Route,
    describe_routes,
    route_names,
)
from dsh_llm.signal import AbortError, AbortSignal
from dsh_llm.sources import close_source

if TYPE_CHECKING:
    # The async bridge is a surface above the runtime, and the runtime never
    # reaches up: it is imported when ``astream`` runs, never with the runtime.
    from dsh_llm.aio import AsyncChunkStream

__all__ = [
    "AdapterDefaults",
    "AdapterRegistration",
    "LlmRuntime",
    "PreparedLlmCall",
    "StreamMiddleware",
    "StreamNext",
]

_log = logging.getLogger("dsh_llm")
_CHUNK_CLASSES: Final = tuple(CHUNK_TYPES.values())

_LISTENER_FAILED: Final = "llm: an llm/adapters-updated listener failed"

# ``LlmRuntime.astream``'s defaults, equal to ``dsh_llm.aio.DEFAULT_BATCH_SIZE`` and
# ``DEFAULT_QUEUE_SIZE`` (a test keeps them equal) without importing the bridge.
_ASTREAM_BATCH_SIZE: Final = 256
_ASTREAM_QUEUE_SIZE: Final = 8


class StreamNext(Protocol):
    """The ``next`` a middleware receives: runs the rest of the chain.

    Called without an argument it passes the options the middleware received;
    called with ``replacement`` it passes those instead (options are immutable,
    so routing is done with ``next(options.evolve(provider="other"))``). It may be
    called more than once; each call starts a new downstream call.
    """

    def __call__(
        self, replacement: GenerateOptions | None = None
    ) -> Iterator[StreamChunk]:
        """Run the downstream middleware and the adapter stage."""
        ...


StreamMiddleware = Callable[[GenerateOptions, StreamNext], Iterable[StreamChunk]]
"""``mw(options, next)`` returning the chunks to give upstream. It may wrap,
replace or short-circuit ``next()``; what it raises propagates to the consumer."""


@attrs.frozen(kw_only=True)
class _PreparedDispatch:
    """One call bound to a route's adapter generation (see ``_prepare``)."""

    route: Route
    config: LlmCallConfig
    model: LlmResolvedModelInfo
    defaults: AdapterDefaults
    dispatch: Callable[[GenerateOptions], Iterator[StreamChunk]]


class PreparedLlmCall:
    """One call whose registration, model facts and config were resolved together.

    Returned by ``LlmRuntime.prepare_call``. ``stream(options)`` dispatches once
    through the registration captured at preparation, even if the route was
    replaced or disposed since.
    """

    __slots__ = ("_dispatch", "_dispatched", "_lock", "_runtime")

    def __init__(self, runtime: LlmRuntime, dispatch: _PreparedDispatch) -> None:
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

    def stream(self, options: GenerateOptions) -> Generator[StreamChunk, None, None]:
        """Dispatch the call (once), through the middleware chain.

        ``options``' call-config fields (provider, model, reasoning effort,
        temperature, max tokens, stop) must equal ``config``.

        Raises:
            LlmError: ``INVALID_PREPARED_CALL`` when the call was already
                dispatched or ``options`` do not match ``config``.
        """
        _require_options(options)
        with self._lock:
            if self._dispatched:
                raise LlmError(
                    "a prepared LLM call can only be dispatched once",
                    ErrorCode.INVALID_PREPARED_CALL,
                )
            if options.call_config() != self._dispatch.config:
                raise _config_changed()
            self._dispatched = True
        return self._runtime._stream(options, self._dispatch)

    def __repr__(self) -> str:
        config = self._dispatch.config
        return f"<PreparedLlmCall provider={config.provider!r} model={config.model!r}>"


class LlmRuntime:
    """The adapter registry and streaming entry point. Safe to share between
    threads; see the module docstring for the guarantees."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # Published by assignment only (copy on write): readers take the current
        # dict without locking and never observe a commit half-way.
        self._routes: Mapping[str, Route] = {}
        self._middleware: tuple[tuple[object, StreamMiddleware], ...] = ()
        self._listeners: tuple[tuple[object, Callable[[], object]], ...] = ()

    # --- registration -------------------------------------------------------

    def register_adapter(
        self, providers: Sequence[str], adapter: LlmAdapter
    ) -> AdapterRegistration:
        """Serve the routes ``providers`` with ``adapter``.

        Args:
            providers: The route names (a list or tuple of non-empty strings).
            adapter: The adapter instance; one instance may serve many routes.

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
        return self._register(providers, adapter, None)

    def _register(
        self,
        providers: Sequence[str],
        adapter: LlmAdapter,
        on_commit: Callable[[AdapterRegistration], object] | None,
    ) -> AdapterRegistration:
        if not isinstance(adapter, LlmAdapter):
            raise LlmError(
                f"register_adapter() needs an LlmAdapter instance, got "
                f"{type(adapter).__name__}",
                ErrorCode.INVALID_ADAPTER,
            )
        routes = route_names(providers)
        if not routes:
            raise LlmError(
                "an adapter must register at least one provider",
                ErrorCode.INVALID_ADAPTER,
            )
        registration = AdapterRegistration(self, adapter)
        candidates = describe_routes(registration, routes)
        with self._lock:
            self._commit(registration, candidates)
            if on_commit is not None:
                on_commit(registration)
        try:
            self._emit_adapters_updated()
        except Exception:
            # All-or-nothing: the caller gets no handle, so no route may stay
            # behind that nothing could dispose. The second notice's failure
            # would only repeat the first.
            try:
                self._dispose(registration)
            except Exception as exc:
                _log.warning(_LISTENER_FAILED, exc_info=exc)
            raise
        return registration

    def _replace(
        self, registration: AdapterRegistration, providers: Sequence[str]
    ) -> None:
        routes = route_names(providers)
        self._check_live(registration)
        candidates = describe_routes(registration, routes)
        with self._lock:
            self._check_live(registration)
            self._commit(registration, candidates)
        self._emit_adapters_updated()

    @staticmethod
    def _check_live(registration: AdapterRegistration) -> None:
        if registration._disposed:
            raise LlmError(
                "a disposed adapter registration cannot replace its routes",
                ErrorCode.REGISTRATION_DISPOSED,
            )

    def _commit(
        self, registration: AdapterRegistration, candidates: Sequence[Route]
    ) -> None:
        """Swap ``registration``'s routes for ``candidates``; the caller holds
        the lock. Checks conflicts against the current table first."""
        current = self._routes
        for route in candidates:
            holder = current.get(route.info.id)
            if holder is not None and holder.registration is not registration:
                raise LlmError(
                    f'an adapter for provider "{route.info.id}" is already registered',
                    ErrorCode.DUPLICATE_ADAPTER,
                )
        table = {
            name: route
            for name, route in current.items()
            if route.registration is not registration
        }
        for route in candidates:
            table[route.info.id] = route
        registration._providers = tuple(route.info.id for route in candidates)
        self._routes = table
        _log.info(
            "registered %s for %s",
            type(registration.adapter).__name__,
            _route_list({route.info.id: route for route in candidates}),
        )

    def _dispose(self, registration: AdapterRegistration) -> None:
        with self._lock:
            if registration._disposed:
                return
            registration._disposed = True
            registration._providers = ()
            self._routes = {
                name: route
                for name, route in self._routes.items()
                if route.registration is not registration
            }
        self._emit_adapters_updated()

    # --- adapters-updated ---------------------------------------------------

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
        token = object()
        with self._lock:
            self._listeners = (*self._listeners, (token, listener))

        def remove() -> None:
            with self._lock:
                self._listeners = tuple(
                    entry for entry in self._listeners if entry[0] is not token
                )

        return remove

    def _emit_adapters_updated(self) -> None:
        invariant: BaseException | None = None
        for _, listener in self._listeners:
            try:
                returned = listener()
            except Exception as exc:
                if invariant is None and _code_of(exc) == ErrorCode.INVARIANT:
                    invariant = exc
                    continue
                _log.warning(_LISTENER_FAILED, exc_info=exc)
                continue
            if inspect.iscoroutine(returned):
                returned.close()
                _log.warning(
                    "%s: it returned a coroutine, which was closed unawaited "
                    "(listeners must be synchronous)",
                    _LISTENER_FAILED,
                )
        if invariant is not None:
            raise invariant

    # --- metadata -----------------------------------------------------------

    def list_providers(self) -> tuple[LlmProviderInfo, ...]:
        """The registered routes' display facts, in registration order."""
        return tuple(route.info for route in self._routes.values())

    def provider_retry_policy(self, provider: str) -> RetryPolicy:
        """The retry policy captured when ``provider`` was registered.

        Raises:
            LlmError: ``NO_ADAPTER`` when no adapter serves ``provider``.
        """
        return self._route(provider).retry_policy

    def list_models(self, provider: str) -> tuple[LlmModelInfo, ...]:
        """The models the adapter of ``provider`` advertises (advisory).

        Raises:
            LlmError: ``NO_ADAPTER``; ``INVALID_CATALOG`` when an entry is not an
                ``LlmModelInfo`` of this route with a non-empty id and name, a
                str or ``None`` description, or repeats an id; what the adapter
                raised, as an ``LlmError`` (``UNKNOWN`` for a plain exception).
        """
        route = self._route(provider)
        with _adapter_errors():
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
        route = self._route(provider)
        with _adapter_errors(signal):
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
        return PreparedLlmCall(self, self._prepare(config, signal, self._routes))

    def _prepare(
        self,
        config: LlmCallConfig,
        signal: AbortSignal | None,
        routes: Mapping[str, Route],
    ) -> _PreparedDispatch:
        """One route lookup in ``routes`` and one ``adapter.prepare_call``: the
        model facts, checked, and the config resolved against them."""
        route = self._route(config.provider, routes)
        with _adapter_errors(signal):
            prepared = route.adapter.prepare_call(config.provider, config.model, signal)
        adapter_call = _checked_adapter_call(prepared, config.provider)
        model = checked_model_info(config.provider, config.model, adapter_call.model)
        resolved = resolve_call_config(config, model)
        return _PreparedDispatch(
            route=route,
            config=resolved,
            model=model,
            defaults=adapter_defaults(config, resolved),
            dispatch=adapter_call.stream,
        )

    def _route(self, provider: str, routes: Mapping[str, Route] | None = None) -> Route:
        """The route serving ``provider`` in ``routes`` (default: the current
        table)."""
        table = self._routes if routes is None else routes
        route = table.get(provider)
        if route is None:
            raise LlmError(
                f'no adapter registered for provider "{provider}" '
                f"(registered: {_route_list(table)})",
                ErrorCode.NO_ADAPTER,
            )
        return route

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

    def stream(self, options: GenerateOptions) -> Generator[StreamChunk, None, None]:
        """Stream one model call (a lazy generator; nothing runs before the first
        ``next()``).

        A failed call ends with one ``Finish`` of kind ``error`` or ``aborted``
        carrying the failure; it is not raised. Closing the generator closes the
        adapter's iterator.

        Raises:
            TypeError: when ``options`` is not a ``GenerateOptions``.
        """
        _require_options(options)
        return self._stream(options, None)

    def astream(
        self,
        options: GenerateOptions,
        *,
        executor: concurrent.futures.Executor | None = None,
        batch_size: int = _ASTREAM_BATCH_SIZE,
        queue_size: int = _ASTREAM_QUEUE_SIZE,
    ) -> AsyncChunkStream:
        """``stream(options)`` as an async iterator driven on a worker thread.

        See ``dsh_llm.aio.astream``: leaving ``async for`` early or cancelling the
        task aborts the call and closes the adapter's generator on its thread.
        ``batch_size`` and ``queue_size`` default to ``dsh_llm.aio``'s
        ``DEFAULT_BATCH_SIZE`` and ``DEFAULT_QUEUE_SIZE``.
        """
        from dsh_llm.aio import astream

        return astream(
            self,
            options,
            executor=executor,
            batch_size=batch_size,
            queue_size=queue_size,
        )

    def _stream(
        self, options: GenerateOptions, prepared: _PreparedDispatch | None
    ) -> Generator[StreamChunk, None, None]:
        chain = tuple(mw for _, mw in self._middleware)

        def run() -> Generator[StreamChunk, None, None]:
            yield from self._waterfall(chain, 0, options, prepared)

        return run()

    def _waterfall(
        self,
        chain: tuple[StreamMiddleware, ...],
        position: int,
        options: GenerateOptions,
        prepared: _PreparedDispatch | None,
    ) -> Iterator[StreamChunk]:
        if position == len(chain):
            return self._adapter_stage(options, prepared)

        def next_(replacement: GenerateOptions | None = None) -> Iterator[StreamChunk]:
            chosen = options if replacement is None else replacement
            _require_options(chosen)
            return self._waterfall(chain, position + 1, chosen, prepared)

        return iter(chain[position](options, next_))

    def _adapter_stage(
        self, options: GenerateOptions, prepared: _PreparedDispatch | None
    ) -> Iterator[StreamChunk]:
        try:
            # One snapshot serves both the lookup and the replay-state owners, so
            # a concurrent commit cannot mix two tables in one call.
            routes = self._routes
            config = options.call_config()
            if prepared is None:
                prepared = self._prepare(config, options.signal, routes)
                if prepared.config is not config:
                    options = options.evolve(
                        reasoning_effort=prepared.config.reasoning_effort,
                        max_tokens=prepared.config.max_tokens,
                    )
            elif config != prepared.config:
                # A middleware changed the call config of a prepared call.
                raise _config_changed()
            options = project_text_only(options, prepared.model.input_modalities)
            options = _strip_foreign_replay_state(
                options, prepared.route.adapter, routes
            )
            iterator = iter(prepared.dispatch(options))
        except Exception as exc:
            yield _failure_finish(exc, options.signal)
            return
        completed = False
        finished = False
        try:
            while True:
                try:
                    chunk = next(iterator)
                except StopIteration:
                    completed = True
                    yield _failure_finish(_no_finish(options.provider), options.signal)
                    return
                except Exception as exc:
                    # A failed iterator is finished; closing it is not ours to do.
                    completed = True
                    yield _failure_finish(exc, options.signal)
                    return
                if not isinstance(chunk, _CHUNK_CLASSES):
                    completed = True
                    _close_after_end(iterator, options.provider)
                    yield _failure_finish(
                        _not_a_chunk(chunk, options.provider), options.signal
                    )
                    return
                if isinstance(chunk, Finish):
                    # The finish is terminal: what the adapter would do after it
                    # (a late exception, a second finish) never reaches the
                    # consumer, who already has a complete stream. The adapter
                    # is closed below, whether the consumer reads on or stops.
                    finished = True
                    yield chunk
                    return
                yield chunk
        finally:
            if finished:
                _close_after_end(iterator, options.provider)
            elif not completed:
                close_source(iterator)

    def __repr__(self) -> str:
        return f"<LlmRuntime providers={list(self._routes)}>"


# --- helpers ----------------------------------------------------------------------


def _require_options(options: object) -> None:
    if not isinstance(options, GenerateOptions):
        raise TypeError(
            f"options must be a GenerateOptions, got {type(options).__name__}"
        )


def _code_of(exc: BaseException) -> object:
    try:
        return getattr(exc, "code", None)
    except Exception:
        return None


def _route_list(routes: Mapping[str, Route]) -> str:
    """``"a", "b"`` (sorted), or ``none`` for an empty table."""
    return ", ".join(f'"{name}"' for name in sorted(routes)) or "none"


def _no_finish(provider: str) -> LlmError:
    return LlmError(
        f'the adapter for provider "{provider}" ended its stream without a finish',
        ErrorCode.STREAM_CLOSED,
    )


def _not_a_chunk(chunk: object, provider: str) -> LlmError:
    return LlmError(
        f'the adapter for provider "{provider}" yielded a value of type '
        f"{type(chunk).__name__}, not a stream chunk",
        ErrorCode.INVALID_CHUNK,
    )


def _close_after_end(iterator: Iterator[object], provider: str) -> None:
    """Close an adapter's iterator once the stream has ended; log what it raises."""
    try:
        close_source(iterator)
    except Exception as exc:
        _log.warning(
            'closing the stream of provider "%s" after its end failed',
            provider,
            exc_info=exc,
        )


@contextlib.contextmanager
def _adapter_errors(signal: AbortSignal | None = None) -> Iterator[None]:
    """Raise what an adapter's metadata method raises as an ``LlmError``: the
    same object when it is one, else ``normalize_llm_failure``'s failure (code
    ``UNKNOWN`` for a plain exception) with the original as the cause. Once
    ``signal`` is aborted, its reason (or an ``AbortError``) raised by the
    adapter surfaces unchanged, as in TS; so do exceptions outside
    ``Exception``."""
    try:
        yield
    except LlmError:
        raise
    except Exception as exc:
        if (
            signal is not None
            and signal.aborted
            and (exc is signal.reason or isinstance(exc, AbortError))
        ):
            raise
        raise LlmError.from_failure(normalize_llm_failure(exc), cause=exc) from exc


def _config_changed() -> LlmError:
    return LlmError(
        "prepared LLM call config changed before adapter dispatch",
        ErrorCode.INVALID_PREPARED_CALL,
    )


def _checked_adapter_call(call: object, provider: str) -> PreparedAdapterCall:
    if not isinstance(call, PreparedAdapterCall) or not callable(call.stream):
        raise LlmError(
            f'adapter prepare_call() for provider "{provider}" returned '
            f"{type(call).__name__}, not a PreparedAdapterCall",
            ErrorCode.INVALID_ADAPTER,
        )
    return call


def _failure_finish(exc: Exception, signal: AbortSignal | None) -> Finish:
    failure = normalize_llm_failure(exc)
    aborted = (signal is not None and signal.aborted) or (
        failure.code == ErrorCode.ABORTED
    )
    reason = FinishReason.aborted(failure) if aborted else FinishReason.error(failure)
    return Finish(reason=reason)


def _strip_foreign_replay_state(
    options: GenerateOptions, adapter: LlmAdapter, routes: Mapping[str, Route]
) -> GenerateOptions:
    messages: list[Message] = []
    changed = False
    for message in options.messages:
        source = message.source
        if isinstance(source, ModelSource) and source.replay_state is not None:
            owner = routes.get(source.provider)
            if owner is None or owner.adapter is not adapter:
                message = attrs.evolve(
                    message, source=attrs.evolve(source, replay_state=None)
                )
                changed = True
        messages.append(message)
    return options.evolve(messages=tuple(messages)) if changed else options
