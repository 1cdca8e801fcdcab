"""The ``llm/stream`` waterfall: middleware, then the adapter stage, policed.

``LlmRuntime.stream`` builds the chain; this module runs it. Contracts callers
may rely on:

- ``waterfall`` runs the middleware in order (the first is outermost); a
  ``next()`` with replacement options must get a ``GenerateOptions``
  (``TypeError``). What middleware raises is never converted.
- The adapter stage is three named steps: ``bind`` (look the route up and
  prepare the call, or check a prepared call's config is unchanged:
  ``INVALID_PREPARED_CALL``), ``rewrite`` (the adapter's defaults, the
  text-only projection, foreign replay state removed; untouched options pass by
  identity) and ``police`` (exactly one finish, last).
- A failure in ``bind``, ``rewrite`` or the adapter's call ends the stream with
  one ``Finish`` of kind ``error`` (``aborted`` when the signal is aborted or
  the code is ``ABORTED``) carrying ``normalize_llm_failure(exc)``.
- ``police`` stops at the adapter's first ``Finish`` and closes its iterator
  (what closing raises is logged); an iterator that ends without a finish gets
  one with ``STREAM_CLOSED``, a value that is not a chunk one with
  ``INVALID_CHUNK``. Closing the stage closes the adapter's iterator.
- An adapter stream that is a ``ChunkStream`` has its metadata (what its
  response said: request id, rate limits) followed by the runtime stream's.
- ``adapter_errors`` turns what an adapter's metadata method raises into an
  ``LlmError`` (the abort reason of an aborted signal passes unchanged).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Final
from typing import Protocol

import attrs

from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapter import PreparedAdapterCall
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.errors import normalize_llm_failure
from dsh_llm.protocol import CHUNK_TYPES
from dsh_llm.protocol import ChunkStream
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import StreamMetadata
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.runtime.prepare import AdapterDefaults
from dsh_llm.runtime.prepare import adapter_defaults
from dsh_llm.runtime.prepare import checked_model_info
from dsh_llm.runtime.prepare import project_text_only
from dsh_llm.runtime.prepare import resolve_call_config
from dsh_llm.runtime.prepare import sends_config
from dsh_llm.runtime.registry import Registry
from dsh_llm.runtime.registry import Route
from dsh_llm.runtime.registry import find_route
from dsh_llm.signal import AbortError
from dsh_llm.signal import AbortSignal
from dsh_llm.sources import close_source

__all__ = [
    "PreparedDispatch",
    "StreamMiddleware",
    "StreamNext",
    "adapter_errors",
    "adapter_stage",
    "bind",
    "config_changed",
    "failure_finish",
    "police",
    "prepare_dispatch",
    "require_options",
    "rewrite",
    "waterfall",
]

_log = logging.getLogger("dsh_llm")
_CHUNK_CLASSES: Final = tuple(CHUNK_TYPES.values())
_PLAIN_CHUNKS: Final = frozenset(_CHUNK_CLASSES) - {Finish, UsageChunk}
"""The chunk classes that end nothing and need no note: a chunk of exactly one
of them passes."""
_REPAIRED: set[str] = set()
"""The routes whose adapter had its usage moved before its finish (logged once)."""


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
class PreparedDispatch:
    """One call bound to a route's adapter generation (see ``prepare_dispatch``)."""

    route: Route
    """The route as it was when the call was prepared."""
    config: LlmCallConfig
    """The call config with the adapter's defaults materialised."""
    model: LlmResolvedModelInfo
    """The model facts, checked."""
    defaults: AdapterDefaults
    """Which config fields the adapter filled in."""
    dispatch: Callable[[GenerateOptions], Iterator[StreamChunk]]
    """The adapter's stream for this call."""


