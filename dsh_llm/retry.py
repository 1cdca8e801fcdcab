"""Retry policies: resolution from config and the pure delay math.

Contracts callers may rely on:

- ``resolve_retry_policy(config, path)`` structures a camelCase config mapping (as
  written in YAML) into ``RetryPolicyConfig`` by the one config mechanism
  (``dsh_llm.config``) and returns a frozen ``NormalRetryPolicy`` or
  ``AlwaysRetryPolicy``; ``None`` gives the normal defaults and a policy already
  resolved is returned as is. Errors are ``ConfigError`` values whose ``key`` is
  the offending key path (``path.mode``, ``path.backoff.maxDelayMs``...) and whose
  ``detail`` says what is wrong.
- ``retry_delay_ms`` is pure: randomness is passed in, nothing sleeps.
- Policies are values: adapters return one per route and the runtime captures it
  when the route is registered.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal

import attrs

from dsh_llm.config import ConfigError
from dsh_llm.config import PluginConfigError
from dsh_llm.config import check_timeout
from dsh_llm.config import field_error
from dsh_llm.config import join_key
from dsh_llm.config import structure_config
from dsh_llm.errors import ErrorCode
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.protocol.checks import MAX_TIMEOUT_MS

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "AlwaysRetryPolicy",
    "BackoffConfig",
    "NormalRetryPolicy",
    "RetryPolicy",
    "RetryPolicyConfig",
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


def _code_tuple(value: Iterable[str]) -> tuple[str, ...]:
    # A policy is a value: a list passed in is copied into a tuple so later
    # changes to it cannot leak in. A lone str would split into letters.
    if isinstance(value, str) or not isinstance(value, Iterable):
        return value  # type: ignore[return-value]  # refused by _check_codes
    return tuple(value)


def _check_retries(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
        raise field_error(inst, attribute.name, "must be a non-negative safe integer")


def _check_codes(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, tuple):
        raise field_error(inst, attribute.name, "must be a list of codes")
    if len(value) == 0:
        raise field_error(inst, attribute.name, "must not be empty")
    if any(not isinstance(code, str) or code == "" for code in value):
        raise field_error(inst, attribute.name, "must contain only non-empty strings")
    if len(set(value)) != len(value):
        raise field_error(inst, attribute.name, "must not contain duplicates")


def _check_jitter(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise field_error(inst, attribute.name, "must be between 0 and 1")


def _check_delays(inst: Any) -> None:
    if inst.initial_delay_ms > inst.max_delay_ms:
        raise field_error(
            inst, "initial_delay_ms", "must be less than or equal to maxDelayMs"
        )


def _delay(default: float) -> Any:
    return attrs.field(default=default, validator=check_timeout)


@attrs.frozen(kw_only=True)
class BackoffConfig:
    """The local backoff delays: the ``backoff`` mapping of a retry-policy config
    (camelCase keys), and the base of both resolved policies.

    Construction checks that each delay is a positive finite number of at most
    2147483647 ms, the initial delay is at most the maximum and the jitter ratio
    is within 0..1 (a ``PluginConfigError``, a ``ValueError``, keyed by the
    field's config key).
    """

    initial_delay_ms: float = _delay(DEFAULT_INITIAL_DELAY_MS)
    """First local backoff delay."""
    max_delay_ms: float = _delay(DEFAULT_MAX_DELAY_MS)
    """Largest local delay, and largest provider ``Retry-After`` used as is."""
    jitter_ratio: float = attrs.field(
        default=DEFAULT_JITTER_RATIO, validator=_check_jitter
    )
    """Symmetric random spread around each local delay (0..1)."""

    def __attrs_post_init__(self) -> None:
        _check_delays(self)


@attrs.frozen(kw_only=True)
class NormalRetryPolicy(BackoffConfig):
    """Retry only ``retryable_codes``, at most ``max_retries`` times.

    Construction checks every field as ``BackoffConfig`` does, and a negative or
    non-int ``max_retries`` or an empty, repeated or non-string code.
    """

    mode: str = attrs.field(default="normal", init=False)
    """Always ``"normal"``."""
    max_retries: int = attrs.field(
        default=DEFAULT_MAX_RETRIES, validator=_check_retries
    )
    """Retries after the first attempt."""
    retryable_codes: tuple[str, ...] = attrs.field(
        default=DEFAULT_RETRYABLE_CODES, converter=_code_tuple, validator=_check_codes
    )
    """Failure codes eligible for a retry."""


@attrs.frozen(kw_only=True)
class AlwaysRetryPolicy(BackoffConfig):
    """Retry every failure, without a bound, until success or cancellation.

    Construction checks the delays and the jitter ratio as ``BackoffConfig`` does.
    """

    mode: str = attrs.field(default="always", init=False)
    """Always ``"always"``."""


RetryPolicy = NormalRetryPolicy | AlwaysRetryPolicy
"""A resolved retry policy."""

DEFAULT_RETRY_POLICY: Final = NormalRetryPolicy()
"""The normal policy with every default."""


@attrs.frozen(kw_only=True)
class RetryPolicyConfig:
    """A retry policy as a composition writes it: ``{mode, maxRetries?,
    retryableCodes?, backoff?: {initialDelayMs?, maxDelayMs?, jitterRatio?}}``.
    An ``always`` policy ignores ``maxRetries`` and ``retryableCodes``."""

    mode: Literal["normal", "always"]
    """``normal`` (bounded, listed codes) or ``always``."""
    max_retries: int = attrs.field(
        default=DEFAULT_MAX_RETRIES, validator=_check_retries
    )
    """Retries after the first attempt (normal only)."""
    retryable_codes: tuple[str, ...] = attrs.field(
        default=DEFAULT_RETRYABLE_CODES, converter=_code_tuple, validator=_check_codes
    )
    """Failure codes eligible for a retry (normal only)."""
    backoff: BackoffConfig = attrs.field(factory=BackoffConfig)
    """The delays."""

    def policy(self) -> RetryPolicy:
        """The resolved policy this config describes."""
        delays = {
            field.name: getattr(self.backoff, field.name)
            for field in attrs.fields(BackoffConfig)
        }
        if self.mode == "always":
            return AlwaysRetryPolicy(**delays)
        return NormalRetryPolicy(
            max_retries=self.max_retries,
            retryable_codes=self.retryable_codes,
            **delays,
        )


def resolve_retry_policy(
    config: Mapping[str, Any] | RetryPolicy | None, path: str = "retryPolicy"
) -> RetryPolicy:
    """Validate, default and detach one retry-policy config.

    Args:
        config: A ``RetryPolicyConfig`` mapping (camelCase keys, as in YAML);
            ``None`` selects the defaults (normal, 5 retries,
            EMPTY_RESPONSE/RATE_LIMIT/SERVER/TIMEOUT/TRANSPORT, 500 ms doubling to
            10000 ms, jitter 0.1). A resolved policy is returned as is.
        path: The config key the policy lives under, in front of every key path.

    Raises:
        ConfigError: naming each offending key path (``retryPolicy.mode``,
            ``retryPolicy.backoff.maxDelayMs``...) and what is wrong, as data.
    """
    if config is None:
        return DEFAULT_RETRY_POLICY
    if isinstance(config, NormalRetryPolicy | AlwaysRetryPolicy):
        return config
    if not isinstance(config, Mapping):
        raise PluginConfigError(path, "must be a mapping or a resolved retry policy")
    try:
        parsed: RetryPolicyConfig = structure_config(RetryPolicyConfig, config)
    except ConfigError as exc:
        problems = [(join_key(path, key), detail) for key, detail in exc.problems]
        if len(problems) == 1:
            raise PluginConfigError(*problems[0]) from None
        raise ConfigError(problems) from None
    return parsed.policy()


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
