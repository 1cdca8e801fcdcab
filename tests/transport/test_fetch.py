"""``fetch`` (dsh_llm.transport.fetch) against real loopback servers: the whole
answer within one deadline whatever the server drips (body or headers), the size
cap, an abort at any point, HTTP errors through the classifier, secrets redacted,
and the connection reused after a complete answer.

The dripping servers would hold a per-read bound for many seconds (400 bytes at
one every 50 ms); each test asserts the call ended near its deadline instead."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.transport.attribution import user_agent
from dsh_llm.transport.fetch import MAX_BODY_BYTES
from dsh_llm.transport.fetch import fetch
from dsh_llm.transport.http_errors import Redact
from dsh_llm.transport.session import BearerAuth
from dsh_llm.transport.session import create_session

DEADLINE_MS = 1000
# How far past the deadline a call may end on a loaded machine; a drip that
# held it would go on for DRIP_S.
LATE_S = 3.0
DRIP_BYTES = 400
DRIP_S = DRIP_BYTES * 0.05
KEY = "sk-fetch-0123456789abcdef"


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with create_session() as s:
        yield s


def _json(value: Any, **fields: Any) -> Reply:
    fields.setdefault("framing", "length")
    return Reply(
        headers={"content-type": "application/json", "x-request-id": "req-1"},
        body=json.dumps(value).encode(),
        **fields,
    )


def _fetch(session: requests.Session, server: LoopbackServer, **options: Any) -> Any:
    options.setdefault("timeout_ms", DEADLINE_MS)
    return fetch(
        session,
        f"{server.url}/api/tags",
        provider="Tester",
        endpoint=server.url,
        **options,
    )


def _timed_failure(
    session: requests.Session, url: str, **options: Any
) -> tuple[LlmError, float]:
    options.setdefault("timeout_ms", DEADLINE_MS)
    started = time.monotonic()
    with pytest.raises(LlmError) as caught:
        fetch(session, url, provider="Tester", endpoint=url, **options)
    return caught.value, time.monotonic() - started


# --- a complete answer --------------------------------------------------------------


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
def test_a_json_answer_comes_back_whole_with_its_status_and_headers(
    server, session, framing
):
    server.enqueue(_json({"models": []}, framing=framing))
    fetched = _fetch(session, server)
    assert fetched.status == 200
    assert json.loads(fetched.body) == {"models": []}
    assert fetched.headers["content-type"] == "application/json"
    assert fetched.headers["x-request-id"] == "req-1"
    (request,) = server.requests
    assert (request.method, request.path, request.body) == ("GET", "/api/tags", b"")
    assert request.header("user-agent") == user_agent()
    assert request.header("accept") == "application/json"
    assert request.header("accept-encoding") == "identity"
    assert request.header("content-length") is None
    assert request.header("authorization") is None


def test_an_empty_answer_is_an_empty_body(server, session):
    server.enqueue(Reply(status=204, reason="No Content", framing="length"))
    fetched = _fetch(session, server)
    assert (fetched.status, fetched.body) == (204, b"")


def test_the_connection_is_reused_after_a_complete_answer(server, session):
    server.enqueue(_json({"n": 1}), _json({"n": 2}, framing="chunked"), _json({}))
    bodies = [json.loads(_fetch(session, server).body) for _ in range(3)]
    assert bodies == [{"n": 1}, {"n": 2}, {}]
    assert server.connections_opened == 1


def test_headers_are_added_and_the_key_travels_in_the_auth_object(server, session):
    server.enqueue(_json({}))
    _fetch(
        session,
        server,
        headers={"X-Extra": "1", "User-Agent": "other", "Accept": "text/plain"},
        auth=BearerAuth(Secret(KEY)),
    )
    (request,) = server.requests
    assert request.header("x-extra") == "1"
    assert request.header("accept") == "text/plain"
    assert request.header("user-agent") == user_agent()
    assert request.header("authorization") == f"Bearer {KEY}"


# --- the deadline -------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
def test_a_body_dripping_a_byte_every_50ms_ends_as_timeout_at_the_deadline(
    server, session, framing
):
    server.enqueue(
        Reply(
            headers={"content-type": "application/json"},
            body=b"x" * DRIP_BYTES,
            split=1,
            write_delay=0.05,
            framing=framing,
        )
    )
    error, elapsed = _timed_failure(session, f"{server.url}/api/tags")
    assert error.code == ErrorCode.TIMEOUT
    assert error.message == (
        f"Tester API request to {server.url}/api/tags timed out after 1000ms"
    )
    assert DEADLINE_MS / 1000 <= elapsed < DEADLINE_MS / 1000 + LATE_S < DRIP_S
    assert error.status is None


def test_a_server_that_never_answers_ends_as_timeout_at_the_deadline(server, session):
    server.enqueue(Reply(header_delay=None))
    error, elapsed = _timed_failure(session, server.url)
    assert error.code == ErrorCode.TIMEOUT
    assert DEADLINE_MS / 1000 <= elapsed < DEADLINE_MS / 1000 + LATE_S


class _HeaderDrip:
    """Answers every request with a status line, then one header byte every
    50 ms until the client leaves: no read ever waits long, the headers never
    end."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requested = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.recv(65536)
            self.requested.set()
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nx-slow: ")
                for _ in range(DRIP_BYTES):
                    conn.sendall(b"a")
                    self.sent += 1
                    time.sleep(0.05)
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        self._thread.join(DRIP_S + 5)


@pytest.fixture
def header_drip() -> Iterator[_HeaderDrip]:
    server = _HeaderDrip()
    yield server
    server.close()


