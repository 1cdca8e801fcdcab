"""dsh_llm.errors: error values, codes, failure normalisation, classifiers."""

from __future__ import annotations

import copy
import math
import pickle
import re
from typing import Any

import pytest

from dsh_llm.errors import CONTEXT_WINDOW_EXCEEDED_CODE
from dsh_llm.errors import EMPTY_RESPONSE_CODE
from dsh_llm.errors import ERROR_CODES
from dsh_llm.errors import INVALID_CREDENTIAL_CODE
from dsh_llm.errors import QUOTA_EXCEEDED_CODE
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import HarnessError
from dsh_llm.errors import LlmError
from dsh_llm.errors import error_chain
from dsh_llm.errors import is_context_window_exceeded_error
from dsh_llm.errors import is_harness_error
from dsh_llm.errors import is_quota_exceeded_error
from dsh_llm.errors import normalize_llm_failure
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure

# --- LlmError and HarnessError ----------------------------------------------------


def test_llm_error_carries_its_facts_and_a_matching_failure() -> None:
    cause = ConnectionError("reset")
    error = LlmError(
        "DeepSeek is rate limiting",
        ErrorCode.RATE_LIMIT,
        status=429,
        provider_retry_after_ms=1500,
        request_id="req-1",
        cause=cause,
    )

    assert error.message == "DeepSeek is rate limiting"
    assert str(error) == "[RATE_LIMIT] DeepSeek is rate limiting"
    assert error.code == "RATE_LIMIT"
    assert error.status == 429
    assert error.provider_retry_after_ms == 1500
    assert error.request_id == "req-1"
    assert error.__cause__ is cause
    assert error.failure == LlmFailure(
        message="DeepSeek is rate limiting",
        code="RATE_LIMIT",
        status=429,
        provider_retry_after_ms=1500,
        request_id="req-1",
    )
    assert isinstance(error, HarnessError)
    assert type(error).__name__ == "LlmError"


def test_llm_error_failure_holds_only_supplied_facts() -> None:
    error = LlmError("boom", "SERVER")

    assert error.failure == LlmFailure(message="boom", code="SERVER")
    assert error.status is None
    assert error.provider_retry_after_ms is None
    assert error.request_id is None
    assert error.__cause__ is None
    # The snapshot is ready for a finish chunk.
    assert FinishReason.error(error.failure).failure is error.failure


def test_error_code_members_are_stored_as_plain_strings() -> None:
    error = LlmError("boom", ErrorCode.SERVER)

    assert type(error.code) is str
    assert type(error.failure.code) is str
    assert error.code == ErrorCode.SERVER


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"message": "", "code": "X"}, ValueError, "message"),
        ({"message": 1, "code": "X"}, TypeError, "message"),
        ({"message": "m", "code": ""}, ValueError, "code"),
        ({"message": "m", "code": None}, TypeError, "code"),
        ({"message": "m", "code": "X", "status": 99}, ValueError, "status"),
        ({"message": "m", "code": "X", "status": 600}, ValueError, "status"),
        ({"message": "m", "code": "X", "status": 404.0}, TypeError, "status"),
        (
            {"message": "m", "code": "X", "provider_retry_after_ms": 0},
            ValueError,
            "retry",
        ),
        (
            {"message": "m", "code": "X", "provider_retry_after_ms": -1},
            ValueError,
            "retry",
        ),
        (
            {"message": "m", "code": "X", "provider_retry_after_ms": math.inf},
            ValueError,
            "retry",
        ),
        (
            {"message": "m", "code": "X", "provider_retry_after_ms": math.nan},
            ValueError,
            "retry",
        ),
        ({"message": "m", "code": "X", "request_id": ""}, ValueError, "request_id"),
        ({"message": "m", "code": "X", "request_id": 5}, TypeError, "request_id"),
    ],
)
def test_llm_error_rejects_invalid_facts_with_plain_builtin_errors(
    kwargs: dict[str, Any], error: type[Exception], field: str
) -> None:
    message = kwargs.pop("message")
    code = kwargs.pop("code")
    with pytest.raises(error, match=field) as info:
        LlmError(message, code, **kwargs)

    assert not isinstance(info.value, HarnessError)


def test_harness_error_keeps_code_and_chains_its_cause() -> None:
    cause = ValueError("inner")
    error = HarnessError("outer", "NO_ADAPTER", cause=cause)

    assert error.code == "NO_ADAPTER"
    assert error.message == "outer"
    assert error.__cause__ is cause
    assert type(error).__name__ == "HarnessError"
    assert is_harness_error(error)
    assert is_harness_error(LlmError("m", "X"))
    assert not is_harness_error(ValueError("x"))
    assert not is_harness_error("HarnessError")


