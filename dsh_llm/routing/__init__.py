"""Stream middleware that fails over across routes and retries a route.

Both are plain ``StreamMiddleware`` for ``LlmRuntime.use``; no adapter changes.
Contracts callers may rely on:

- A stream is retried or failed over only while nothing has reached the
  consumer: a leading ``UsageChunk`` is held back until the next chunk shows
  whether the attempt failed. The first content chunk (a block start, a delta)
  or a finish that is not ``error`` commits the attempt; from then on its
  chunks pass through unchanged and a later failure ends the stream as the
  error finish it is, never papered over with a second answer.
- A failure is an ``error`` finish (what the runtime's adapter stage yields) or
  an ``LlmError`` raised by a middleware further down; both are handled. An
  ``aborted`` finish, an ``ABORTED`` code or an aborted ``options.signal`` is
  never retried. The last failure is passed on as it came (raised, or the held
  usage then the finish).
- The usage a failed, abandoned attempt reported is never lost: it is not put
  into the stream (which carries exactly one usage, the answer's) but handed to
  ``on_retry`` / ``on_failover`` in the event (``usage``). Observability
  middleware added after these (inner) sees every attempt's own usage.
- Back-off waits use ``options.signal`` and end at once when it aborts; the
  stream then ends with the held usage and an ``aborted`` finish, code
  ``ABORTED``, without a new attempt.
- ``current_attempt()`` tells middleware further down which downstream call of
  the innermost ``retrying``/``failover`` it is serving (1-based).
- Prepared calls (``PreparedLlmCall``) are pinned to their route: failing them
  over changes their config and ends in ``INVALID_PREPARED_CALL``.
"""

from __future__ import annotations

import contextvars
import logging
import random as _random
import time
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Generator
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final

import attrs

from dsh_llm.call import NEVER_RETRIED
from dsh_llm.errors import ERROR_CODES
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.retry import NormalRetryPolicy
from dsh_llm.retry import RetryPolicy
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.retry import retry_delay_ms
from dsh_llm.runtime import StreamNext
from dsh_llm.signal import AbortSignal

__all__ = [
    "Failover",
    "FailoverEvent",
    "Retrying",
    "StreamRetryEvent",
    "current_attempt",
    "failover",
    "failover_eligible",
    "retrying",
    "wait_or_abort",
]

_log = logging.getLogger("dsh_llm.routing")

_ATTEMPT: Final[contextvars.ContextVar[int]] = contextvars.ContextVar(
    "dsh_llm_routing_attempt", default=1
)

Sleep = Callable[[float, AbortSignal | None], bool]
"""``sleep(delay_ms, signal)``: wait, returning ``True`` when ``signal`` aborted."""


def current_attempt() -> int:
    """The number (1-based) of the downstream call being made by the innermost
    ``retrying`` or ``failover`` middleware; 1 outside them.

    Read it when the middleware is called (``mw(options, next)``), not later
    from inside a generator: the value is set only while ``next()`` runs.
    """
    return _ATTEMPT.get()


def wait_or_abort(delay_ms: float, signal: AbortSignal | None) -> bool:
    """Wait ``delay_ms``; return ``True`` as soon as ``signal`` aborts (at once
    when it already has), ``False`` when the time passed."""
    seconds = max(delay_ms, 0) / 1000
    if signal is not None:
        return signal.wait(seconds)
    time.sleep(seconds)
    return False


def failover_eligible(failure: LlmFailure, extra_codes: Collection[str] = ()) -> bool:
    """Whether another route may help: the code is one ``dsh_llm.errors.ERROR_CODES``
    marks ``retry_may_help`` or one of ``extra_codes``; never ``ABORTED``."""
    code = failure.code
    if code == ErrorCode.ABORTED:
        return False
    if code in extra_codes:
        return True
    try:
        known = ErrorCode(code)
    except ValueError:
        return False
    return ERROR_CODES[known].retry_may_help


# --- events -----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class StreamRetryEvent:
    """What ``retrying``'s ``on_retry`` is told before each back-off wait."""

    attempt: int
    """The number of the attempt that failed (1-based); the next is ``attempt + 1``."""
    failure: LlmFailure
    """Why it failed."""
    delay_ms: float
    """How long the middleware waits before the next attempt."""
    provider: str
    """The route of the failed attempt."""
    model: str
    """The model of the failed attempt."""
    usage: TokenUsage | None
    """The usage the failed attempt reported (not put into the stream), or
    ``None`` when it reported none."""


