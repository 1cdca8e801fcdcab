"""``fetch``: one bounded request whose answer is a document, not a stream.

Every non-streaming request the library makes goes through it (Ollama's
``GET /api/tags``, the CLI's ``GET <base_url>/models``, a family's token count
``POST``), so none is bounded only per read. Contracts callers may rely on:

- One overall deadline, ``timeout_ms``, covers the whole request: resolving,
  connecting, TLS, sending, the response headers and the body. A server that
  drips bytes cannot hold it longer: it ends as ``TIMEOUT``
  (``"<provider> API request to <endpoint> timed out after <ms>ms"``).
- ``signal`` aborts it at any stage (``ABORTED``), as it aborts a stream.
- The body is capped at ``max_bytes`` (``MAX_BODY_BYTES`` by default): a larger
  answer, announced by ``Content-Length`` or found while reading, is
  ``MALFORMED_RESPONSE`` and its connection is closed.
- It is sent through ``StreamingCall``: a non-2xx answer is ``classify_error``'s
  ``LlmError`` (default ``http_errors.http_error``), a failed send is classified by
  ``errors_map``, and secrets (the auth object's, secret-named headers, URL
  credentials) are redacted from every error, as for a stream.
- A 2xx answer is returned whole (``Fetched``); its connection goes back to the
  pool. Details and defaults: ``docs/transport.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Final

import attrs
import requests

from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol.checks import MAX_TIMEOUT_MS
from dsh_llm.protocol.checks import check_timeout_ms
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.http_errors import HttpErrorClassifier
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import stream_headers

MAX_BODY_BYTES: Final = 8 * 1024 * 1024
"""The default cap on a fetched body (8 MiB): far above any model list a server
sends (Ollama's ``/api/tags`` for hundreds of models is well under 1 MiB), far
below what could hurt the process."""

_BACKSTOP_MS: Final = 5_000


@attrs.frozen(kw_only=True)
class Fetched:
    """A complete 2xx answer."""

    status: int
    """The HTTP status (2xx)."""
    headers: Mapping[str, str]
    """The response headers, names lower-cased."""
    body: bytes
    """The whole body (``b""`` when there was none), at most the cap."""


def _shown(ms: float) -> str:
    return str(int(ms)) if float(ms).is_integer() else str(ms)


def _too_large(call: StreamingCall, max_bytes: int) -> LlmError:
    return LlmError(
        f"{call.provider} API answer from {call.endpoint} is larger than the "
        f"{max_bytes}-byte cap",
        ErrorCode.MALFORMED_RESPONSE,
    )


def _body(call: StreamingCall, response: requests.Response, max_bytes: int) -> bytes:
    announced = response.headers.get("content-length", "").strip()
    if announced.isdigit() and int(announced) > max_bytes:
        raise _too_large(call, max_bytes)
    parts: list[bytes] = []
    size = 0
    for data in call.chunks():
        size += len(data)
        if size > max_bytes:
            raise _too_large(call, max_bytes)
        parts.append(data)
    return b"".join(parts)


def fetch(
    session: requests.Session,
    url: str,
    *,
    provider: str,
    endpoint: str,
    timeout_ms: float,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    auth: requests.auth.AuthBase | None = None,
    signal: AbortSignal | None = None,
    max_bytes: int = MAX_BODY_BYTES,
    classify_error: HttpErrorClassifier | None = None,
    body: bytes | None = None,
    secrets: Iterable[str | Secret] = (),
) -> Fetched:
    """Send one request (with a JSON ``body``, or none) and read its whole
    answer, within ``timeout_ms`` (see the module docstring).

    Args:
        session: A session from ``dsh_llm.transport.session.create_session``.
        url: The full URL.
        provider: Display name for messages (``"Ollama"``).
        endpoint: The URL named in messages (credentials are redacted).
        timeout_ms: The overall deadline, from now to the last body byte.
        method: The HTTP method.
        headers: Added to the attribution ``user-agent``, ``accept:
            application/json`` and ``accept-encoding: identity`` (names
            lower-cased; they may replace all but the ``user-agent``).
        auth: Puts the credential on the request (``BearerAuth``...; ``None``:
            none); its ``secret`` is redacted from errors.
        signal: Aborts the request.
        max_bytes: The cap on the body.
        classify_error: Builds the ``LlmError`` of a non-2xx answer.
        body: The JSON request body (``content-type: application/json`` is
            sent with it), or ``None`` for none.
        secrets: Redacted from errors besides the auth object's own (a
            signing key beside its session token).

    Returns:
        The status, headers and body of the 2xx answer.

    Raises:
        LlmError: ``TIMEOUT``, ``ABORTED``, ``MALFORMED_RESPONSE`` (a body over
            the cap), ``TRANSPORT``, or the code of a non-2xx status.
        ValueError: for a ``timeout_ms`` or ``max_bytes`` out of range.
    """
    check_timeout_ms("timeout_ms", timeout_ms)
    if type(max_bytes) is not int or max_bytes < 0:
        raise ValueError(f"max_bytes must be a non-negative int, got {max_bytes!r}")
    # The timer is the one bound: it ends every stage, the response headers
    # included, which no per-read bound sees. The call's own bounds are a
    # backstop set past it, so which fires never depends on scheduling.
    backstop_ms = min(timeout_ms + _BACKSTOP_MS, MAX_TIMEOUT_MS)
    deadline = AbortController()
    timer = threading.Timer(timeout_ms / 1000, deadline.abort)
    timer.daemon = True
    call = StreamingCall(
        session,
        url=url,
        body=b"" if body is None else body,
        headers=stream_headers(
            accept="application/json", extra=headers, has_body=body is not None
        ),
        auth=NoAuth() if auth is None else auth,
        provider=provider,
        endpoint=endpoint,
        signal=AbortSignal.any(signal, deadline.signal),
        idle_timeout_ms=backstop_ms,
        keepalive_timeout_ms=None,
        total_timeout_ms=backstop_ms,
        method=method,
        connect_timeout_ms=backstop_ms,
        classify_error=classify_error,
        stream=False,
        secrets=secrets,
    )
    failure: LlmError
    timer.start()
    try:
        with call:
            try:
                response = call.open()
                answer = _body(call, response, max_bytes)
            except LlmError as error:
                failure = error
            except Exception as exc:
                failure = call.failure(exc)
            else:
                call.finish()
                return Fetched(
                    status=response.status_code,
                    headers={k.lower(): v for k, v in response.headers.items()},
                    body=answer,
                )
    finally:
        timer.cancel()
    caller_aborted = signal is not None and signal.aborted
    timed_out = failure.code == ErrorCode.TIMEOUT or (
        failure.code == ErrorCode.ABORTED
        and deadline.signal.aborted
        and not caller_aborted
    )
    if failure.status is None and timed_out:
        raise LlmError(
            f"{provider} API request to {call.endpoint} timed out after "
            f"{_shown(timeout_ms)}ms",
            ErrorCode.TIMEOUT,
            cause=failure,
        )
    raise failure
