"""``call_with_retry``: one whole model call, retried at attempt boundaries.

The runtime's ``stream()`` is single-attempt by design; this is the retry loop
above it, for batch jobs and scripts that want a finished message. Contracts:

- Each attempt prepares the call (``runtime.prepare_call``; what that raises
  propagates, nothing is retried), builds the request from the prepared config
  and consumes the stream with a fresh ``BlockAssembler``. Output of a failed
  attempt is discarded; a retry sends the identical request again.
- A successful, ``aborted`` or otherwise non-``error`` finish is returned at once.
  An ``error`` finish is retried by the policy captured with the registration
  that served the attempt (``prepared.retry_policy``): a normal policy retries
  its ``retryable_codes`` up to ``max_retries`` times per provider and policy
  (a changed policy restarts the count); an always policy retries every
  failure. ``NO_ADAPTER`` and the failures of call preparation are never
  retried.
- Delays come from ``dsh_llm.retry.retry_delay_ms`` with the injected
  ``random``; a provider ``Retry-After`` longer than a normal policy accepts ends
  the retries. ``on_retry`` is told before each wait; the wait is cancelled by
  ``signal``, which then ends the call with an ``aborted`` result without a new
  attempt.
- An attempt that failed after content reached the consumer (a block started)
  with ``TRANSPORT``, ``TIMEOUT`` or ``STREAM_CLOSED`` (the provider dropped
  mid-generation) is not re-run by a normal policy, whatever its
  ``retryable_codes``: the work may have been billed and the consumer may have
  shown it. An always policy re-runs it.
- The result reports the last attempt's usage (``usage``), each attempt's
  (``attempt_usages``) and their total (``total_usage``; a count unknown in any
  attempt is unknown in the total, ``dsh_llm.assembler.total_usage``).
"""

from __future__ import annotations

import random as _random
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Final

import attrs

from dsh_llm.assembler import AssembledResponse
from dsh_llm.assembler import assemble_stream
from dsh_llm.errors import ErrorCode
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import create_assistant_message
from dsh_llm.retry import NormalRetryPolicy
from dsh_llm.retry import retry_delay_ms
from dsh_llm.retry import retry_policy_key
from dsh_llm.runtime import LlmRuntime
from dsh_llm.runtime.prepare import sends_config
from dsh_llm.signal import AbortSignal
from dsh_llm.sources import close_source

__all__ = ["RetryEvent", "call_with_retry"]

NEVER_RETRIED: Final = frozenset(
    {
        ErrorCode.NO_ADAPTER.value,
        ErrorCode.INVALID_ADAPTER.value,
        ErrorCode.INVALID_PREPARED_CALL.value,
        ErrorCode.INVALID_MODEL_INFO.value,
        ErrorCode.INVALID_MODEL_CONTEXT.value,
        ErrorCode.INVALID_MODEL_MAX_TOKENS.value,
        ErrorCode.INVALID_MODEL_REASONING.value,
        ErrorCode.ABORTED.value,
    }
)
"""Codes no policy retries: the call was never served, or it was cancelled."""

CUT_CODES: Final = frozenset(
    {
        ErrorCode.TRANSPORT.value,
        ErrorCode.TIMEOUT.value,
        ErrorCode.STREAM_CLOSED.value,
    }
)
"""Codes a normal policy does not retry once content reached the consumer: the
provider dropped mid-generation."""


@attrs.frozen(kw_only=True)
class RetryEvent:
    """What ``on_retry`` is told before each wait."""

    retry: int
    """This retry's number for the provider and policy (1-based)."""
    max_retries: int | None
    """The normal policy's budget; ``None`` for an always policy."""
    provider: str
    """The route whose call failed."""
    mode: str
    """``"normal"`` or ``"always"``."""
    delay_ms: float
    """How long the helper waits before the next attempt."""
    failure: LlmFailure
    """The failure being retried."""