@attrs.frozen(kw_only=True)
class FailoverEvent:
    """What ``failover``'s ``on_failover`` is told before the next route is tried."""

    alias: str
    """The route the consumer asked for."""
    failed_provider: str
    """The route that failed."""
    failed_model: str
    """Its model."""
    next_provider: str
    """The route tried next."""
    next_model: str
    """Its model."""
    failure: LlmFailure
    """Why the route failed."""
    usage: TokenUsage | None
    """The usage the failed route reported (not put into the stream), or ``None``."""
    after_content: bool
    """``True`` when content of the failed route already reached the consumer
    (only with ``restart_after_content=True``): what the consumer holds must be
    discarded, and the next chunks are a new stream whose block indexes start
    at 0 again."""


# --- one attempt ------------------------------------------------------------------


@attrs.define
class _Opening:
    """How an attempt began: ``held`` chunks read so far, in order, and the
    failure when it ended before any content (``held`` then holds its usage and
    its finish, when it yielded them)."""

    held: list[StreamChunk]
    failure: LlmFailure | None = None
    raised: LlmError | None = None
    usage: TokenUsage | None = None


def _error_of(chunk: StreamChunk) -> LlmFailure | None:
    """The failure of an ``error`` finish, else ``None``."""
    if isinstance(chunk, Finish) and chunk.reason.kind == "error":
        return chunk.reason.failure
    return None


def _open(iterator: Iterator[StreamChunk]) -> _Opening:
    """Read ``iterator`` up to its first content chunk or its finish."""
    held: list[StreamChunk] = []
    usage: TokenUsage | None = None
    try:
        for chunk in iterator:
            held.append(chunk)
            if isinstance(chunk, UsageChunk):
                usage = chunk.usage
                continue
            failure = _error_of(chunk)
            return (
                _Opening(held)
                if failure is None
                else _Opening(held, failure, usage=usage)
            )
    except LlmError as exc:
        return _Opening(held, exc.failure, raised=exc, usage=usage)
    return _Opening(held)


def _close(iterator: Iterator[StreamChunk]) -> None:
    close = getattr(iterator, "close", None)
    if callable(close):
        close()


def _begin(
    next_: StreamNext, options: GenerateOptions, attempt: int
) -> tuple[Iterator[StreamChunk], _Opening]:
    """Start downstream call number ``attempt`` and read how it opens. An
    ``LlmError`` raised when calling ``next`` is a failure like any other."""
    token = _ATTEMPT.set(attempt)
    try:
        iterator = iter(next_(options))
    except LlmError as exc:
        return iter(()), _Opening([], exc.failure, raised=exc)
    finally:
        _ATTEMPT.reset(token)
    try:
        return iterator, _open(iterator)
    except BaseException:
        _close(iterator)
        raise


def _give_up(opening: _Opening) -> Iterator[StreamChunk]:
    """Pass a failure on as it came: the held chunks, or the raised error."""
    if opening.raised is not None:
        yield from opening.held
        raise opening.raised
    yield from opening.held


def _aborted_while_waiting(
    opening: _Opening, failure: LlmFailure
) -> Iterator[StreamChunk]:
    if opening.usage is not None:
        yield UsageChunk(usage=opening.usage)
    yield Finish(
        reason=FinishReason.aborted(
            LlmFailure(
                message=f"aborted while waiting to retry after: {failure.message}",
                code=ErrorCode.ABORTED.value,
            )
        )
    )


def _aborted(options: GenerateOptions) -> bool:
    return options.signal is not None and options.signal.aborted


# --- retrying ---------------------------------------------------------------------


def _resolved_policy(policy: RetryPolicy | Mapping[str, Any] | None) -> RetryPolicy:
    return resolve_retry_policy(policy, "policy")


def _route_set(providers: Collection[str] | None) -> frozenset[str] | None:
    return None if providers is None else frozenset(providers)


@attrs.frozen(eq=False)
class Retrying:
    """The ``retrying`` middleware (see ``retrying``)."""

    policy: RetryPolicy = attrs.field(converter=_resolved_policy)
    """The resolved policy."""
    _providers: frozenset[str] | None = attrs.field(
        kw_only=True, default=None, converter=_route_set
    )
    _on_retry: Callable[[StreamRetryEvent], object] | None = attrs.field(
        kw_only=True, default=None
    )
    _sleep: Sleep = attrs.field(kw_only=True, default=wait_or_abort, repr=False)
    _random: Callable[[], float] = attrs.field(
        kw_only=True, default=_random.random, repr=False
    )

    def __call__(
        self, options: GenerateOptions, next_: StreamNext
    ) -> Iterable[StreamChunk]:
        if self._providers is not None and options.provider not in self._providers:
            return next_()
        return self._run(options, next_)

    def _delay(self, failure: LlmFailure, retry: int) -> float | None:
        policy = self.policy
        if failure.code in NEVER_RETRIED:
            return None
        if isinstance(policy, NormalRetryPolicy) and (
            failure.code not in policy.retryable_codes or retry > policy.max_retries
        ):
            return None
        return retry_delay_ms(
            policy, retry, self._random(), failure.provider_retry_after_ms
        )

    def _run(
        self, options: GenerateOptions, next_: StreamNext
    ) -> Iterator[StreamChunk]:
        attempt = 1
        while True:
            iterator, opening = _begin(next_, options, attempt)
            try:
                failure = opening.failure
                if failure is None:
                    yield from opening.held
                    yield from iterator
                    return
            finally:
                _close(iterator)
            delay = None if _aborted(options) else self._delay(failure, attempt)
            if delay is None:
                yield from _give_up(opening)
                return
            if self._on_retry is not None:
                self._on_retry(
                    StreamRetryEvent(
                        attempt=attempt,
                        failure=failure,
                        delay_ms=delay,
                        provider=options.provider,
                        model=options.model,
                        usage=opening.usage,
                    )
                )
            if self._sleep(delay, options.signal):
                yield from _aborted_while_waiting(opening, failure)
                return
            attempt += 1