def test_harness_error_validates_message_and_code() -> None:
    with pytest.raises(ValueError, match="message"):
        HarnessError("", "X")
    with pytest.raises(TypeError, match="code"):
        HarnessError("m", 1)  # type: ignore[arg-type]


def test_raise_from_keeps_the_cause_for_tracebacks() -> None:
    inner = OSError("refused")

    def fail() -> None:
        try:
            raise inner
        except OSError as exc:
            raise LlmError("request failed", "TRANSPORT", cause=exc) from exc

    with pytest.raises(LlmError) as info:
        fail()
    assert info.value.__cause__ is inner


def test_repr_shows_message_code_and_given_facts_only() -> None:
    assert repr(LlmError("boom", ErrorCode.SERVER)) == "LlmError('boom', code='SERVER')"
    assert repr(LlmError("boom", "SERVER", status=503, request_id="r")) == (
        "LlmError('boom', code='SERVER', status=503, request_id='r')"
    )
    assert repr(HarnessError("x", "Y")) == "HarnessError('x', code='Y')"


def test_llm_error_round_trips_through_pickle_and_copy() -> None:
    error = LlmError(
        "rate limited",
        "RATE_LIMIT",
        status=429,
        provider_retry_after_ms=250.5,
        request_id="r-9",
        cause=OSError("x"),
    )

    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(clone) is LlmError
        assert clone.message == error.message
        assert clone.code == error.code
        assert clone.failure == error.failure
        assert clone.status == 429
        assert repr(clone) == repr(error)


class _PluginError(LlmError):
    """A subclass with its own constructor signature and attribute."""

    def __init__(self, plugin_id: str, reason: str) -> None:
        super().__init__(f"plugin {plugin_id} failed: {reason}", "PLUGIN_LOAD")
        self.plugin_id = plugin_id


def test_subclass_pickles_with_its_own_attributes() -> None:
    error = _PluginError("llm-deepseek", "bad config")
    error.add_note("while loading composition.yml")

    clone = pickle.loads(pickle.dumps(error))

    assert type(clone) is _PluginError
    assert clone.plugin_id == "llm-deepseek"
    assert clone.message == "plugin llm-deepseek failed: bad config"
    assert clone.code == "PLUGIN_LOAD"
    assert clone.failure == error.failure
    assert clone.__notes__ == ["while loading composition.yml"]


def test_harness_error_pickles() -> None:
    clone = pickle.loads(pickle.dumps(HarnessError("x", "NO_ADAPTER")))

    assert type(clone) is HarnessError
    assert (clone.message, clone.code) == ("x", "NO_ADAPTER")


# --- codes ------------------------------------------------------------------------


def test_every_error_code_is_documented() -> None:
    assert set(ERROR_CODES) == set(ErrorCode)
    for code, info in ERROR_CODES.items():
        assert info.when.strip(), code
        assert isinstance(info.retry_may_help, bool)
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", code.value)
        assert code.value == code.name


def test_default_retryable_codes_are_the_ones_documented_as_retry_may_help() -> None:
    retryable = {
        code.value for code, info in ERROR_CODES.items() if info.retry_may_help
    }

    assert retryable == {
        "EMPTY_RESPONSE",
        "RATE_LIMIT",
        "SERVER",
        "TIMEOUT",
        "TRANSPORT",
    }


def test_core_codes_of_the_typescript_harness_are_present() -> None:
    core = {
        "UNKNOWN",
        "NO_ADAPTER",
        "INVALID_ADAPTER",
        "DUPLICATE_ADAPTER",
        "REGISTRATION_DISPOSED",
        "INVALID_CATALOG",
        "INVALID_MODEL_INFO",
        "INVALID_MODEL_CONTEXT",
        "INVALID_MODEL_MAX_TOKENS",
        "INVALID_MODEL_REASONING",
        "UNSUPPORTED_REASONING_EFFORT",
        "INVALID_PREPARED_CALL",
        "ABORTED",
        "TIMEOUT",
        "TRANSPORT",
        "AUTH",
        "RATE_LIMIT",
        "QUOTA",
        "CONTEXT_WINDOW_EXCEEDED",
        "INVALID_REQUEST",
        "SERVER",
        "EMPTY_RESPONSE",
        "STREAM_CLOSED",
        "MALFORMED_RESPONSE",
        "MISSING_CREDENTIAL",
        "INVALID_CREDENTIAL",
        "UNSUPPORTED_CONTENT",
        "INVARIANT",
    }

    assert core <= {code.value for code in ErrorCode}