def call_with_retry(
    runtime: LlmRuntime,
    request: LlmCallConfig | GenerateOptions,
    build_options: Callable[[LlmCallConfig], GenerateOptions] | None = None,
    *,
    signal: AbortSignal | None = None,
    on_retry: Callable[[RetryEvent], object] | None = None,
    random: Callable[[], float] = _random.random,
) -> AssembledResponse:
    """Run one model call to completion, retrying failed attempts by policy.

    Args:
        runtime: The runtime to call through (middleware included).
        request: Either the whole request (``GenerateOptions``: each attempt
            sends it with the prepared config's fields, which have the
            adapter's defaults filled in), or only the call's ``LlmCallConfig``
            together with ``build_options``.
        build_options: With an ``LlmCallConfig``: builds the request from the
            prepared config; called once per attempt, it must keep the config's
            fields. ``signal`` is added to the signal it sets, if any. Not
            allowed with ``GenerateOptions``.
        signal: Cancels the call, including a wait between attempts. A signal
            the request sets itself cancels the call too: either one aborting
            is enough.
        on_retry: Called with a ``RetryEvent`` before each wait.
        random: Source of ``[0, 1]`` values for the backoff jitter.

    Returns:
        The last attempt's message, usage and finish, and the attempt count.

    Raises:
        LlmError: what ``runtime.prepare_call`` raises (``NO_ADAPTER``,
            ``UNSUPPORTED_REASONING_EFFORT``...), and ``INVALID_PREPARED_CALL``
            when ``build_options`` changes the call config.
        TypeError: for a ``request`` of another type, an ``LlmCallConfig``
            without ``build_options``, or ``GenerateOptions`` with one.
    """
    config, build_options, signal = _call_parts(request, build_options, signal)
    retries: dict[tuple[str, str], int] = {}
    attempts = 0
    usages: list[TokenUsage | None] = []
    while True:
        prepared = runtime.prepare_call(config, signal)
        options = build_options(prepared.config)
        if signal is not None and options.signal is not signal:
            # The request's own signal keeps working; the call's one is added.
            options = options.evolve(signal=_either(options.signal, signal))
        attempts += 1
        result, started = _attempt(
            prepared.stream(options), prepared.config, attempts, usages
        )
        failure = result.finish.failure
        if result.finish.kind != "error" or failure is None:
            return result
        if failure.code in NEVER_RETRIED:
            return result
        policy = prepared.retry_policy
        if isinstance(policy, NormalRetryPolicy) and (
            failure.code not in policy.retryable_codes
            or (started and failure.code in CUT_CODES)
        ):
            return result
        key = (prepared.config.provider, retry_policy_key(policy))
        done = retries.get(key, 0)
        if isinstance(policy, NormalRetryPolicy) and done >= policy.max_retries:
            return result
        retry = done + 1
        delay = retry_delay_ms(policy, retry, random(), failure.provider_retry_after_ms)
        if delay is None:
            return result
        retries[key] = retry
        if on_retry is not None:
            on_retry(
                RetryEvent(
                    retry=retry,
                    max_retries=policy.max_retries
                    if isinstance(policy, NormalRetryPolicy)
                    else None,
                    provider=prepared.config.provider,
                    mode=policy.mode,
                    delay_ms=delay,
                    failure=failure,
                )
            )
        if _wait(delay, signal):
            return _aborted_while_waiting(result, failure)


def _call_parts(
    request: LlmCallConfig | GenerateOptions,
    build_options: Callable[[LlmCallConfig], GenerateOptions] | None,
    signal: AbortSignal | None,
) -> tuple[
    LlmCallConfig, Callable[[LlmCallConfig], GenerateOptions], AbortSignal | None
]:
    if isinstance(request, GenerateOptions):
        if build_options is not None:
            raise TypeError(
                "call_with_retry takes build_options only with an LlmCallConfig, "
                "not with GenerateOptions"
            )
        options = request
        combined = _either(request.signal, signal)

        def with_config(config: LlmCallConfig) -> GenerateOptions:
            if combined is options.signal and sends_config(options, config):
                return options  # the usual case: nothing to fill in, no copy
            return options.evolve(
                **attrs.asdict(config, recurse=False), signal=combined
            )

        return request.call_config(), with_config, combined
    if isinstance(request, LlmCallConfig):
        if build_options is None:
            raise TypeError(
                "call_with_retry needs build_options with an LlmCallConfig "
                "(or pass the whole GenerateOptions)"
            )
        return request, build_options, signal
    raise TypeError(
        "call_with_retry request must be GenerateOptions or LlmCallConfig, "
        f"got {type(request).__name__}"
    )


def _either(
    first: AbortSignal | None, second: AbortSignal | None
) -> AbortSignal | None:
    """The signal that aborts when either does (one of them when the other is None)."""
    if first is None or second is None or first is second:
        return first or second
    return AbortSignal.any(first, second)


def _attempt(
    stream: Iterable[StreamChunk],
    config: LlmCallConfig,
    attempts: int,
    usages: list[TokenUsage | None],
) -> tuple[AssembledResponse, bool]:
    """The attempt's result (its usage added to ``usages``, the earlier
    attempts'), and whether content reached the consumer."""
    started: list[bool] = []

    def watched() -> Iterator[StreamChunk]:
        iterator = iter(stream)
        try:
            for chunk in iterator:
                if not started and type(chunk) is BlockStart:
                    started.append(True)
                yield chunk
        finally:
            close_source(iterator)

    assembler, reason = assemble_stream(watched())
    blocks = () if reason.is_failure else assembler.blocks()
    message = create_assistant_message(
        blocks,
        provider=config.provider,
        model=config.model,
        replay_state=None if reason.is_failure else assembler.replay_state,
    )
    usages.append(assembler.usage)
    result = AssembledResponse(
        message=message,
        usage=assembler.usage,
        finish=reason,
        attempts=attempts,
        attempt_usages=tuple(usages),
    )
    return result, bool(started)


def _wait(delay_ms: float, signal: AbortSignal | None) -> bool:
    """Wait ``delay_ms``; ``True`` when ``signal`` aborted first."""
    seconds = delay_ms / 1000
    if signal is not None:
        return signal.wait(seconds)
    time.sleep(seconds)
    return False


def _aborted_while_waiting(
    result: AssembledResponse, failure: LlmFailure
) -> AssembledResponse:
    return attrs.evolve(
        result,
        finish=FinishReason.aborted(
            LlmFailure(
                message=f"aborted while waiting to retry after: {failure.message}",
                code=ErrorCode.ABORTED.value,
            )
        ),
    )
