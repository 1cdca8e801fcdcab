"""Secrets kept out of server-supplied text and exception causes
(dsh_llm.transport.redaction)."""

from __future__ import annotations

import pickle
import traceback
from typing import Any

import pytest
import requests.exceptions as rx
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.credentials import Secret
from dsh_llm.transport.redaction import FRAGMENT_LENGTH
from dsh_llm.transport.redaction import MIN_SECRET_LENGTH
from dsh_llm.transport.redaction import REDACTED
from dsh_llm.transport.redaction import RedactedCause
from dsh_llm.transport.redaction import Redactor
from dsh_llm.transport.redaction import is_secret_name
from dsh_llm.transport.redaction import may_quote_request

KEY = "sk-SUPERSECRETKEY1234567890"


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "proxy-authorization",
        "X-Api-Key",
        "api-key",
        "x-goog-api-key",
        "X-Auth-Token",
        "x-client-secret",
        "Cookie",
        "db_password",
        "key",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["HTTP-Referer", "X-Title", "x-deepseek-harness-session-id", "q"]
)
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_every_occurrence_of_a_secret_is_replaced():
    redact = Redactor([KEY])
    text = f"Incorrect API key provided: {KEY}. You sent {KEY}!"
    assert redact(text) == "Incorrect API key provided: ***. You sent ***!"


def test_text_without_a_secret_is_returned_unchanged():
    redact = Redactor([KEY])
    text = "Incorrect API key provided: sk-abc***wxyz."
    assert redact(text) is text
    assert not redact.reveals(text)
    empty = Redactor()
    assert not empty
    assert empty(text) is text


def test_a_long_fragment_of_a_secret_is_replaced():
    redact = Redactor([KEY])
    truncated = KEY[:FRAGMENT_LENGTH]
    assert redact(f"key {truncated}... is invalid") == "key ***... is invalid"
    tail = KEY[-FRAGMENT_LENGTH:]
    assert redact(f"key ...{tail} is invalid") == "key ...*** is invalid"


def test_a_short_fragment_of_a_secret_is_kept():
    # What providers show of a key they mask themselves ("sk-...7890").
    redact = Redactor([KEY])
    text = f"key {KEY[:8]}...{KEY[-4:]} is invalid"
    assert redact(text) is text


def test_secrets_shorter_than_the_minimum_are_not_searched_for():
    short = "x" * (MIN_SECRET_LENGTH - 1)
    redact = Redactor([short, ""])
    assert not redact
    assert redact(f"value {short}") == f"value {short}"
    assert Redactor(["y" * MIN_SECRET_LENGTH])("a yyyyyyyy b") == "a *** b"


def test_adjacent_and_overlapping_secrets_become_one_marker():
    first, second = "AAAAAAAAAAAA", "BBBBBBBBBBBB"
    redact = Redactor([first, second])
    assert redact(f"[{first}{second}]") == "[***]"


def test_escaped_spellings_are_found():
    key = 'sk-quote"and\\slash-0123456789'
    redact = Redactor([Secret(key)])
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    assert redact(f'{{"message": "bad key {escaped}"}}') == '{"message": "bad key ***"}'
    encoded = "sk-pct%2Fencoded-0123456789"
    assert Redactor([encoded])("got sk-pct/encoded-0123456789") == "got ***"


def test_for_request_collects_key_secret_headers_and_url_credentials():
    redact = Redactor.for_request(
        url="https://alice-user:p4ssw0rd-long@h.test/v1?api-key=QUERYSECRET1&x=visible-value",
        headers={
            "X-Api-Key": "HEADERSECRET99",
            "Authorization": "Bearer BEARERTOKEN123",
            "X-Title": "my visible title",
        },
        secrets=[Secret(KEY)],
    )
    text = (
        f"{KEY} HEADERSECRET99 BEARERTOKEN123 alice-user p4ssw0rd-long "
        "QUERYSECRET1 visible-value my visible title"
    )
    assert redact(text) == "*** *** *** *** *** *** visible-value my visible title"
    assert "KEY" not in repr(redact)
    assert repr(redact).startswith("Redactor(")