def test_code_constants() -> None:
    assert CONTEXT_WINDOW_EXCEEDED_CODE == "CONTEXT_WINDOW_EXCEEDED"
    assert QUOTA_EXCEEDED_CODE == "QUOTA"
    assert EMPTY_RESPONSE_CODE == "EMPTY_RESPONSE"
    assert INVALID_CREDENTIAL_CODE == "INVALID_CREDENTIAL"


# --- normalize_llm_failure (SPEC 11 items 1-3) ---------------------------------------


class _HostileStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str failed")


def test_exception_whose_str_raises_gives_the_fallback() -> None:
    assert normalize_llm_failure(_HostileStr("x")) == LlmFailure(
        message="LLM adapter failed", code="UNKNOWN"
    )


def test_exception_with_empty_message_gives_the_fallback() -> None:
    assert normalize_llm_failure(RuntimeError()) == LlmFailure(
        message="LLM adapter failed", code="UNKNOWN"
    )
    assert normalize_llm_failure(RuntimeError("")) == LlmFailure(
        message="LLM adapter failed", code="UNKNOWN"
    )


def test_foreign_exception_keeps_its_message_with_code_unknown() -> None:
    assert normalize_llm_failure(ValueError("provider failed")) == LlmFailure(
        message="provider failed", code="UNKNOWN"
    )


def test_foreign_code_and_failure_attributes_are_never_trusted() -> None:
    error = RuntimeError("provider failed")
    error.code = "FOREIGN"  # type: ignore[attr-defined]
    error.failure = LlmFailure(message="provider failed", code="FOREIGN")  # type: ignore[attr-defined]

    assert normalize_llm_failure(error) == LlmFailure(
        message="provider failed", code="UNKNOWN"
    )


class _GetterFailure(Exception):
    @property
    def failure(self) -> LlmFailure:
        return LlmFailure(message="ignored", code="IGNORED")

    @property
    def code(self) -> str:
        return "IGNORED"


class _RaisingGetters(Exception):
    @property
    def failure(self) -> LlmFailure:
        raise RuntimeError("failure getter failed")

    @property
    def code(self) -> str:
        raise RuntimeError("code getter failed")


def test_failure_and_code_getters_on_foreign_exceptions_are_ignored() -> None:
    assert normalize_llm_failure(_GetterFailure("provider failed")) == LlmFailure(
        message="provider failed", code="UNKNOWN"
    )
    assert normalize_llm_failure(_RaisingGetters("provider failed")) == LlmFailure(
        message="provider failed", code="UNKNOWN"
    )


def test_harness_error_keeps_its_code() -> None:
    assert normalize_llm_failure(HarnessError("no route", "NO_ADAPTER")) == LlmFailure(
        message="no route", code="NO_ADAPTER"
    )


def test_llm_error_facts_are_kept() -> None:
    error = LlmError(
        "slow down",
        "RATE_LIMIT",
        status=429,
        provider_retry_after_ms=900,
        request_id="r",
    )

    assert normalize_llm_failure(error) is error.failure


def test_mismatching_failure_code_falls_back_to_the_error_code() -> None:
    error = LlmError("slow down", "RATE_LIMIT", status=429)
    error.failure = LlmFailure(message="other", code="SERVER", status=500)

    assert normalize_llm_failure(error) == LlmFailure(
        message="slow down", code="RATE_LIMIT"
    )


@pytest.mark.parametrize("failure", [None, "failure", {"message": "m", "code": "X"}])
def test_invalid_carried_failure_falls_back(failure: object) -> None:
    error = LlmError("provider failed", "SERVER")
    error.failure = failure  # type: ignore[assignment]

    assert normalize_llm_failure(error) == LlmFailure(
        message="provider failed", code="SERVER"
    )


class _HostileCode(HarnessError):
    @property
    def code(self) -> str:
        raise RuntimeError("code getter failed")

    @code.setter
    def code(self, value: str) -> None:
        pass


class _JunkCode(HarnessError):
    @property  # type: ignore[override]
    def code(self) -> object:
        return 42

    @code.setter
    def code(self, value: str) -> None:
        pass