def prepare_dispatch(
    config: LlmCallConfig,
    signal: AbortSignal | None,
    routes: Mapping[str, Route],
) -> PreparedDispatch:
    """One route lookup in ``routes`` and one ``adapter.prepare_call``: the
    model facts, checked, and the config resolved against them.

    Raises:
        LlmError: ``NO_ADAPTER``; ``INVALID_ADAPTER`` for a ``prepare_call``
            answer that is not a ``PreparedAdapterCall``; the model-metadata
            codes of ``checked_model_info``; ``UNSUPPORTED_REASONING_EFFORT``;
            what the adapter raised, as ``adapter_errors`` passes it.
    """
    route = find_route(routes, config.provider)
    with adapter_errors(signal):
        prepared = route.adapter.prepare_call(config.provider, config.model, signal)
    adapter_call = _checked_adapter_call(prepared, config.provider)
    model = checked_model_info(config.provider, config.model, adapter_call.model)
    resolved = resolve_call_config(config, model)
    return PreparedDispatch(
        route=route,
        config=resolved,
        model=model,
        defaults=adapter_defaults(config, resolved),
        dispatch=adapter_call.stream,
    )


def waterfall(
    chain: tuple[StreamMiddleware, ...],
    position: int,
    options: GenerateOptions,
    prepared: PreparedDispatch | None,
    registry: Registry,
    metadata: StreamMetadata | None = None,
) -> Iterator[StreamChunk]:
    """Run ``chain[position:]`` and then the adapter stage over ``options``
    (``metadata``: the runtime stream's, shown the adapter stream's)."""
    if position == len(chain):
        return adapter_stage(options, prepared, registry, metadata)

    def next_(replacement: GenerateOptions | None = None) -> Iterator[StreamChunk]:
        chosen = options if replacement is None else replacement
        require_options(chosen)
        return waterfall(chain, position + 1, chosen, prepared, registry, metadata)

    return iter(chain[position](options, next_))


def adapter_stage(
    options: GenerateOptions,
    prepared: PreparedDispatch | None,
    registry: Registry,
    metadata: StreamMetadata | None = None,
) -> Iterator[StreamChunk]:
    """``bind``, ``rewrite``, call the adapter and ``police`` its stream; an
    adapter stream's metadata (a ``ChunkStream``'s) is followed by ``metadata``."""
    try:
        # One snapshot serves both the lookup and the replay-state owners, so
        # a concurrent commit cannot mix two tables in one call.
        routes = registry.routes
        prepared, options = bind(options, prepared, routes)
        options = rewrite(options, prepared, routes)
        produced = prepared.dispatch(options)
        if metadata is not None and isinstance(produced, ChunkStream):
            metadata.follow(produced.metadata)
        iterator = iter(produced)
    except Exception as exc:
        yield failure_finish(exc, options.signal)
        return
    yield from police(iterator, options.provider, options.signal)


def bind(
    options: GenerateOptions,
    prepared: PreparedDispatch | None,
    routes: Mapping[str, Route],
) -> tuple[PreparedDispatch, GenerateOptions]:
    """The dispatch serving ``options``, and the options with the defaults it
    resolved written in (by identity when it resolved none).

    Raises:
        LlmError: as ``prepare_dispatch``; ``INVALID_PREPARED_CALL`` when a
            middleware changed the call config of a prepared call.
    """
    if prepared is not None:
        if not sends_config(options, prepared.config):
            # A middleware changed the call config of a prepared call.
            raise config_changed()
        return prepared, options
    config = options.call_config()
    prepared = prepare_dispatch(config, options.signal, routes)
    if prepared.config is not config:
        options = options.evolve(
            reasoning_effort=prepared.config.reasoning_effort,
            max_tokens=prepared.config.max_tokens,
        )
    return prepared, options


def rewrite(
    options: GenerateOptions,
    prepared: PreparedDispatch,
    routes: Mapping[str, Route],
) -> GenerateOptions:
    """``options`` as the adapter may see them: images projected to text for a
    text-only model, and replay state of another adapter removed."""
    options = project_text_only(options, prepared.model.input_modalities)
    return _strip_foreign_replay_state(options, prepared.route.adapter, routes)


