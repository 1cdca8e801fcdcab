"""dsh_llm.retry: policy resolution and the pure delay math (SPEC 9.1-9.2)."""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.config import ConfigError
from dsh_llm.config import PluginConfigError
from dsh_llm.retry import DEFAULT_RETRY_POLICY
from dsh_llm.retry import AlwaysRetryPolicy
from dsh_llm.retry import BackoffConfig
from dsh_llm.retry import NormalRetryPolicy
from dsh_llm.retry import RetryPolicy
from dsh_llm.retry import RetryPolicyConfig
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.retry import retry_delay_ms
from dsh_llm.retry import retry_policy_key

PATH = "provider.retryPolicy"
MAX_TIMER_DELAY_MS = 2_147_483_647

# --- resolution (SPEC 11 items 23-24) -----------------------------------------------


def test_none_resolves_to_the_normal_defaults() -> None:
    policy = resolve_retry_policy(None, PATH)

    assert policy == NormalRetryPolicy(
        max_retries=5,
        retryable_codes=(
            "EMPTY_RESPONSE",
            "RATE_LIMIT",
            "SERVER",
            "TIMEOUT",
            "TRANSPORT",
        ),
        initial_delay_ms=500,
        max_delay_ms=10_000,
        jitter_ratio=0.1,
    )
    assert policy is DEFAULT_RETRY_POLICY
    assert policy.mode == "normal"
    assert isinstance(policy.retryable_codes, tuple)


def test_policies_are_immutable() -> None:
    policy = resolve_retry_policy(None, PATH)
    assert isinstance(policy, NormalRetryPolicy)

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        policy.max_retries = 9  # type: ignore[misc]


def test_configured_normal_policy_is_resolved_and_detached() -> None:
    codes = ["BUSY"]
    config: dict[str, Any] = {
        "mode": "normal",
        "maxRetries": 4,
        "retryableCodes": codes,
        "backoff": {"initialDelayMs": 25, "maxDelayMs": 100, "jitterRatio": 0},
    }

    policy = resolve_retry_policy(config, PATH)
    codes.append("LATE")
    config["backoff"]["maxDelayMs"] = 5

    assert policy == NormalRetryPolicy(
        max_retries=4,
        retryable_codes=("BUSY",),
        initial_delay_ms=25,
        max_delay_ms=100,
        jitter_ratio=0,
    )


def test_directly_built_policy_copies_its_codes_into_a_tuple() -> None:
    codes = ["A"]
    policy = NormalRetryPolicy(retryable_codes=codes)
    codes.append("B")

    assert policy.retryable_codes == ("A",)
    assert isinstance(hash(policy), int)
    # A lone str would split into letters: it is refused, keyed like the config.
    with pytest.raises(PluginConfigError) as caught:
        NormalRetryPolicy(retryable_codes="SERVER")
    assert (caught.value.key, caught.value.detail) == (
        "retryableCodes",
        "must be a list of codes",
    )


DELAY = "must be a positive finite number no greater than 2147483647"


@pytest.mark.parametrize(
    ("fields", "key", "detail"),
    [
        ({"max_retries": -1}, "maxRetries", "must be a non-negative safe integer"),
        ({"max_retries": 2.0}, "maxRetries", "must be a non-negative safe integer"),
        ({"max_retries": True}, "maxRetries", "must be a non-negative safe integer"),
        ({"max_retries": 2**53}, "maxRetries", "must be a non-negative safe integer"),
        ({"retryable_codes": ()}, "retryableCodes", "must not be empty"),
        (
            {"retryable_codes": ("SERVER", "")},
            "retryableCodes",
            "must contain only non-empty strings",
        ),
        (
            {"retryable_codes": ("SERVER", "SERVER")},
            "retryableCodes",
            "must not contain duplicates",
        ),
        ({"initial_delay_ms": -100}, "initialDelayMs", DELAY),
        ({"initial_delay_ms": math.nan}, "initialDelayMs", DELAY),
        ({"initial_delay_ms": True}, "initialDelayMs", DELAY),
        ({"max_delay_ms": math.inf}, "maxDelayMs", DELAY),
        ({"max_delay_ms": MAX_TIMER_DELAY_MS + 1}, "maxDelayMs", DELAY),
        (
            {"initial_delay_ms": 20, "max_delay_ms": 10},
            "initialDelayMs",
            "must be less than or equal to maxDelayMs",
        ),
        ({"jitter_ratio": 5}, "jitterRatio", "must be between 0 and 1"),
        ({"jitter_ratio": math.nan}, "jitterRatio", "must be between 0 and 1"),
        ({"jitter_ratio": False}, "jitterRatio", "must be between 0 and 1"),
    ],
)
def test_a_directly_built_normal_policy_is_checked(
    fields: dict[str, Any], key: str, detail: str
) -> None:
    with pytest.raises(PluginConfigError) as caught:
        NormalRetryPolicy(**fields)

    assert isinstance(caught.value, ValueError)
    assert (caught.value.key, caught.value.detail) == (key, detail)