def test_harness_error_with_a_hostile_or_junk_code_gives_unknown() -> None:
    assert normalize_llm_failure(_HostileCode("m", "X")) == LlmFailure(
        message="m", code="UNKNOWN"
    )
    assert normalize_llm_failure(_JunkCode("m", "X")) == LlmFailure(
        message="m", code="UNKNOWN"
    )


class _HostileHarnessStr(HarnessError):
    def __str__(self) -> str:
        raise RuntimeError("message accessor failed")


def test_raising_message_accessor_gives_the_fallback_message() -> None:
    assert normalize_llm_failure(_HostileHarnessStr("m", "AUTH")) == LlmFailure(
        message="LLM adapter failed", code="AUTH"
    )


# --- classifiers (SPEC 11 item 25) -------------------------------------------------


@pytest.mark.parametrize(
    "detail",
    [
        "context_length_exceeded maximum context length",
        "context-window-overflowed",
        "This model maximum context length is 128000 tokens",
        "input is too long for this model",
        "request too large for model context",
        "input exceeds the model context window limit",
    ],
)
def test_context_window_classifier_recognises_overflow(detail: str) -> None:
    assert is_context_window_exceeded_error(detail)
    assert is_context_window_exceeded_error(detail.upper())


@pytest.mark.parametrize(
    "detail",
    [
        "invalid request: malformed tool arguments",
        "invalid input: temperature exceeds maximum allowed value",
        "input exceeds maximum allowed value",
        "context window size must be positive",
    ],
)
def test_context_window_classifier_ignores_unrelated_errors(detail: str) -> None:
    assert not is_context_window_exceeded_error(detail)


@pytest.mark.parametrize(
    "detail",
    [
        "insufficient_quota",
        "account balance depleted",
        "usage-limit-exceeded",
        "out of credits",
        "OpenAI API error (429): You exceeded your current quota, please check your "
        "plan and billing details.",
    ],
)
def test_quota_classifier_recognises_exhausted_quota(detail: str) -> None:
    assert is_quota_exceeded_error(detail)


@pytest.mark.parametrize(
    "detail", ["HTTP 429: rate limit reached", "quota resets in one minute"]
)
def test_quota_classifier_ignores_transient_rate_limits(detail: str) -> None:
    assert not is_quota_exceeded_error(detail)


# --- error_chain ---------------------------------------------------------------------


def _caused(error: BaseException, cause: BaseException) -> BaseException:
    error.__cause__ = cause
    return error


def test_error_chain_appends_each_cause() -> None:
    error = _caused(
        TypeError("fetch failed"), _caused(OSError("connect"), OSError("refused"))
    )

    assert error_chain(error) == "fetch failed: connect: refused"


def test_error_chain_brackets_exception_group_members() -> None:
    group = ExceptionGroup(
        "", [OSError("connect ECONNREFUSED ::1:443"), OSError("connect 127.0.0.1:443")]
    )

    assert error_chain(_caused(TypeError("fetch failed"), group)) == (
        "fetch failed: ExceptionGroup [connect ECONNREFUSED ::1:443; "
        "connect 127.0.0.1:443]"
    )


def test_error_chain_renders_a_shared_cause_on_both_paths() -> None:
    shared = ValueError("shared")
    first, second = ValueError("a"), ValueError("b")
    first.__cause__ = second.__cause__ = shared
    group = ExceptionGroup("agg", [first, second])

    assert error_chain(group) == "agg [a: shared; b: shared]"


def test_error_chain_marks_a_cycle() -> None:
    outer = RuntimeError("outer")
    outer.__cause__ = outer

    assert error_chain(outer) == "outer: <circular cause>"
    inner = RuntimeError("inner")
    looped = _caused(RuntimeError("outer"), inner)
    inner.__cause__ = looped
    assert error_chain(looped) == "outer: inner: <circular cause>"


def test_error_chain_skips_a_cause_that_repeats_the_message() -> None:
    assert (
        error_chain(HarnessError("boom", "UNKNOWN", cause=Exception("boom"))) == "boom"
    )


def test_error_chain_uses_the_type_name_for_an_empty_message() -> None:
    assert error_chain(TypeError("")) == "TypeError"
    assert error_chain(_caused(RuntimeError("outer"), KeyError())) == "outer: KeyError"


def test_error_chain_collapses_only_the_unrenderable_node() -> None:
    assert error_chain(_HostileStr()) == "<unrenderable value>"
    assert error_chain(_caused(RuntimeError("outer"), _HostileStr())) == (
        "outer: <unrenderable value>"
    )
