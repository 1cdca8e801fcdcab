"""StreamingCall (dsh_llm.transport.call) against the loopback server: reads as
bytes arrive, status handling, the watchdog, cancellation, reuse and cleanup.
Timeouts are kept small (100-300 ms) so the file runs in a few seconds."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import traceback
from collections.abc import Iterator

import pytest
import requests

from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal
from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.call import redact_url
from dsh_llm.transport.redaction import RedactedCause
from dsh_llm.transport.session import BearerAuth
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import create_session
from dsh_llm.transport.session import stream_headers
from dsh_llm.transport.sse import iter_sse


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture
def session() -> Iterator[requests.Session]:
    s = create_session()
    yield s
    s.close()


def _call(
    session: requests.Session,
    url: str,
    *,
    signal: AbortSignal | None = None,
    idle: float = 2000,
    keepalive: float | None = None,
    total: float | None = None,
    headers: dict[str, str] | None = None,
    auth: requests.auth.AuthBase | None = None,
    query: str = "",
) -> StreamingCall:
    return StreamingCall(
        session,
        url=f"{url}/chat/completions{query}",
        body=b"{}",
        headers=stream_headers(extra=headers),
        auth=NoAuth() if auth is None else auth,
        provider="Test",
        endpoint=url,
        signal=signal,
        idle_timeout_ms=idle,
        keepalive_timeout_ms=keepalive,
        total_timeout_ms=total,
    )


def _read_all(call: StreamingCall) -> bytes:
    data = b""
    try:
        for piece in call.chunks():
            data += piece
    except Exception as exc:
        raise call.failure(exc) from exc
    return data


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_bytes_are_yielded_as_they_arrive(server, session, framing):
    server.enqueue(Reply(body=(b"data: 1\n\n", Stall()), framing=framing))
    with _call(session, server.url, idle=5000) as call:
        call.open()
        # A fixed-size blocking read would wait for 64 KiB or EOF and time out.
        assert next(call.chunks()) == b"data: 1\n\n"


def test_a_complete_body_is_read_and_the_connection_reused(server, session):
    server.enqueue(Reply(body=b"one"), Reply(body=b"two", framing="length"))
    for expected in (b"one", b"two"):
        with _call(session, server.url) as call:
            call.open()
            assert _read_all(call) == expected
            call.finish()
    assert server.connections_opened == 1
    session.close()
    assert server.wait_until_idle()


def test_an_unfinished_body_is_closed_not_reused(server, session):
    server.enqueue(Reply(body=(b"a", Stall())), Reply(body=b"b"))
    with _call(session, server.url) as call:
        call.open()
        next(call.chunks())
    assert server.wait_for_requests(1)
    with _call(session, server.url) as call:
        call.open()
        assert _read_all(call) == b"b"
    assert server.connections_opened == 2


def test_the_request_is_a_post_with_attribution_and_no_redirects(server, session):
    server.enqueue(
        Reply(status=307, reason="Temporary Redirect", headers={"location": "/x"})
    )
    with _call(session, server.url) as call, pytest.raises(LlmError) as caught:
        call.open()
    assert caught.value.code == "HTTP_307"
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/chat/completions"
    assert request.header(
        "user-agent",
    ).startswith("dsh-llm/")
    assert request.header("accept-encoding") == "identity"


def test_non_2xx_reads_the_body_into_the_error(server, session):
    server.enqueue(
        Reply(
            status=429,
            reason="Too Many Requests",
            headers={"retry-after": "2", "x-request-id": "r1"},
            body=b'{"error":{"message":"slow down"}}',
            framing="length",
        )
    )
    with _call(session, server.url) as call, pytest.raises(LlmError) as caught:
        call.open()
    error = caught.value
    assert (error.code, error.message, error.status) == ("RATE_LIMIT", "slow down", 429)
    assert error.failure.provider_retry_after_ms == 2000
    assert error.failure.request_id == "r1"


def test_a_stalled_error_body_still_reports_the_status(server, session):
    server.enqueue(Reply(status=503, reason="Unavailable", body=(b"partial", Stall())))
    with (
        _call(session, server.url, idle=150) as call,
        pytest.raises(LlmError) as caught,
    ):
        call.open()
    assert (caught.value.code, caught.value.status) == ("SERVER", 503)


@pytest.mark.parametrize(
    "reply",
    [Reply(status=204, reason="No Content", framing="length"), Reply(framing="length")],
    ids=["204", "content-length-0"],
)
def test_a_response_without_body_is_empty_response(server, session, reply):
    server.enqueue(reply)
    with _call(session, server.url) as call, pytest.raises(LlmError) as caught:
        call.open()
    assert caught.value.code == ErrorCode.EMPTY_RESPONSE
    assert caught.value.message == "Test API returned no response body"


def test_an_unreachable_endpoint_is_transport_with_the_cause(session):
    url = f"http://127.0.0.1:{_closed_port()}"
    with _call(session, url) as call, pytest.raises(LlmError) as caught:
        call.open()
    assert caught.value.code == ErrorCode.TRANSPORT
    assert (
        caught.value.message == f"Test API request to {url} failed: connection refused"
    )
    assert isinstance(caught.value.__cause__, requests.ConnectionError)


def test_credentials_in_the_url_never_reach_a_message(session):
    url = f"http://user:sk-secret@127.0.0.1:{_closed_port()}"
    with _call(session, url) as call, pytest.raises(LlmError) as caught:
        call.open()
    assert "sk-secret" not in caught.value.message
    assert caught.value.message.startswith("Test API request to http://***@127.0.0.1:")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://a:b@h.test/v1", "https://***@h.test/v1"),
        ("https://h.test/v1?x=a@b", "https://h.test/v1?x=a@b"),
        ("https://h.test?x=a@b", "https://h.test?x=a@b"),
        ("http://u:p@[::1", "<invalid URL>"),
        ("https://h.test", "https://h.test"),
        ("https://h.test/v1?key=s3cret", "https://h.test/v1?key=***"),
        (
            "https://h.test/v1?api-version=2&api_key=s&Token=t&x",
            "https://h.test/v1?api-version=2&api_key=***&Token=***&x",
        ),
        ("https://u:p@h.test/v1?auth=a#f", "https://***@h.test/v1?auth=***#f"),
        ("https://h.test/v1?", "https://h.test/v1?"),
        ("not a url", "not a url"),
    ],
)
def test_redact_url(url, shown):
    assert redact_url(url) == shown


def test_an_invalid_url_is_invalid_request(session):
    with _call(session, "http://[::1") as call, pytest.raises(LlmError) as caught:
        call.open()
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_a_pre_aborted_signal_sends_nothing(server, session):
    controller = AbortController()
    controller.abort()
    with (
        _call(session, server.url, signal=controller.signal) as call,
        pytest.raises(LlmError) as caught,
    ):
        call.open()
    assert caught.value.code == ErrorCode.ABORTED
    assert server.requests == ()


def _abort_soon(controller: AbortController, delay: float = 0.1) -> threading.Timer:
    timer = threading.Timer(delay, controller.abort)
    timer.start()
    return timer


def test_abort_while_waiting_for_headers(server, session):
    server.enqueue(Reply(header_delay=None))
    controller = AbortController()
    timer = _abort_soon(controller)
    start = time.monotonic()
    with (
        _call(session, server.url, signal=controller.signal, idle=10_000) as call,
        pytest.raises(LlmError) as caught,
    ):
        call.open()
    timer.join()
    assert caught.value.code == ErrorCode.ABORTED
    assert time.monotonic() - start < 2
    assert server.wait_until_idle()


def test_abort_while_a_read_is_blocked_closes_the_connection(server, session):
    server.enqueue(Reply(body=(b"data: 1\n\n", Stall())))
    controller = AbortController()
    with _call(session, server.url, signal=controller.signal, idle=10_000) as call:
        call.open()
        reader = _guarded(call)
        assert next(reader) == b"data: 1\n\n"
        timer = _abort_soon(controller)
        start = time.monotonic()
        with pytest.raises(LlmError) as caught:
            next(reader)
        elapsed = time.monotonic() - start
        timer.join()
        # The abort itself closed the connection: the server sees it go away
        # before the call is closed.
        assert server.wait_until_idle()
    assert caught.value.code == ErrorCode.ABORTED
    assert caught.value.message == "Test request aborted by caller"
    assert elapsed < 2


def test_abort_while_the_consumer_thinks_stops_the_next_read(server, session):
    server.enqueue(Reply(body=(b"a" * 10, Pause(seconds=0.05), b"b" * 10, Stall())))
    controller = AbortController()
    with _call(session, server.url, signal=controller.signal) as call:
        call.open()
        reader = call.chunks()
        next(reader)
        time.sleep(0.1)  # the second piece is now buffered
        controller.abort()
        with pytest.raises(LlmError) as caught:
            next(reader)
    assert caught.value.code == ErrorCode.ABORTED
    assert server.wait_until_idle()


def test_idle_timeout_closes_the_body(server, session):
    server.enqueue(Reply(body=(b"data: 1\n\n", Stall())))
    with _call(session, server.url, idle=150) as call:
        call.open()
        with pytest.raises(LlmError) as caught:
            _read_all(call)
    assert caught.value.code == ErrorCode.TIMEOUT
    assert caught.value.message == "Test stream idle timeout after 150ms"
    assert server.wait_until_idle()


def test_idle_timeout_while_waiting_for_headers(server, session):
    server.enqueue(Reply(header_delay=None))
    with (
        _call(session, server.url, idle=150) as call,
        pytest.raises(LlmError) as caught,
    ):
        call.open()
    assert caught.value.code == ErrorCode.TIMEOUT
    assert server.wait_until_idle()


def test_keepalive_comments_keep_an_idle_read_alive(server, session):
    # Four quiet spells of 200 ms, each a third of the idle bound, 800 ms in all.
    body = (
        *(step for _ in range(4) for step in (b": ka\n\n", Pause(seconds=0.2))),
        b"data: [DONE]\n\n",
    )
    server.enqueue(Reply(body=body))
    with _call(session, server.url, idle=600, keepalive=10_000) as call:
        call.open()
        events = list(iter_sse(_guarded(call)))
    assert [e.data for e in events] == ["[DONE]"]


def _guarded(call: StreamingCall) -> Iterator[bytes]:
    try:
        yield from call.chunks()
    except Exception as exc:
        raise call.failure(exc) from exc


def test_keepalive_comments_cannot_hold_a_stream_past_the_keepalive_bound(
    server, session
):
    # A comment every 40 ms, far inside the 1 s idle bound whatever the
    # machine's load, for longer than the 1.5 s keep-alive bound.
    body = tuple(b": ka\n\n" if i % 2 == 0 else Pause(seconds=0.04) for i in range(300))
    server.enqueue(Reply(body=body))
    with _call(session, server.url, idle=1000, keepalive=1500) as call:
        call.open()
        with pytest.raises(LlmError) as caught:
            list(iter_sse(_guarded(call)))
    assert caught.value.code == ErrorCode.TIMEOUT
    assert "no data for 1500ms, only keep-alive comments" in caught.value.message
    assert server.wait_until_idle()


def test_data_events_rearm_the_keepalive_bound(server, session):
    # A data event every 300 ms, a third of the bounds, 1.8 s in all.
    body = []
    for _ in range(6):
        body += [b": ka\n\n", Pause(seconds=0.15), b"data: {}\n\n", Pause(seconds=0.15)]
    body.append(b"data: [DONE]\n\n")
    server.enqueue(Reply(body=tuple(body)))
    with _call(session, server.url, idle=900, keepalive=900) as call:
        call.open()
        count = 0
        for event in iter_sse(_guarded(call)):
            count += 1
            call.note_data()
            assert event.data in ("{}", "[DONE]")
    assert count == 7


def test_total_timeout_bounds_a_stream_that_keeps_sending(server, session):
    server.enqueue(Reply(body=b"data: {}\n\n" * 100, split=10, write_delay=0.02))
    with _call(session, server.url, idle=100, total=200) as call:
        call.open()
        with pytest.raises(LlmError) as caught:
            _consume_noting_data(call)
    assert caught.value.code == ErrorCode.TIMEOUT
    assert caught.value.message == "Test stream exceeded its total timeout of 200ms"


def _consume_noting_data(call: StreamingCall) -> None:
    for _ in iter_sse(_guarded(call)):
        call.note_data()


def test_consumer_think_time_is_not_idle_time(server, session):
    server.enqueue(Reply(body=(b"data: 1\n\n", b"data: 2\n\n", b"data: [DONE]\n\n")))
    with _call(session, server.url, idle=100) as call:
        call.open()
        seen = []
        for event in iter_sse(_guarded(call)):
            seen.append(event.data)
            call.pause()
            time.sleep(0.25)
            call.resume()
    assert seen == ["1", "2", "[DONE]"]


def test_a_reset_mid_chunked_body_is_transport(server, session):
    server.enqueue(Reply(body=(b"data: 1\n\n", Pause(seconds=0.02), Cut(reset=True))))
    with _call(session, server.url) as call:
        call.open()
        with pytest.raises(LlmError) as caught:
            _read_all(call)
    assert caught.value.code == ErrorCode.TRANSPORT
    assert caught.value.message == (
        f"Test API stream from {server.url} failed: connection reset"
    )
    assert caught.value.__cause__ is not None


def test_a_clean_close_mid_chunked_body_is_stream_closed(server, session):
    # A FIN before the zero-size chunk is the same cut as a close-delimited body
    # ending early: the same code, never retried by default.
    server.enqueue(Reply(body=(b"data: 1\n\n", Pause(seconds=0.02), Cut())))
    with _call(session, server.url) as call:
        call.open()
        with pytest.raises(LlmError) as caught:
            _read_all(call)
    assert caught.value.code == ErrorCode.STREAM_CLOSED
    assert caught.value.message == (
        f"Test API stream from {server.url} ended before the end of its chunked body"
    )
    assert caught.value.__cause__ is not None


def test_a_gzip_body_is_decoded(server, session):
    server.enqueue(
        Reply(headers={"content-encoding": "gzip"}, body=gzip.compress(b"data: x\n\n"))
    )
    with _call(session, server.url) as call:
        call.open()
        assert _read_all(call) == b"data: x\n\n"


def test_a_body_that_cannot_be_decompressed_is_malformed_response(server, session):
    server.enqueue(
        Reply(headers={"content-encoding": "gzip"}, body=b"this is not gzip data")
    )
    with _call(session, server.url) as call:
        response = call.open()
        assert call.response is response
        with pytest.raises(LlmError) as caught:
            _read_all(call)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert caught.value.message == (
        f"Test API stream from {server.url} could not be decoded"
    )
    assert caught.value.__cause__ is not None


def test_close_is_idempotent_and_removes_the_abort_listener(server, session):
    server.enqueue(Reply(body=b"x"))
    controller = AbortController()
    call = _call(session, server.url, signal=controller.signal)
    call.open()
    call.close()
    call.close()
    controller.abort()  # nothing left to interrupt; must not raise
    assert server.wait_until_idle()


def test_a_call_never_opened_closes_cleanly(session):
    _call(session, "http://127.0.0.1:9").close()


# --- secrets never reach an error -----------------------------------------------------

SECRET = "sk-HEADERSECRET999"
KEY = "sk-SUPERSECRETKEY1234567890"


def _everything_printed(error: BaseException) -> str:
    """Every string a log or a debugger could show of ``error`` and its chain."""
    parts = ["".join(traceback.format_exception(error))]
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        parts += [str(node), repr(node), repr(getattr(node, "args", ()))]
        pending += [n for n in (node.__cause__, node.__context__) if n is not None]
    return "\n".join(parts)


@pytest.mark.parametrize(
    ("value", "original"),
    [
        (f" {SECRET}", "requests.exceptions.InvalidHeader"),
        (f"{SECRET}\n", "requests.exceptions.InvalidHeader"),
        (f"{SECRET}\u20ac\U0001f600", "UnicodeEncodeError"),
    ],
    ids=["leading-space", "line-break", "not-latin-1"],
)
def test_a_header_value_the_stack_refuses_never_reaches_the_error(
    server, session, value, original
):
    # A header with no secret-looking name: only its type may be shown.
    with (
        _call(session, server.url, headers={"x-custom": value}) as call,
        pytest.raises(LlmError) as caught,
    ):
        call.open()
    error = caught.value
    assert error.code == ErrorCode.INVALID_REQUEST
    assert SECRET not in _everything_printed(error)
    assert isinstance(error.__cause__, RedactedCause)
    assert error.__cause__.type_name == original
    assert error.__context__ is None
    assert server.requests == ()


def test_a_connection_failure_quoting_a_secret_of_the_url_is_redacted(session):
    url = f"http://127.0.0.1:{_closed_port()}"
    with (
        _call(session, url, query=f"?api-key={KEY}") as call,
        pytest.raises(LlmError) as caught,
    ):
        call.open()
    error = caught.value
    assert error.code == ErrorCode.TRANSPORT
    assert KEY not in _everything_printed(error)
    assert isinstance(error.__cause__, RedactedCause)
    assert error.__cause__.type_name == "requests.exceptions.ConnectionError"
    assert "api-key=***" in str(error.__cause__)


def test_an_http_error_echoing_the_key_is_redacted(server, session):
    body = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": 1}}
    server.enqueue(Reply(status=401, body=json.dumps(body).encode(), framing="length"))
    auth = BearerAuth(Secret(KEY))
    with (
        _call(session, server.url, auth=auth) as call,
        pytest.raises(LlmError) as caught,
    ):
        call.open()
    error = caught.value
    assert (error.code, error.message) == ("AUTH", "Incorrect API key provided: ***")
    assert KEY not in _everything_printed(error)
    assert "Incorrect API key provided: ***" in str(error.__cause__)
    assert server.requests[0].header("authorization") == f"Bearer {KEY}"


def test_an_http_error_echoing_a_secret_header_is_redacted(server, session):
    server.enqueue(
        Reply(status=403, body=f"bad x-api-key {SECRET}".encode(), framing="length")
    )
    with (
        _call(session, server.url, headers={"X-Api-Key": SECRET}) as call,
        pytest.raises(LlmError) as caught,
    ):
        call.open()
    assert caught.value.code == ErrorCode.AUTH
    assert SECRET not in _everything_printed(caught.value)
    assert str(caught.value.__cause__) == "bad x-api-key ***"


# --- the end of the body --------------------------------------------------------------


def test_finish_closes_a_chunked_body_left_open_after_the_last_event(server, session):
    server.enqueue(
        Reply(body=(b"data: [DONE]\n\n", Stall(seconds=5))), Reply(body=b"next")
    )
    with _call(session, server.url) as call:
        call.open()
        assert next(call.chunks()) == b"data: [DONE]\n\n"
        started = time.monotonic()
        call.finish()
        waited = time.monotonic() - started
    # The old drain waited a whole second; the grace is 50 ms.
    assert waited < 0.5
    assert server.wait_until_idle(2)
    with _call(session, server.url) as call:
        call.open()
        assert _read_all(call) == b"next"
        call.finish()
    assert server.connections_opened == 2


def test_finish_stops_reading_junk_sent_after_the_last_event(server, session):
    junk = tuple(step for _ in range(200) for step in (b"junk\n", Pause(seconds=0.01)))
    server.enqueue(Reply(body=(b"data: [DONE]\n\n", *junk)))
    with _call(session, server.url) as call:
        call.open()
        next(call.chunks())
        started = time.monotonic()
        call.finish()
        assert time.monotonic() - started < 0.5
    assert server.wait_until_idle(2)


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_a_prompt_server_s_connection_is_reused_after_finish(server, session, framing):
    server.enqueue(
        Reply(body=b"data: [DONE]\n\n", framing=framing),
        Reply(body=b"again", framing=framing),
    )
    with _call(session, server.url) as call:
        call.open()
        next(call.chunks())
        call.finish()
    with _call(session, server.url) as call:
        call.open()
        assert _read_all(call) == b"again"
        call.finish()
    assert server.connections_opened == 1


# --- a 2xx answer that is not a stream ------------------------------------------------


def test_a_json_answer_with_an_error_report_is_classified(server, session):
    body = {"error": {"message": "invalid api key", "type": "authentication_error"}}
    server.enqueue(
        Reply(
            headers={"content-type": "application/json; charset=utf-8"},
            body=json.dumps(body).encode(),
            framing="length",
        )
    )
    with _call(session, server.url) as call, pytest.raises(LlmError) as caught:
        call.open()
    assert (caught.value.code, caught.value.message) == ("AUTH", "invalid api key")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (
            "application/json",
            b'{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}',
        ),
        ("text/html", b"<html><body>502 Bad Gateway</body></html>"),
        ("TEXT/HTML; charset=iso-8859-1", b"<html></html>"),
    ],
)
def test_a_json_or_html_answer_is_malformed_response(
    server, session, content_type, body
):
    server.enqueue(Reply(headers={"content-type": content_type}, body=body))
    with _call(session, server.url) as call, pytest.raises(LlmError) as caught:
        call.open()
    media = content_type.partition(";")[0].lower()
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert caught.value.message == (
        f"Test API answered {media} instead of an event stream "
        "(does the server support streaming?)"
    )
    assert str(caught.value.__cause__) == body.decode()


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-ndjson", ""])
def test_other_content_types_are_streamed(server, session, content_type):
    server.enqueue(Reply(headers={"content-type": content_type}, body=b"data: 1\n\n"))
    with _call(session, server.url) as call:
        call.open()
        assert _read_all(call) == b"data: 1\n\n"