@pytest.mark.parametrize(
    ("fields", "key", "detail"),
    [
        ({"initial_delay_ms": 0}, "initialDelayMs", DELAY),
        ({"max_delay_ms": -1}, "maxDelayMs", DELAY),
        (
            {"initial_delay_ms": 11_000},
            "initialDelayMs",
            "must be less than or equal to maxDelayMs",
        ),
        ({"jitter_ratio": -0.5}, "jitterRatio", "must be between 0 and 1"),
    ],
)
def test_a_directly_built_always_policy_is_checked(
    fields: dict[str, Any], key: str, detail: str
) -> None:
    with pytest.raises(PluginConfigError) as caught:
        AlwaysRetryPolicy(**fields)

    assert (caught.value.key, caught.value.detail) == (key, detail)


def test_always_mode_resolves_with_default_backoff() -> None:
    assert resolve_retry_policy({"mode": "always"}, PATH) == AlwaysRetryPolicy(
        initial_delay_ms=500, max_delay_ms=10_000, jitter_ratio=0.1
    )
    assert resolve_retry_policy({"mode": "always"}, PATH).mode == "always"


def test_always_mode_ignores_leftover_normal_fields() -> None:
    layered = {"mode": "always", "maxRetries": 5, "retryableCodes": ["SERVER"]}

    assert resolve_retry_policy(layered, PATH) == AlwaysRetryPolicy()


def test_the_path_defaults_to_retry_policy() -> None:
    with pytest.raises(PluginConfigError) as caught:
        resolve_retry_policy({"mode": "sometimes"})

    assert caught.value.key == "retryPolicy.mode"


UNKNOWN_POLICY_KEY = (
    'is not a known key (expected one of "mode", "maxRetries", "retryableCodes", '
    '"backoff"; did you mean "maxRetries"?)'
)
UNKNOWN_BACKOFF_KEY = (
    'is not a known key (expected one of "initialDelayMs", "maxDelayMs", '
    '"jitterRatio"; did you mean "initialDelayMs"?)'
)
NON_NEGATIVE = "must be a non-negative safe integer"


