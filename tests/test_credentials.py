"""dsh_llm.credentials: the usable-key rule and the secret wrapper."""

from __future__ import annotations

import copy
import logging
import pickle

import pytest

from dsh_llm.credentials import ApiKeyCheck
from dsh_llm.credentials import Secret
from dsh_llm.credentials import assert_usable_api_key
from dsh_llm.credentials import normalize_api_key
from dsh_llm.errors import INVALID_CREDENTIAL_CODE
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

# --- normalize_api_key (SPEC 11 items 4-5) ------------------------------------------


def test_printable_ascii_key_is_accepted_unchanged() -> None:
    check = normalize_api_key("sk-0123456789abcdef")

    assert check.ok
    assert check.reason is None
    assert check.value == Secret("sk-0123456789abcdef")


def test_surrounding_whitespace_is_trimmed_before_judging() -> None:
    check = normalize_api_key("  sk-abc\t\n")

    assert check.ok
    assert check.value is not None
    assert check.value.reveal() == "sk-abc"


def test_printable_ascii_boundary_characters_are_accepted() -> None:
    check = normalize_api_key("!~")

    assert check.ok
    assert check.value is not None
    assert check.value.reveal() == "!~"


@pytest.mark.parametrize("raw", ["", "   ", "\t", "\r\n "])
def test_blank_key_is_rejected_as_empty(raw: str) -> None:
    assert normalize_api_key(raw) == ApiKeyCheck(ok=False, reason="empty")


@pytest.mark.parametrize(
    "raw",
    [
        "sk-\U0001f600abc",  # emoji
        "sk-你好",  # CJK
        "sk-abc，",  # full-width comma
        "sk-abc def",  # interior space
        "sk-abc\x01",  # C0 control
        "sk-café",  # Latin-1
        "sk-\x7f",  # DEL
    ],
)
def test_key_with_characters_no_header_can_carry_is_rejected(raw: str) -> None:
    assert normalize_api_key(raw) == ApiKeyCheck(ok=False, reason="illegalCharacters")


def test_non_string_key_is_a_type_error_that_does_not_show_the_value() -> None:
    with pytest.raises(TypeError) as info:
        normalize_api_key(b"sk-secret-bytes")  # type: ignore[arg-type]

    assert "sk-secret-bytes" not in str(info.value)
    assert "bytes" in str(info.value)


# --- assert_usable_api_key (SPEC 11 item 6) -----------------------------------------


def test_assert_returns_the_trimmed_key() -> None:
    assert assert_usable_api_key("  sk-abc  ", "llm-deepseek", "DEEPSEEK_API_KEY") == (
        "sk-abc"
    )


def test_blank_key_message_names_package_and_reference() -> None:
    with pytest.raises(LlmError) as info:
        assert_usable_api_key("   ", "llm-deepseek", "DEEPSEEK_API_KEY")

    assert info.value.code == ErrorCode.INVALID_CREDENTIAL == INVALID_CREDENTIAL_CODE
    assert info.value.message.startswith(
        "llm-deepseek: the API key resolved from DEEPSEEK_API_KEY is blank"
    )


def test_illegal_key_raises_invalid_credential_naming_package_and_reference() -> None:
    with pytest.raises(LlmError) as info:
        assert_usable_api_key("sk-\U0001f600", "llm-pi-ai", "ACME_API_KEY")

    assert info.value.code == INVALID_CREDENTIAL_CODE
    assert "llm-pi-ai" in info.value.message
    assert "ACME_API_KEY" in info.value.message
    assert "no HTTP header can carry" in info.value.message


@pytest.mark.parametrize(
    "raw", ["sk-\U0001f600supersecret", "supersecret value", "supersecret\x00"]
)
def test_the_refused_key_never_appears_in_message_repr_or_failure(
    raw: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.DEBUG, logger="dsh_llm"),
        pytest.raises(LlmError) as info,
    ):
        assert_usable_api_key(raw, "llm-deepseek", "DEEPSEEK_API_KEY")

    error = info.value
    for text in (str(error), repr(error), repr(error.failure), caplog.text):
        assert "supersecret" not in text
    assert error.__cause__ is None
    assert "supersecret" not in repr(normalize_api_key(raw))


def test_accepted_key_never_appears_in_the_check_repr() -> None:
    check = normalize_api_key("sk-supersecret")

    assert "supersecret" not in repr(check)
    assert "supersecret" not in str(check)


# --- Secret --------------------------------------------------------------------------


def test_secret_hides_its_value_in_repr_str_and_format() -> None:
    secret = Secret("sk-supersecret")

    assert repr(secret) == "Secret('***')"
    assert str(secret) == "***"
    assert f"{secret}" == "***"
    assert "supersecret" not in repr([secret, {"k": secret}])
    assert secret.reveal() == "sk-supersecret"


def test_secret_equality_compares_the_hidden_values() -> None:
    assert Secret("a") == Secret("a")
    assert Secret("a") != Secret("b")
    assert Secret("é") == Secret("é")
    assert Secret("a") != "a"
    assert (Secret("a") == "a") is False


def test_secret_is_not_hashable() -> None:
    with pytest.raises(TypeError):
        hash(Secret("a"))


def test_secret_pickles_and_copies() -> None:
    secret = Secret("sk-abc")

    assert pickle.loads(pickle.dumps(secret)) == secret
    assert pickle.loads(pickle.dumps(secret)).reveal() == "sk-abc"
    assert copy.deepcopy(secret).reveal() == "sk-abc"


def test_secret_requires_a_string() -> None:
    with pytest.raises(TypeError, match="str"):
        Secret(123)  # type: ignore[arg-type]
