"""Keeping a request's secrets out of the errors built from a server's answer.

A server may echo what it was sent, and the HTTP stack may quote a request; this
module owns what counts as a secret of a request and how text and exceptions are
cleaned before they become part of an ``LlmError``.

- ``Redactor.for_request(url=..., headers=..., secrets=...)`` knows one request's
  secrets (the key, secret-named header values, URL credentials, secret query
  parameters), in their encoded spellings too.
- ``redactor(text)`` replaces every secret and every long fragment of one with
  ``***``; text without one comes back as the same object.
- ``redactor.cause(exc, withhold=...)`` is what an ``LlmError`` may keep as its
  cause (``RedactedCause`` when the original shows a secret).
- A ``Redactor``'s ``repr`` never shows a secret. Details: ``docs/transport.md``.
"""

from __future__ import annotations

import json
import re
import traceback
import urllib.parse
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Final

import requests.exceptions as rx

from dsh_llm.credentials import Secret

__all__ = [
    "FRAGMENT_LENGTH",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SECRET_HEADER_NAMES",
    "SECRET_NAME_PARTS",
    "RedactedCause",
    "Redactor",
    "is_secret_name",
    "may_quote_request",
]

REDACTED: Final = "***"
"""What a secret is replaced with."""
MIN_SECRET_LENGTH: Final = 8
"""Shorter values are not searched for (see the module docstring)."""
FRAGMENT_LENGTH: Final = 16
"""A run of this many consecutive characters of a secret is redacted too."""
SECRET_HEADER_NAMES: Final = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key"}
)
"""Header names whose values are secrets."""
SECRET_NAME_PARTS: Final = (
    "key",
    "token",
    "secret",
    "auth",
    "password",
    "cookie",
    "credential",
)
"""A header or query parameter whose name contains one of these holds a secret."""


def is_secret_name(name: str) -> bool:
    """Whether a header or query parameter called ``name`` (any case) carries a
    secret: one of ``SECRET_HEADER_NAMES`` or a name containing one of
    ``SECRET_NAME_PARTS``."""
    lower = name.lower()
    return lower in SECRET_HEADER_NAMES or any(
        part in lower for part in SECRET_NAME_PARTS
    )


def may_quote_request(exc: BaseException) -> bool:
    """Whether ``exc``, raised while a request was being sent, may quote one of
    its header values: ``requests``' ``InvalidHeader``, and any ``ValueError`` that
    is not a ``requests`` exception (``http.client``'s ``Invalid header value``,
    a ``UnicodeEncodeError`` holding the header it could not encode)."""
    if isinstance(exc, rx.InvalidHeader):
        return True
    return isinstance(exc, ValueError) and not isinstance(exc, rx.RequestException)


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


class RedactedCause(Exception):
    """Stands in, as an ``LlmError``'s cause, for an exception whose text showed
    (or could show) a secret.

    Args:
        type_name: The qualified class name of the exception replaced.
        detail: Its message with every secret redacted, or ``None`` when the
            message was withheld.
    """

    def __init__(self, type_name: str, detail: str | None) -> None:
        if detail is None:
            text = f"{type_name} (details withheld: they may quote request headers)"
        else:
            text = f"{type_name}: {detail}" if detail else type_name
        super().__init__(text)
        self.type_name = type_name
        """The qualified class name of the exception replaced."""
        self.detail = detail
        """The redacted message, or ``None`` when it was withheld."""

    def __reduce__(self) -> tuple[type[RedactedCause], tuple[str, str | None]]:
        return (RedactedCause, (self.type_name, self.detail))


def _spellings(value: str) -> set[str]:
    """``value`` as written, percent-decoded and JSON-escaped."""
    forms = {value, urllib.parse.unquote(value)}
    forms.update(json.dumps(form, ensure_ascii=False)[1:-1] for form in list(forms))
    return forms


def _url_secrets(url: str) -> list[str]:
    try:
        parts = urllib.parse.urlsplit(url)
        found = [parts.username or "", parts.password or ""]
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return []
    found.extend(value for name, value in query if is_secret_name(name))
    return found