def police(
    iterator: Iterator[object], provider: str, signal: AbortSignal | None
) -> Iterator[StreamChunk]:
    """The adapter's chunks up to and including exactly one ``Finish``."""
    completed = False
    finished = False
    usage_seen = False
    try:
        while True:
            try:
                chunk = next(iterator)
            except StopIteration:
                completed = True
                yield failure_finish(_no_finish(provider), signal)
                return
            except Exception as exc:
                # A failed iterator is finished; closing it is not ours to do.
                completed = True
                yield failure_finish(exc, signal)
                return
            if type(chunk) in _PLAIN_CHUNKS:
                # The per-delta path: one set lookup, not two isinstance checks
                # (which the type checker would need to see it is a chunk).
                yield chunk  # type: ignore[misc]
                continue
            if not isinstance(chunk, _CHUNK_CLASSES):
                completed = True
                _close_after_end(iterator, provider)
                yield failure_finish(_not_a_chunk(chunk, provider), signal)
                return
            if isinstance(chunk, Finish):
                # The finish is terminal: what the adapter would do after it
                # (a late exception, a second finish) never reaches the
                # consumer, who already has a complete stream. The adapter
                # is closed below, whether the consumer reads on or stops.
                finished = True
                if not usage_seen:
                    yield from _repaired_usage(iterator, chunk, provider)
                yield chunk
                return
            if type(chunk) is UsageChunk:
                usage_seen = True
            yield chunk
    finally:
        if finished:
            _close_after_end(iterator, provider)
        elif not completed:
            close_source(iterator)


def _repaired_usage(
    iterator: Iterator[object], finish: Finish, provider: str
) -> Iterator[UsageChunk]:
    """The usage a finish came without (rule 7: usage, then finish): a usage the
    adapter yields right after its finish is moved before it; a successful finish
    with none at all gets an unknown usage (every count ``None``). Either repair
    is logged once per route; a failure finish may come without usage."""
    late: object = None
    try:
        late = next(iterator)
    except Exception:
        late = None  # the finish already ended the call: a late end is ignored
    if type(late) is UsageChunk:
        _note_repair(provider, "yielded its usage after its finish; moved before it")
        yield late
    elif not finish.reason.is_failure:
        _note_repair(
            provider,
            "finished without a usage; an unknown usage (every count null) was added",
        )
        yield UsageChunk(usage=TokenUsage.unknown())


def _note_repair(provider: str, what: str) -> None:
    if provider in _REPAIRED:
        return
    _REPAIRED.add(provider)
    _log.warning(
        'the adapter for provider "%s" %s (rule 7 of docs/protocol.md); '
        "logged once per route",
        provider,
        what,
    )


def failure_finish(exc: Exception, signal: AbortSignal | None) -> Finish:
    """The one ``Finish`` a failed call ends with: ``aborted`` when ``signal``
    is aborted or the failure's code is ``ABORTED``, else ``error``."""
    failure = normalize_llm_failure(exc)
    aborted = (signal is not None and signal.aborted) or (
        failure.code == ErrorCode.ABORTED
    )
    reason = FinishReason.aborted(failure) if aborted else FinishReason.error(failure)
    return Finish(reason=reason)


@contextlib.contextmanager
def adapter_errors(signal: AbortSignal | None = None) -> Iterator[None]:
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


def require_options(options: object) -> None:
    """Raise ``TypeError`` unless ``options`` is a ``GenerateOptions``."""
    if not isinstance(options, GenerateOptions):
        raise TypeError(
            f"options must be a GenerateOptions, got {type(options).__name__}"
        )


def config_changed() -> LlmError:
    """The ``INVALID_PREPARED_CALL`` error for a prepared call whose options
    no longer match its config."""
    return LlmError(
        "prepared LLM call config changed before adapter dispatch",
        ErrorCode.INVALID_PREPARED_CALL,
    )


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


def _checked_adapter_call(call: object, provider: str) -> PreparedAdapterCall:
    if not isinstance(call, PreparedAdapterCall) or not callable(call.stream):
        raise LlmError(
            f'adapter prepare_call() for provider "{provider}" returned '
            f"{type(call).__name__}, not a PreparedAdapterCall",
            ErrorCode.INVALID_ADAPTER,
        )
    return call


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