def retrying(
    policy: RetryPolicy | Mapping[str, Any] | None = None,
    *,
    providers: Collection[str] | None = None,
    on_retry: Callable[[StreamRetryEvent], object] | None = None,
    sleep: Sleep = wait_or_abort,
    random: Callable[[], float] = _random.random,
) -> Retrying:
    """Middleware retrying a stream by ``policy`` before anything reached the consumer.

    Args:
        policy: A resolved policy, a camelCase retry-policy mapping (as in
            ``dsh_llm.retry.resolve_retry_policy``; errors name ``policy.<key>``)
            or ``None`` for the normal defaults. A normal policy retries its
            ``retryable_codes`` up to ``max_retries`` times per stream; an
            always policy retries every failure. ``dsh_llm.call.NEVER_RETRIED``
            codes never are.
        providers: The routes it applies to (default: every route); other
            streams pass through untouched.
        on_retry: Called with a ``StreamRetryEvent`` before each wait.
        sleep: ``sleep(delay_ms, signal) -> aborted``; the default waits on the
            signal, so an abort ends the wait at once.
        random: Source of ``[0, 1]`` values for the back-off jitter.

    Delays are ``dsh_llm.retry.retry_delay_ms``'s: a provider ``Retry-After``
    within ``max_delay_ms`` is waited verbatim; a longer one ends a normal
    policy's retries. Do not combine with ``call_with_retry`` unless retries
    are meant to multiply.

    Raises:
        ValueError: for an invalid ``policy`` (naming ``policy.<key>``).
    """
    return Retrying(
        policy, providers=providers, on_retry=on_retry, sleep=sleep, random=random
    )


# --- failover ---------------------------------------------------------------------

RouteSpec = tuple[str, str | None]
"""A route to try: ``(provider, model)``; ``None`` keeps the caller's model."""


def _check_routes(routes: Sequence[RouteSpec]) -> tuple[RouteSpec, ...]:
    checked: list[RouteSpec] = []
    for entry in routes:
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise ValueError("routes must hold (provider, model) pairs")
        provider, model = entry
        if not isinstance(provider, str) or provider == "":
            raise ValueError("routes must name non-empty providers")
        if model is not None and (not isinstance(model, str) or model == ""):
            raise ValueError("routes must give a non-empty model or None")
        checked.append((provider, model))
    if not checked:
        raise ValueError("routes must list at least one route")
    if len({provider for provider, _ in checked}) != len(checked):
        raise ValueError("routes must not list a provider twice")
    return tuple(checked)


def _route_alias(alias: str) -> str:
    if not isinstance(alias, str) or alias == "":
        raise ValueError("alias must be a non-empty route name")
    return alias


def _failover_codes(on_codes: Collection[str] | None) -> frozenset[str]:
    if isinstance(on_codes, str):
        raise ValueError("on_codes must be a collection of codes, not a str")
    codes = frozenset(on_codes or ())
    if ErrorCode.ABORTED.value in codes:
        raise ValueError("on_codes must not contain ABORTED")
    return codes