def _windows(secret: str) -> set[str]:
    """``secret`` and each run of ``FRAGMENT_LENGTH`` of its characters that
    neither starts nor ends with whitespace (the fragment `` sk-...`` of
    ``Bearer sk-...`` would also eat the space before an echoed key)."""
    found = {secret}
    for start in range(len(secret) - FRAGMENT_LENGTH + 1):
        fragment = secret[start : start + FRAGMENT_LENGTH]
        if not (fragment[0].isspace() or fragment[-1].isspace()):
            found.add(fragment)
    return found


class Redactor:
    """Replaces the secrets of one request in text (see the module docstring).

    Args:
        secrets: The secret values (``str`` or ``Secret``); empty and short
            values are ignored.
    """

    __slots__ = ("_pattern", "_secrets")

    def __init__(self, secrets: Iterable[str | Secret] = ()) -> None:
        found: set[str] = set()
        for secret in secrets:
            raw = secret.reveal() if isinstance(secret, Secret) else secret
            for form in _spellings(raw):
                if len(form) >= MIN_SECRET_LENGTH:
                    found.add(form)
        self._secrets = tuple(sorted(found))
        self._pattern: re.Pattern[str] | None = None

    @classmethod
    def for_request(
        cls,
        *,
        url: str,
        headers: Mapping[str, str],
        secrets: Iterable[str | Secret] = (),
    ) -> Redactor:
        """The redactor for a request to ``url`` with ``headers`` (plus the
        explicit ``secrets``, such as the API key)."""
        found: list[str | Secret] = list(secrets)
        for name, value in headers.items():
            if isinstance(value, str) and is_secret_name(name):
                found.append(value)
                found.extend(value.split())
        found.extend(_url_secrets(url))
        return cls(found)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"

    def _compiled(self) -> re.Pattern[str]:
        pattern = self._pattern
        if pattern is None:
            windows: set[str] = set()
            for secret in self._secrets:
                windows.update(_windows(secret))
            # Longest first, so the capture at a position is the longest window;
            # the lookahead finds overlapping windows, merged afterwards.
            ordered = sorted(windows, key=lambda window: (-len(window), window))
            pattern = re.compile("(?=(" + "|".join(map(re.escape, ordered)) + "))")
            self._pattern = pattern
        return pattern

    def _spans(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        for match in self._compiled().finditer(text):
            start, end = match.start(1), match.end(1)
            if spans and start <= spans[-1][1]:
                if end > spans[-1][1]:
                    spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
        return spans

    def __call__(self, text: str) -> str:
        """``text`` with every secret and long secret fragment replaced by
        ``REDACTED``."""
        if not self._secrets or not text:
            return text
        spans = self._spans(text)
        if not spans:
            return text
        pieces: list[str] = []
        last = 0
        for start, end in spans:
            pieces.append(text[last:start])
            pieces.append(REDACTED)
            last = end
        pieces.append(text[last:])
        return "".join(pieces)

    def reveals(self, text: str) -> bool:
        """Whether ``text`` shows a secret or a long fragment of one."""
        return bool(self._secrets) and self._compiled().search(text) is not None

    def cause(self, exc: BaseException, *, withhold: bool = False) -> BaseException:
        """What an ``LlmError`` may keep as its cause for ``exc`` (see the module
        docstring)."""
        if withhold:
            return RedactedCause(_type_name(exc), None)
        if not self._secrets or not self.reveals(_rendering(exc)):
            return exc
        return RedactedCause(_type_name(exc), self(_safe_str(exc)))


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return ""


def _rendering(exc: BaseException) -> str:
    """Everything a log could print of ``exc``: its traceback text (chained
    exceptions included) and the ``repr`` of each exception in the chain."""
    parts: list[str] = []
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        try:
            parts.append(repr(node))
        except Exception:
            parts.append(_safe_str(node))
        for linked in (node.__cause__, node.__context__):
            if linked is not None:
                pending.append(linked)
    try:
        parts.extend(traceback.format_exception(exc))
    except Exception:
        parts.append(_safe_str(exc))
    return "\n".join(parts)
