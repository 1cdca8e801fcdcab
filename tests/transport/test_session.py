"""The session factory, headers and auth (dsh_llm.transport.session)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import requests

from dsh_llm.credentials import Secret
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.transport.attribution import AppIdentity
from dsh_llm.transport.attribution import attribution_headers
from dsh_llm.transport.session import BearerAuth
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import SocketSlot
from dsh_llm.transport.session import capture_socket
from dsh_llm.transport.session import create_session
from dsh_llm.transport.session import is_header_name
from dsh_llm.transport.session import is_header_value
from dsh_llm.transport.session import is_loopback_host
from dsh_llm.transport.session import stream_headers

from ..proxy_env import use_proxy


def test_stream_headers_carry_attribution_and_ask_for_identity_encoding():
    headers = stream_headers(extra={"X-Trace": "1", "User-Agent": "spoof"})
    assert headers["user-agent"] == attribution_headers()["user-agent"]
    assert headers["accept"] == "text/event-stream"
    assert headers["accept-encoding"] == "identity"
    assert headers["content-type"] == "application/json"
    assert headers["x-trace"] == "1"
    assert "authorization" not in headers


def test_a_white_label_identity_replaces_the_user_agent():
    identity = AppIdentity(product="acme", version="1.0", url="https://acme.test")
    assert (
        stream_headers(identity=identity)["user-agent"]
        == "acme/1.0 (+https://acme.test)"
    )


def test_bearer_auth_sends_the_key_but_never_shows_it():
    auth = BearerAuth(Secret("sk-secret"))
    assert "sk-secret" not in repr(auth)
    prepared = requests.Request("POST", "http://x.test/", auth=auth).prepare()
    assert prepared.headers["authorization"] == "Bearer sk-secret"
    assert (
        "authorization"
        not in requests.Request("POST", "http://x.test/", auth=NoAuth())
        .prepare()
        .headers
    )
    assert repr(NoAuth()) == "NoAuth()"
    assert auth.key == Secret("sk-secret")
    assert repr(auth.key) == "Secret('***')"


@pytest.mark.parametrize(
    "value", ["", "x", "Bearer sk-1", "a \t b", "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"]
)
def test_header_values_sent_as_given(value):
    assert is_header_value(value)
    prepared = requests.Request("GET", "http://x.test/", headers={"x-v": value})
    assert prepared.prepare().headers["x-v"] == value


@pytest.mark.parametrize(
    "value",
    [" x", "x ", "\tx", "x\t", "x\ny", "x\ry", "x\x00", "x\x7f", "\u00e9", "\u20ac", 5],
)
def test_header_values_that_would_be_altered_or_refused(value):
    assert not is_header_value(value)


def test_header_names_are_tokens():
    assert is_header_name("X-Api-Key")
    assert is_header_name("x_custom.v2")
    assert not any(is_header_name(n) for n in ("", "a b", "a:b", "\u00e9", None))


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_pool_size_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="pool_maxsize"):
        create_session(pool_maxsize=bad)


def test_sessions_never_retry_and_use_the_pool_size():
    session = create_session(pool_maxsize=3)
    try:
        adapter = session.get_adapter("http://x.test/")
        assert adapter.max_retries.total == 0
        assert adapter._pool_maxsize == 3  # type: ignore[attr-defined]
    finally:
        session.close()


def test_interrupting_the_captured_socket_ends_a_wait_for_headers():
    with LoopbackServer() as server:
        server.enqueue(Reply(header_delay=None))
        slot = SocketSlot()
        session = create_session()
        result: list[object] = []

        def send() -> None:
            with capture_socket(slot):
                try:
                    session.post(f"{server.url}/", data=b"x", stream=True, timeout=30)
                except requests.RequestException as exc:
                    result.append(exc)

        thread = threading.Thread(target=send)
        thread.start()
        try:
            assert server.wait_for_requests(1)
            deadline = time.monotonic() + 5
            while slot.sock is None and time.monotonic() < deadline:
                time.sleep(0.001)
            assert slot.sock is not None
            slot.interrupt()
            thread.join(5)
            assert not thread.is_alive()
            assert isinstance(result[0], requests.ConnectionError)
            assert server.wait_until_idle()
        finally:
            session.close()


def test_without_capture_nothing_is_attached():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=b"ok", framing="length"))
        slot = SocketSlot()
        session = create_session()
        try:
            session.post(f"{server.url}/", data=b"x", timeout=5).close()
        finally:
            session.close()
        assert slot.sock is None


def test_interrupt_before_attach_shuts_the_socket_on_attach():
    slot = SocketSlot()
    slot.interrupt()
    a, b = socket.socketpair()
    try:
        slot.attach(a)
        assert b.recv(1) == b""
    finally:
        a.close()
        b.close()


# --- proxies ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LocalHost",
        "127.0.0.1",
        "127.0.0.2",
        "127.255.255.254",
        "::1",
        "[::1]",
        "0:0:0:0:0:0:0:1",
    ],
)
def test_loopback_hosts_are_recognised(host):
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host",
    [
        None,
        "",
        "example.invalid",
        "localhost.example.com",
        "notlocalhost",
        "128.0.0.1",
        "126.255.255.255",
        "10.0.0.1",
        "0.0.0.0",
        "::",
        "::2",
        "::ffff:127.0.0.1",
        "[::1",
    ],
)
def test_other_hosts_are_not_loopback(host):
    assert not is_loopback_host(host)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_requests_never_go_through_the_environment_proxy(monkeypatch, host):
    use_proxy(monkeypatch)  # every proxy variable names a port nobody listens on
    with LoopbackServer() as server:
        server.enqueue(Reply(body=b"direct", framing="length"))
        session = create_session()
        try:
            response = session.post(
                f"http://{host}:{server.port}/v1/chat/completions",
                data=b"{}",
                timeout=5,
            )
            with response:
                assert response.content == b"direct"
        finally:
            session.close()
        (request,) = server.requests
        assert request.path == "/v1/chat/completions"
        assert server.wait_until_idle()


def test_a_malformed_url_sent_through_the_transport_adapter_is_a_value_error():
    request = requests.Request("POST", "http://127.0.0.1:1/v1").prepare()
    request.url = "http://[::1/v1"  # past requests' own URL check
    session = create_session()
    try:
        with pytest.raises(ValueError, match="Invalid IPv6 URL"):
            session.get_adapter("http://").send(
                request, proxies={"http": "http://127.0.0.1:9"}, timeout=1
            )
    finally:
        session.close()


def test_other_hosts_still_go_through_the_environment_proxy(monkeypatch):
    with LoopbackServer() as proxy:
        use_proxy(monkeypatch, proxy.url)
        proxy.enqueue(Reply(body=b"via proxy", framing="length"))
        session = create_session()
        try:
            response = session.post(
                "http://example.invalid/v1/chat/completions", data=b"{}", timeout=5
            )
            with response:
                assert response.content == b"via proxy"
        finally:
            session.close()
        # The absolute-form target is what a client sends to a forward proxy.
        (request,) = proxy.requests
        assert request.path == "http://example.invalid/v1/chat/completions"
        assert request.header("host") == "example.invalid"
        assert proxy.wait_until_idle()