@attrs.frozen(eq=False)
class Failover:
    """The ``failover`` middleware (see ``failover``)."""

    alias: str = attrs.field(converter=_route_alias)
    """The route this middleware serves."""
    routes: tuple[RouteSpec, ...] = attrs.field(converter=_check_routes)
    """The routes tried, in order."""
    _on_codes: frozenset[str] = attrs.field(
        kw_only=True, default=None, converter=_failover_codes
    )
    _restart_after_content: bool = attrs.field(
        kw_only=True, default=False, converter=bool
    )
    _on_failover: Callable[[FailoverEvent], object] | None = attrs.field(
        kw_only=True, default=None
    )

    def __attrs_post_init__(self) -> None:
        if self._restart_after_content and self._on_failover is None:
            raise ValueError(
                "restart_after_content needs on_failover: a restart is never silent"
            )

    def __call__(
        self, options: GenerateOptions, next_: StreamNext
    ) -> Iterable[StreamChunk]:
        if options.provider != self.alias:
            return next_()
        return self._run(options, next_)

    def _eligible(self, options: GenerateOptions, failure: LlmFailure) -> bool:
        return not _aborted(options) and failover_eligible(failure, self._on_codes)

    def _notify(
        self,
        attempt: GenerateOptions,
        following: GenerateOptions,
        failure: LlmFailure,
        usage: TokenUsage | None,
        after_content: bool,
    ) -> None:
        if self._on_failover is None:
            return
        self._on_failover(
            FailoverEvent(
                alias=self.alias,
                failed_provider=attempt.provider,
                failed_model=attempt.model,
                next_provider=following.provider,
                next_model=following.model,
                failure=failure,
                usage=usage,
                after_content=after_content,
            )
        )

    def _run(
        self, options: GenerateOptions, next_: StreamNext
    ) -> Iterator[StreamChunk]:
        attempts = [
            options.evolve(provider=provider, model=model or options.model)
            for provider, model in self.routes
        ]
        for number, attempt in enumerate(attempts, start=1):
            last = number == len(attempts)
            iterator, opening = _begin(next_, attempt, number)
            try:
                failure = opening.failure
                if failure is None:
                    yield from opening.held
                    if not self._restart_after_content or last:
                        yield from iterator
                        return
                    late = yield from _pass_until_failure(
                        iterator, lambda f: self._eligible(options, f)
                    )
                    if late is None:
                        return
                    failure, usage = late
                    self._notify(attempt, attempts[number], failure, usage, True)
                    continue
            finally:
                _close(iterator)
            if last or not self._eligible(options, failure):
                yield from _give_up(opening)
                return
            self._notify(attempt, attempts[number], failure, opening.usage, False)


_Late = tuple[LlmFailure, TokenUsage | None]


def _pass_until_failure(
    iterator: Iterator[StreamChunk], eligible: Callable[[LlmFailure], bool]
) -> Generator[StreamChunk, None, _Late | None]:
    """Pass chunks on; stop at an eligible failure and return it with the usage
    held back right before it, or ``None`` when the stream ended otherwise."""
    pending: UsageChunk | None = None
    try:
        for chunk in iterator:
            failure = _error_of(chunk)
            if failure is not None and eligible(failure):
                return failure, None if pending is None else pending.usage
            if pending is not None:
                yield pending
                pending = None
            if isinstance(chunk, UsageChunk):
                pending = chunk
            else:
                yield chunk
    except LlmError as exc:
        if eligible(exc.failure):
            return exc.failure, None if pending is None else pending.usage
        if pending is not None:
            yield pending
        raise
    if pending is not None:
        yield pending
    return None


def failover(
    alias: str,
    routes: Sequence[RouteSpec],
    *,
    on_codes: Collection[str] | None = None,
    restart_after_content: bool = False,
    on_failover: Callable[[FailoverEvent], object] | None = None,
) -> Failover:
    """Middleware serving the route ``alias`` by trying ``routes`` in order.

    ``runtime.use(failover("chat", [("primary", "model-a"), ("backup",
    "model-b")]))`` applies to streams whose ``options.provider`` is
    ``"chat"`` (others pass through untouched): each route is called with
    ``options.evolve(provider=..., model=...)`` until one commits (its first
    content chunk, or a non-error finish). ``alias`` may itself be a
    registered route and listed first.

    Args:
        alias: The route name the consumer asks for.
        routes: ``(provider, model)`` pairs, tried in order; ``None`` as the
            model keeps the caller's.
        on_codes: Further failure codes that move on (``QUOTA``, ``AUTH``...),
            besides those ``ERROR_CODES`` marks ``retry_may_help`` (``RATE_LIMIT``,
            ``SERVER``, ``TIMEOUT``, ``TRANSPORT``, ``EMPTY_RESPONSE``).
        restart_after_content: Opt-in: a route that fails with an eligible code
            after its content reached the consumer is followed by the next
            route's whole stream (its indexes restart at 0); ``on_failover`` is
            then told with ``after_content=True`` before the first chunk of the
            new stream, and must discard what it holds. The protocol has no
            in-stream marker for this, so ``on_failover`` is required.
        on_failover: Called with a ``FailoverEvent`` before each next route.

    The last route's failure is passed on as it came.

    Raises:
        ValueError: for an empty alias, no route, a route listed twice, a bad
            pair, ``ABORTED`` in ``on_codes``, or ``restart_after_content``
            without ``on_failover``.
    """
    return Failover(
        alias,
        routes,
        on_codes=on_codes,
        restart_after_content=restart_after_content,
        on_failover=on_failover,
    )