@pytest.mark.parametrize(
    ("config", "key", "detail"),
    [
        ({"mode": "normal", "maxRetries": -1}, "maxRetries", NON_NEGATIVE),
        (
            {"mode": "normal", "maxRetries": 1.5},
            "maxRetries",
            "must be an integer, got a number",
        ),
        ({"mode": "normal", "maxRetries": 2**53}, "maxRetries", NON_NEGATIVE),
        (
            {"mode": "normal", "maxRetries": True},
            "maxRetries",
            "must be an integer, got a boolean",
        ),
        (
            {"mode": "always", "backoff": {"initialDelayMs": 0}},
            "backoff.initialDelayMs",
            DELAY,
        ),
        (
            {"mode": "normal", "backoff": {"maxDelayMs": math.inf}},
            "backoff.maxDelayMs",
            DELAY,
        ),
        (
            {"mode": "normal", "backoff": {"maxDelayMs": math.nan}},
            "backoff.maxDelayMs",
            DELAY,
        ),
        (
            {"mode": "normal", "backoff": {"initialDelayMs": MAX_TIMER_DELAY_MS + 1}},
            "backoff.initialDelayMs",
            DELAY,
        ),
        (
            {"mode": "always", "backoff": {"maxDelayMs": MAX_TIMER_DELAY_MS + 1}},
            "backoff.maxDelayMs",
            DELAY,
        ),
        (
            {"mode": "normal", "backoff": {"initialDelayMs": 20, "maxDelayMs": 10}},
            "backoff.initialDelayMs",
            "must be less than or equal to maxDelayMs",
        ),
        (
            {"mode": "always", "backoff": {"jitterRatio": 1.1}},
            "backoff.jitterRatio",
            "must be between 0 and 1",
        ),
        (
            {"mode": "always", "backoff": {"jitterRatio": -0.1}},
            "backoff.jitterRatio",
            "must be between 0 and 1",
        ),
        (
            {"mode": "always", "backoff": {"jitterRatio": "0.5"}},
            "backoff.jitterRatio",
            "must be a number, got a string",
        ),
        (
            {"mode": "normal", "retryableCodes": []},
            "retryableCodes",
            "must not be empty",
        ),
        (
            {"mode": "normal", "retryableCodes": ["SERVER", "SERVER"]},
            "retryableCodes",
            "must not contain duplicates",
        ),
        (
            {"mode": "normal", "retryableCodes": [""]},
            "retryableCodes",
            "must contain only non-empty strings",
        ),
        (
            {"mode": "normal", "retryableCodes": [429]},
            "retryableCodes[0]",
            "must be a string, got an integer",
        ),
        (
            {"mode": "normal", "retryableCodes": "SERVER"},
            "retryableCodes",
            "must be a list of strings, got a string",
        ),
        ({"mode": "normal", "maxRetires": 1}, "maxRetires", UNKNOWN_POLICY_KEY),
        (
            {"mode": "always", "backoff": {"initialDelay": 1}},
            "backoff.initialDelay",
            UNKNOWN_BACKOFF_KEY,
        ),
        (
            {"mode": "normal", "backoff": 5},
            "backoff",
            "must be a mapping, got an integer",
        ),
        (
            {"mode": "sometimes"},
            "mode",
            'must be one of "normal", "always", got "sometimes"',
        ),
        ({}, "mode", 'is required (expected one of "normal", "always")'),
    ],
)
def test_invalid_policy_is_a_config_error_keyed_under_the_path(
    config: Any, key: str, detail: str
) -> None:
    with pytest.raises(PluginConfigError) as caught:
        resolve_retry_policy(config, PATH)

    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.key, error.detail) == (f"{PATH}.{key}", detail)
    assert error.problems == ((f"{PATH}.{key}", detail),)
    assert str(error) == f"{PATH}.{key} {detail}"


def test_a_value_that_is_not_a_mapping_is_keyed_by_the_path() -> None:
    with pytest.raises(PluginConfigError) as caught:
        resolve_retry_policy("normal", PATH)  # type: ignore[arg-type]

    assert (caught.value.key, caught.value.detail) == (
        PATH,
        "must be a mapping or a resolved retry policy",
    )


def test_several_problems_are_all_reported() -> None:
    config = {"mode": "normal", "maxRetries": "5", "backoff": {"jitterRatio": 2}}

    with pytest.raises(ConfigError) as caught:
        resolve_retry_policy(config, PATH)

    assert not isinstance(caught.value, PluginConfigError)
    assert set(caught.value.problems) == {
        (f"{PATH}.maxRetries", "must be an integer, got a string"),
        (f"{PATH}.backoff.jitterRatio", "must be between 0 and 1"),
    }


def test_the_policy_config_classes_structure_the_yaml_shape() -> None:
    config = RetryPolicyConfig(
        mode="normal", max_retries=2, backoff=BackoffConfig(jitter_ratio=0)
    )

    assert config.policy() == NormalRetryPolicy(max_retries=2, jitter_ratio=0)
    assert RetryPolicyConfig(mode="always").policy() == AlwaysRetryPolicy()
    with pytest.raises(PluginConfigError) as caught:
        BackoffConfig(initial_delay_ms=5, max_delay_ms=4)
    assert caught.value.key == "initialDelayMs"


# --- delay math (SPEC 9.2) ----------------------------------------------------------


def test_first_retry_with_r_zero_waits_450ms() -> None:
    assert retry_delay_ms(DEFAULT_RETRY_POLICY, 1, 0.0) == pytest.approx(450)


def test_second_retry_with_r_one_waits_1100ms() -> None:
    assert retry_delay_ms(DEFAULT_RETRY_POLICY, 2, 1.0) == pytest.approx(1100)


def test_always_policy_doubles_then_caps() -> None:
    policy = AlwaysRetryPolicy(initial_delay_ms=1, max_delay_ms=4, jitter_ratio=0.1)

    delays = [retry_delay_ms(policy, n, 1.0) for n in (1, 2, 3, 4)]

    assert delays == pytest.approx([1.1, 2.2, 4, 4])


def test_full_jitter_with_r_zero_gives_zero_delay() -> None:
    policy = NormalRetryPolicy(jitter_ratio=1)

    assert retry_delay_ms(policy, 1, 0.0) == 0
    assert retry_delay_ms(policy, 3, 0.0) == 0


