"""Retry policies: resolution from config and the pure delay math.

Contracts callers may rely on:

- ``resolve_retry_policy(config, path)`` validates a camelCase config mapping (as
  written in YAML) and returns a frozen ``NormalRetryPolicy`` or
  ``AlwaysRetryPolicy`` detached from the input; ``None`` gives the normal
  defaults and a policy already resolved is returned as is. Errors are
  ``ValueError`` whose message is the offending key path (``path``,
  ``path.mode``, ``path.backoff.maxDelayMs``...), a space, and what is wrong.
- ``retry_delay_ms`` is pure: randomness is passed in, nothing sleeps.
- Policies are values: adapters return one per route and the runtime captures it
  when the route is registered.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from dsh_llm.errors import ErrorCode
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.transport.watchdog import MAX_TIMEOUT_MS, check_timeout_ms

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "AlwaysRetryPolicy",
    "NormalRetryPolicy",
    "RetryPolicy",
    "resolve_retry_policy",
    "retry_delay_ms",
    "retry_policy_key",
]

MAX_TIMER_DELAY_MS: Final = MAX_TIMEOUT_MS
"""The longest delay a policy may ask for (the largest 32-bit timer, as in TS)."""
DEFAULT_MAX_RETRIES: Final = 5
"""Retries a normal policy allows by default."""
DEFAULT_INITIAL_DELAY_MS: Final = 500
"""First local backoff delay by default."""
DEFAULT_MAX_DELAY_MS: Final = 10_000
"""Largest local delay (and accepted ``Retry-After``) by default."""
DEFAULT_JITTER_RATIO: Final = 0.1
"""Spread around each local delay by default."""
DEFAULT_RETRYABLE_CODES: Final[tuple[str, ...]] = (
    ErrorCode.EMPTY_RESPONSE.value,
    ErrorCode.RATE_LIMIT.value,
    ErrorCode.SERVER.value,
    ErrorCode.TIMEOUT.value,
    ErrorCode.TRANSPORT.value,
)
"""Codes the normal policy retries by default."""

_POLICY_KEYS: Final = frozenset({"mode", "maxRetries", "retryableCodes", "backoff"})
_BACKOFF_KEYS: Final = frozenset({"initialDelayMs", "maxDelayMs", "jitterRatio"})


def _code_tuple(value: Iterable[str]) -> tuple[str, ...]:
    # A policy is a value: a list passed in is copied into a tuple so later
    # changes to it cannot leak in. A lone str would split into letters.
    if isinstance(value, str):
        raise TypeError("retryable_codes must be a sequence of codes, not a str")
    return tuple(value)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_codes(codes: tuple[object, ...] | list[object], name: str) -> None:
    if len(codes) == 0:
        raise ValueError(f"{name} must not be empty")
    if any(not isinstance(code, str) or code == "" for code in codes):
        raise ValueError(f"{name} must contain only non-empty strings")
    if len(set(codes)) != len(codes):
        raise ValueError(f"{name} must not contain duplicates")


Names = tuple[str, str, str]
_FIELD_NAMES: Final[Names] = ("initial_delay_ms", "max_delay_ms", "jitter_ratio")
_CONFIG_NAMES: Final[Names] = ("initialDelayMs", "maxDelayMs", "jitterRatio")


def _check_backoff(
    initial: Any, maximum: Any, jitter: Any, prefix: str, names: Names
) -> None:
    """Raise ``ValueError`` naming ``prefix.<name>`` for a bad backoff value."""
    initial_name, maximum_name, jitter_name = names
    check_timeout_ms(f"{prefix}.{initial_name}", initial)
    check_timeout_ms(f"{prefix}.{maximum_name}", maximum)
    if initial > maximum:
        raise ValueError(
            f"{prefix}.{initial_name} must be less than or equal to {maximum_name}"
        )
    if not _number(jitter) or not math.isfinite(jitter) or not 0 <= jitter <= 1:
        raise ValueError(f"{prefix}.{jitter_name} must be between 0 and 1")


@attrs.frozen(kw_only=True)
class NormalRetryPolicy:
    """Retry only ``retryable_codes``, at most ``max_retries`` times.

    Construction checks every field as ``resolve_retry_policy`` checks a config:
    ``ValueError`` naming the field for a negative or non-int ``max_retries``, an
    empty, repeated or non-string code, a delay that is not a positive finite
    number of at most 2147483647 ms, an initial delay above the maximum, or a
    jitter ratio outside 0..1.
    """

    mode: str = attrs.field(default="normal", init=False)
    """Always ``"normal"``."""
    max_retries: int = DEFAULT_MAX_RETRIES
    """Retries after the first attempt."""
    retryable_codes: tuple[str, ...] = attrs.field(
        default=DEFAULT_RETRYABLE_CODES, converter=_code_tuple
    )
    """Failure codes eligible for a retry."""
    initial_delay_ms: float = DEFAULT_INITIAL_DELAY_MS
    """First local backoff delay."""
    max_delay_ms: float = DEFAULT_MAX_DELAY_MS
    """Largest local delay, and largest provider ``Retry-After`` accepted."""
    jitter_ratio: float = DEFAULT_JITTER_RATIO
    """Symmetric random spread around each local delay (0..1)."""

    def __attrs_post_init__(self) -> None:
        retries = self.max_retries
        if type(retries) is not int or not 0 <= retries <= MAX_SAFE_INTEGER:
            raise ValueError(
                "NormalRetryPolicy.max_retries must be a non-negative safe integer"
            )
        _check_codes(self.retryable_codes, "NormalRetryPolicy.retryable_codes")
        _check_backoff(
            self.initial_delay_ms,
            self.max_delay_ms,
            self.jitter_ratio,
            "NormalRetryPolicy",
            _FIELD_NAMES,
        )


@attrs.frozen(kw_only=True)
class AlwaysRetryPolicy:
    """Retry every failure, without a bound, until success or cancellation.

    Construction checks the delays and the jitter ratio as ``NormalRetryPolicy``
    does (``ValueError`` naming the field).
    """

    mode: str = attrs.field(default="always", init=False)
    """Always ``"always"``."""
    initial_delay_ms: float = DEFAULT_INITIAL_DELAY_MS
    """First local backoff delay."""
    max_delay_ms: float = DEFAULT_MAX_DELAY_MS
    """Largest local delay."""
    jitter_ratio: float = DEFAULT_JITTER_RATIO
    """Symmetric random spread around each local delay (0..1)."""

    def __attrs_post_init__(self) -> None:
        _check_backoff(
            self.initial_delay_ms,
            self.max_delay_ms,
            self.jitter_ratio,
            "AlwaysRetryPolicy",
            _FIELD_NAMES,
        )


RetryPolicy = NormalRetryPolicy | AlwaysRetryPolicy
"""A resolved retry policy."""

DEFAULT_RETRY_POLICY: Final = NormalRetryPolicy()
"""The normal policy with every default."""


def _check_keys(value: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in value:
        if key not in allowed:
            raise ValueError(f'{path} has the unknown key "{key}"')


def _backoff(config: object, path: str) -> tuple[float, float, float]:
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ValueError(f"{path} must be a mapping")
    _check_keys(config, _BACKOFF_KEYS, path)
    initial = config.get("initialDelayMs", DEFAULT_INITIAL_DELAY_MS)
    maximum = config.get("maxDelayMs", DEFAULT_MAX_DELAY_MS)
    jitter = config.get("jitterRatio", DEFAULT_JITTER_RATIO)
    _check_backoff(initial, maximum, jitter, path, _CONFIG_NAMES)
    return initial, maximum, jitter


def resolve_retry_policy(
    config: Mapping[str, Any] | RetryPolicy | None, path: str
) -> RetryPolicy:
    """Validate, default and detach one retry-policy config.

    Args:
        config: ``{"mode": "normal", "maxRetries"?, "retryableCodes"?, "backoff"?:
            {"initialDelayMs"?, "maxDelayMs"?, "jitterRatio"?}}`` or
            ``{"mode": "always", "backoff"?}``; ``None`` selects the defaults
            (normal, 5 retries, EMPTY_RESPONSE/RATE_LIMIT/SERVER/TIMEOUT/TRANSPORT,
            500 ms doubling to 10000 ms, jitter 0.1). Always mode ignores leftover
            ``maxRetries``/``retryableCodes``. A resolved policy (an adapter's
            argument) is returned as is.
        path: Where the config lives, prefixed to every error message.

    Raises:
        ValueError: for an unknown key, a bad value or an unknown mode, and for a
            ``config`` that is neither a mapping nor a resolved policy.
    """
    if config is None:
        return DEFAULT_RETRY_POLICY
    if isinstance(config, NormalRetryPolicy | AlwaysRetryPolicy):
        return config
    if not isinstance(config, Mapping):
        raise ValueError(f"{path} must be a mapping or a resolved retry policy")
    _check_keys(config, _POLICY_KEYS, path)
    mode = config.get("mode")
    if mode == "always":
        initial, maximum, jitter = _backoff(config.get("backoff"), f"{path}.backoff")
        return AlwaysRetryPolicy(
            initial_delay_ms=initial, max_delay_ms=maximum, jitter_ratio=jitter
        )
    if mode != "normal":
        raise ValueError(f'{path}.mode must be "normal" or "always"')
    max_retries = config.get("maxRetries", DEFAULT_MAX_RETRIES)
    if type(max_retries) is not int or not 0 <= max_retries <= MAX_SAFE_INTEGER:
        raise ValueError(f"{path}.maxRetries must be a non-negative safe integer")
    codes = config.get("retryableCodes", DEFAULT_RETRYABLE_CODES)
    if not isinstance(codes, list | tuple):
        raise ValueError(f"{path}.retryableCodes must be a list of codes")
    _check_codes(codes, f"{path}.retryableCodes")
    initial, maximum, jitter = _backoff(config.get("backoff"), f"{path}.backoff")
    return NormalRetryPolicy(
        max_retries=max_retries,
        retryable_codes=tuple(codes),
        initial_delay_ms=initial,
        max_delay_ms=maximum,
        jitter_ratio=jitter,
    )


def retry_delay_ms(
    policy: RetryPolicy,
    retry: int,
    random_value: float,
    provider_retry_after_ms: float | None = None,
) -> float | None:
    """The delay before retry number ``retry`` (1-based), or ``None`` for "do not
    retry because the provider asked for longer than the policy accepts".

    The local delay is ``min(min(initial * 2**(retry-1), max) * (1 - j + 2*j*r),
    max)`` with ``r = random_value`` in [0, 1]. A provider ``Retry-After`` within
    ``max_delay_ms`` is used verbatim; a longer one stops a normal policy and is
    ignored (local delay) by an always policy. Eligibility (codes, budget) is the
    caller's decision.
    """
    if retry < 1:
        raise ValueError("retry must be >= 1")
    if not 0 <= random_value <= 1:
        raise ValueError("random_value must be in [0, 1]")
    if provider_retry_after_ms is not None and provider_retry_after_ms > 0:
        if provider_retry_after_ms <= policy.max_delay_ms:
            return provider_retry_after_ms
        if isinstance(policy, NormalRetryPolicy):
            return None
    # Past 2**64 every delay is capped anyway; stopping there avoids float overflow.
    exponent = retry - 1
    if exponent >= 64:
        base = float(policy.max_delay_ms)
    else:
        base = min(policy.initial_delay_ms * 2**exponent, policy.max_delay_ms)
    jitter = policy.jitter_ratio
    return min(base * (1 - jitter + 2 * jitter * random_value), policy.max_delay_ms)


def retry_policy_key(policy: RetryPolicy) -> str:
    """A stable identity for a policy, so retry counters restart when it changes:
    ``["normal", maxRetries, sorted codes, initial, max, jitter]`` or
    ``["always", initial, max, jitter]`` as compact JSON."""
    if isinstance(policy, NormalRetryPolicy):
        parts: list[Any] = [
            policy.mode,
            policy.max_retries,
            sorted(policy.retryable_codes),
            policy.initial_delay_ms,
            policy.max_delay_ms,
            policy.jitter_ratio,
        ]
    else:
        parts = [
            policy.mode,
            policy.initial_delay_ms,
            policy.max_delay_ms,
            policy.jitter_ratio,
        ]
    return json.dumps(parts, separators=(",", ":"))