def test_headers_dripping_a_byte_every_50ms_end_as_timeout_at_the_deadline(
    header_drip, session
):
    error, elapsed = _timed_failure(session, header_drip.url)
    assert error.code == ErrorCode.TIMEOUT
    assert DEADLINE_MS / 1000 <= elapsed < DEADLINE_MS / 1000 + LATE_S
    assert header_drip.sent > 1, "the server did not drip"


def test_a_refused_connection_is_transport(session):
    error, _ = _timed_failure(session, "http://127.0.0.1:9")
    assert error.code == ErrorCode.TRANSPORT
    assert error.message.startswith("Tester API request to http://127.0.0.1:9 failed")


# --- the size cap -------------------------------------------------------------------


def test_an_announced_body_over_the_cap_is_refused_before_reading(server, session):
    server.enqueue(_json({"models": ["x" * 200]}))
    error, _ = _timed_failure(session, server.url, max_bytes=100)
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert error.message == (
        f"Tester API answer from {server.url} is larger than the 100-byte cap"
    )


def test_an_endless_chunked_body_stops_at_the_default_cap(server, session):
    piece = b"x" * 65536
    pieces = MAX_BODY_BYTES // len(piece) + 64
    server.enqueue(
        Reply(headers={"content-type": "application/json"}, body=(piece,) * pieces)
    )
    error, _ = _timed_failure(session, server.url, timeout_ms=60_000)
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert f"larger than the {MAX_BODY_BYTES}-byte cap" in error.message
    # The connection that carried the rest is closed, never reused.
    server.enqueue(_json({}))
    assert fetch(
        session, server.url, provider="T", endpoint=server.url, timeout_ms=60_000
    ).body == (b"{}")
    assert server.connections_opened == 2


def test_a_body_exactly_at_the_cap_is_returned(server, session):
    server.enqueue(Reply(body=b"y" * 100, framing="chunked", split=7))
    assert _fetch(session, server, max_bytes=100).body == b"y" * 100


# --- abort --------------------------------------------------------------------------


def test_an_abort_ends_a_dripping_answer_at_once(server, session):
    server.enqueue(Reply(body=b"x" * DRIP_BYTES, split=1, write_delay=0.05))
    controller = AbortController()
    aborted_at: list[float] = []

    def abort() -> None:
        server.wait_for_requests(1, timeout=30)
        aborted_at.append(time.monotonic())
        controller.abort()

    thread = threading.Thread(target=abort, daemon=True)
    thread.start()
    error, _ = _timed_failure(
        session, server.url, timeout_ms=60_000, signal=controller.signal
    )
    ended = time.monotonic()
    thread.join(5)
    assert error.code == ErrorCode.ABORTED
    assert error.message == "Tester request aborted by caller"
    assert ended - aborted_at[0] < LATE_S


def test_an_abort_ends_headers_that_never_come(server, session):
    server.enqueue(Reply(header_delay=None))
    controller = AbortController()
    thread = threading.Thread(
        target=lambda: (server.wait_for_requests(1, timeout=30), controller.abort()),
        daemon=True,
    )
    thread.start()
    error, elapsed = _timed_failure(
        session, server.url, timeout_ms=60_000, signal=controller.signal
    )
    thread.join(5)
    assert error.code == ErrorCode.ABORTED
    assert elapsed < 30


def test_an_aborted_signal_sends_nothing(server, session):
    controller = AbortController()
    controller.abort()
    error, _ = _timed_failure(session, server.url, signal=controller.signal)
    assert error.code == ErrorCode.ABORTED
    assert server.requests == ()


# --- HTTP errors --------------------------------------------------------------------


def test_an_http_error_goes_through_the_default_classifier_redacted(server, session):
    body = {"error": {"message": f"Incorrect API key provided: {KEY}"}}
    server.enqueue(_json(body, status=401, reason="Unauthorized"))
    error, _ = _timed_failure(session, server.url, auth=BearerAuth(Secret(KEY)))
    assert (error.code, error.status, error.request_id) == (
        ErrorCode.AUTH,
        401,
        "req-1",
    )
    assert error.message == "Incorrect API key provided: ***"
    assert KEY not in str(error.__cause__)


def test_an_http_error_goes_through_a_familys_classifier(server, session):
    seen: list[bytes] = []

    def classify(status: int, headers: Any, body: bytes, *, redact: Redact) -> LlmError:
        seen.append(body)
        return LlmError(redact(f"family says {status}"), "FAMILY_CODE", status=status)

    server.enqueue(Reply(status=503, reason="Busy", body=b"later", framing="length"))
    error, _ = _timed_failure(session, server.url, classify_error=classify)
    assert (error.code, error.message, error.status) == (
        "FAMILY_CODE",
        "family says 503",
        503,
    )
    assert seen == [b"later"]


def test_an_error_body_that_never_ends_is_still_bounded(server, session):
    server.enqueue(
        Reply(status=500, reason="Oops", body=(b"{", Stall()), framing="chunked")
    )
    error, elapsed = _timed_failure(session, server.url)
    # The answer was not complete within the deadline, whatever its status.
    assert (error.code, error.status) == (ErrorCode.TIMEOUT, None)
    assert DEADLINE_MS / 1000 <= elapsed < DEADLINE_MS / 1000 + LATE_S


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"timeout_ms": 0}, "timeout_ms"),
        ({"timeout_ms": float("nan")}, "timeout_ms"),
        ({"max_bytes": -1}, "max_bytes"),
        ({"max_bytes": 1.5}, "max_bytes"),
    ],
)
def test_bad_bounds_are_value_errors(session, options, match):
    options.setdefault("timeout_ms", DEADLINE_MS)
    with pytest.raises(ValueError, match=match):
        fetch(session, "http://127.0.0.1:9", provider="T", endpoint="x", **options)