def test_zero_jitter_ignores_the_random_value() -> None:
    policy = NormalRetryPolicy(jitter_ratio=0)

    assert retry_delay_ms(policy, 1, 0.0) == retry_delay_ms(policy, 1, 1.0) == 500
    assert retry_delay_ms(policy, 2, 0.3) == 1000


@pytest.mark.parametrize("policy", [NormalRetryPolicy(), AlwaysRetryPolicy()])
def test_retry_after_within_max_is_used_verbatim(policy: RetryPolicy) -> None:
    assert retry_delay_ms(policy, 1, 1.0, provider_retry_after_ms=1234.5) == 1234.5
    assert retry_delay_ms(policy, 9, 0.0, provider_retry_after_ms=10_000) == 10_000


def test_retry_after_beyond_max_stops_a_normal_policy() -> None:
    assert (
        retry_delay_ms(NormalRetryPolicy(), 1, 0.5, provider_retry_after_ms=10_001)
        is None
    )


def test_retry_after_beyond_max_falls_back_to_the_local_delay_when_always() -> None:
    policy = AlwaysRetryPolicy()

    assert retry_delay_ms(
        policy, 1, 0.0, provider_retry_after_ms=60_000
    ) == pytest.approx(450)


def test_non_positive_retry_after_is_ignored() -> None:
    assert retry_delay_ms(NormalRetryPolicy(), 1, 0.0, provider_retry_after_ms=0) == (
        pytest.approx(450)
    )


@pytest.mark.parametrize("retry", [64, 65, 1025, 10**6, 10**400])
def test_huge_retry_numbers_do_not_overflow(retry: int) -> None:
    policy = NormalRetryPolicy(jitter_ratio=0)

    assert retry_delay_ms(policy, retry, 0.5) == 10_000


@pytest.mark.parametrize(
    ("retry", "random_value"), [(0, 0.5), (-1, 0.5), (1, -0.1), (1, 1.1), (1, math.nan)]
)
def test_out_of_range_arguments_are_rejected(retry: int, random_value: float) -> None:
    with pytest.raises(ValueError, match=r"retry|random_value"):
        retry_delay_ms(DEFAULT_RETRY_POLICY, retry, random_value)


@st.composite
def _policies(draw: st.DrawFn) -> RetryPolicy:
    initial = draw(st.floats(min_value=1, max_value=1e6))
    maximum = draw(st.floats(min_value=initial, max_value=2e6))
    jitter = draw(st.floats(min_value=0, max_value=1))
    kind = draw(st.sampled_from([NormalRetryPolicy, AlwaysRetryPolicy]))
    return kind(initial_delay_ms=initial, max_delay_ms=maximum, jitter_ratio=jitter)


@given(
    policy=_policies(),
    retry=st.integers(min_value=1, max_value=2000),
    random_value=st.floats(min_value=0, max_value=1),
    retry_after=st.none() | st.floats(min_value=-1e6, max_value=1e9, allow_nan=False),
)
def test_delays_stay_between_zero_and_max_delay(
    policy: RetryPolicy, retry: int, random_value: float, retry_after: float | None
) -> None:
    delay = retry_delay_ms(policy, retry, random_value, retry_after)

    if delay is None:
        assert isinstance(policy, NormalRetryPolicy)
        assert retry_after is not None
        assert retry_after > policy.max_delay_ms
    else:
        assert 0 <= delay <= policy.max_delay_ms


# --- policy keys ---------------------------------------------------------------------


def test_policy_key_lists_the_normal_fields_with_sorted_codes() -> None:
    policy = NormalRetryPolicy(max_retries=2, retryable_codes=("SERVER", "RATE_LIMIT"))

    assert json.loads(retry_policy_key(policy)) == [
        "normal",
        2,
        ["RATE_LIMIT", "SERVER"],
        500,
        10000,
        0.1,
    ]
    assert retry_policy_key(policy) == (
        '["normal",2,["RATE_LIMIT","SERVER"],500,10000,0.1]'
    )


def test_policy_key_of_always_mode_has_only_backoff() -> None:
    assert retry_policy_key(AlwaysRetryPolicy()) == '["always",500,10000,0.1]'


def test_a_changed_policy_has_a_different_key() -> None:
    assert retry_policy_key(NormalRetryPolicy()) != retry_policy_key(
        NormalRetryPolicy(max_retries=4)
    )
    assert retry_policy_key(
        NormalRetryPolicy(retryable_codes=("A", "B"))
    ) == retry_policy_key(NormalRetryPolicy(retryable_codes=("B", "A")))