def test_a_clean_exception_is_kept_as_the_cause():
    exc = ConnectionResetError("connection reset by peer")
    assert Redactor([KEY]).cause(exc) is exc
    assert Redactor().cause(exc) is exc


def _all_text(exc: BaseException) -> str:
    parts = [str(exc), repr(exc), *traceback.format_exception(exc)]
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        parts += [str(node), repr(node)]
        node = node.__cause__ or node.__context__
    return "\n".join(parts)


def test_an_exception_showing_a_secret_is_replaced_with_its_type_named():
    exc = rx.ConnectionError(f"Max retries exceeded with url: /v1?key={KEY}")
    cause = Redactor([KEY]).cause(exc)
    assert isinstance(cause, RedactedCause)
    assert cause.type_name == "requests.exceptions.ConnectionError"
    assert str(cause) == (
        "requests.exceptions.ConnectionError: "
        "Max retries exceeded with url: /v1?key=***"
    )
    assert KEY not in _all_text(cause)


def test_a_secret_only_in_the_repr_or_a_chained_exception_is_found():
    encode_error = UnicodeEncodeError("latin-1", f"{KEY}\u20ac", 27, 28, "bad")
    assert KEY not in str(encode_error)
    assert isinstance(Redactor([KEY]).cause(encode_error), RedactedCause)
    try:
        try:
            raise ValueError(f"inner {KEY}")
        except ValueError:
            raise OSError("outer") from None
    except OSError as outer:
        chained = outer
    chained.__suppress_context__ = False
    cause = Redactor([KEY]).cause(chained)
    assert isinstance(cause, RedactedCause)
    assert str(cause) == "OSError: outer"


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _UnreadableNotes(list[str]):
    def __iter__(self) -> Any:
        raise RuntimeError("no notes")


def test_exceptions_that_cannot_be_rendered_never_break_the_redactor():
    unprintable = _Unprintable()
    unprintable.add_note(f"sent with {KEY}")
    cause = Redactor([KEY]).cause(unprintable)
    assert isinstance(cause, RedactedCause)
    assert str(cause) == f"{__name__}._Unprintable"

    unreadable = ValueError(f"rejected {KEY}")
    unreadable.__notes__ = _UnreadableNotes()
    cause = Redactor([KEY]).cause(unreadable)
    assert isinstance(cause, RedactedCause)
    assert str(cause) == "ValueError: rejected ***"


def test_withheld_details_keep_only_the_type_name():
    exc = rx.InvalidHeader("Invalid leading whitespace in header value: ' short'")
    cause = Redactor().cause(exc, withhold=True)
    assert isinstance(cause, RedactedCause)
    assert str(cause) == (
        "requests.exceptions.InvalidHeader (details withheld: they may quote "
        "request headers)"
    )
    assert "short" not in _all_text(cause)


def test_a_redacted_cause_pickles():
    for detail in ("message: ***", None):
        cause = RedactedCause("x.Error", detail)
        copy = pickle.loads(pickle.dumps(cause))
        assert (type(copy), str(copy), copy.type_name, copy.detail) == (
            RedactedCause,
            str(cause),
            "x.Error",
            detail,
        )


@pytest.mark.parametrize(
    ("exc", "quotes"),
    [
        (rx.InvalidHeader("x"), True),
        (UnicodeEncodeError("latin-1", "\u20ac", 0, 1, "x"), True),
        (ValueError("Invalid header value b'x'"), True),
        (rx.InvalidURL("x"), False),
        (rx.ConnectionError("x"), False),
        (OSError("x"), False),
    ],
)
def test_may_quote_request(exc, quotes):
    assert may_quote_request(exc) is quotes


_SECRETS = st.text(
    alphabet=st.characters(
        min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="*"
    ),
    min_size=MIN_SECRET_LENGTH,
    max_size=60,
)


@given(secret=_SECRETS, before=st.text(max_size=40), after=st.text(max_size=40))
def test_a_redacted_text_never_contains_the_secret(secret, before, after):
    redact = Redactor([secret])
    result = redact(before + secret + after)
    assert secret not in result
    assert REDACTED in result
