"""``StreamingCall``'s two general hooks: any auth object's ``secret`` is redacted
from server text (``ApiKeyAuth`` sends it in its own header), and a wire family's
``classify_error`` builds the error of a non-2xx answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from collections.abc import Mapping

import pytest
import requests

from dsh_llm.credentials import Secret
from dsh_llm.errors import LlmError
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.http_errors import Redact
from dsh_llm.transport.session import ApiKeyAuth
from dsh_llm.transport.session import create_session
from dsh_llm.transport.session import stream_headers

KEY = "sk-ant-hook-0123456789"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with create_session() as s:
        yield s


def _call(
    session: requests.Session, url: str, auth: requests.auth.AuthBase, **extra: object
) -> StreamingCall:
    return StreamingCall(
        session,
        url=f"{url}/v1/messages",
        body=b"{}",
        headers=stream_headers(),
        auth=auth,
        provider="Test",
        endpoint=url,
        signal=None,
        idle_timeout_ms=2000,
        keepalive_timeout_ms=None,
        total_timeout_ms=None,
        **extra,  # type: ignore[arg-type]
    )


def _open_error(call: StreamingCall) -> LlmError:
    with call, pytest.raises(LlmError) as caught:
        call.open()
    return caught.value


def test_api_key_auth_sends_its_header_and_hides_the_key_in_its_repr() -> None:
    auth = ApiKeyAuth(Secret(KEY), header="x-goog-api-key")
    assert KEY not in repr(auth)
    assert auth.secret == Secret(KEY)
    prepared = requests.Request("POST", "http://127.0.0.1/", auth=auth).prepare()
    assert prepared.headers["x-goog-api-key"] == KEY
    assert "authorization" not in {name.lower() for name in prepared.headers}


def test_the_secret_of_an_api_key_auth_is_redacted_from_an_echoing_error(
    server: LoopbackServer, session: requests.Session
) -> None:
    body = {"error": {"type": "authentication_error", "message": f"bad key {KEY}"}}
    server.enqueue(Reply(status=401, body=json.dumps(body).encode(), framing="length"))
    error = _open_error(_call(session, server.url, ApiKeyAuth(Secret(KEY))))
    assert (error.code, error.message) == ("AUTH", "bad key ***")
    assert KEY not in str(error.__cause__)
    assert server.requests[0].header("x-api-key") == KEY


class _CustomAuth(requests.auth.AuthBase):
    """Any auth object naming its ``secret`` is redacted, not only ours."""

    secret = KEY

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["x-custom"] = f"token={KEY}"
        return request


def test_a_secret_attribute_of_any_auth_object_is_redacted(
    server: LoopbackServer, session: requests.Session
) -> None:
    server.enqueue(Reply(status=403, body=f"echo {KEY}".encode(), framing="length"))
    error = _open_error(_call(session, server.url, _CustomAuth()))
    assert KEY not in error.message
    assert KEY not in str(error.__cause__)
    assert "echo ***" in str(error.__cause__)


def test_classify_error_builds_the_error_of_a_non_2xx_answer_with_redaction(
    server: LoopbackServer, session: requests.Session
) -> None:
    seen: list[tuple[int, str, bytes]] = []

    def classify(
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        redact: Redact,
    ) -> LlmError:
        seen.append((status, headers.get("request-id", ""), body))
        return LlmError(redact(f"Test said {body.decode()}"), "OVERLOADED_X")

    server.enqueue(
        Reply(
            status=529,
            body=f"busy {KEY}".encode(),
            headers={"request-id": "req_1"},
            framing="length",
        )
    )
    error = _open_error(
        _call(session, server.url, ApiKeyAuth(Secret(KEY)), classify_error=classify)
    )
    assert seen == [(529, "req_1", f"busy {KEY}".encode())]
    assert (error.code, error.message) == ("OVERLOADED_X", "Test said busy ***")
