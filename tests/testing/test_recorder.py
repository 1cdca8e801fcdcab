"""The recording proxy against loopback upstreams: pieces reach the client as
they arrive, every read is recorded with its time, every byte survives, and the
key never reaches the file."""

from __future__ import annotations

import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator

import attrs
import pytest
import requests

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import create_user_message
from dsh_llm.serde import chunk_to_dict
from dsh_llm.testing import Cassette
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Mark
from dsh_llm.testing import Pause
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import record
from dsh_llm.testing import record_call
from dsh_llm.testing import replay_chunks
from dsh_llm.testing import sse_event
from dsh_llm.testing import sse_events

from .adapters import openai_compat

KEY = "sk-proj-9Zq8Yw7Xv6Ut5Sr4Qp3O"


def _delta(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def _stop() -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


def _options() -> GenerateOptions:
    return GenerateOptions(
        provider="local", model="m", messages=(create_user_message("hi"),)
    )


def _read_until(base_url: str, first: bytes, last: bytes) -> float:
    """POST through a raw socket (no client-side buffering); return when
    ``first`` arrived, after reading on until ``last``."""
    port = int(base_url.rsplit(":", 1)[1].split("/", 1)[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
            b"content-length: 2\r\n\r\n{}"
        )
        received, first_at = b"", None
        while last not in received:
            data = sock.recv(65536)
            assert data, "the proxy closed before the end"
            received += data
            if first_at is None and first in received:
                first_at = time.perf_counter()
    assert first_at is not None
    return first_at


@pytest.fixture
def upstream() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
def test_the_client_gets_the_first_event_before_the_upstream_sends_the_next(
    upstream, tmp_path, framing
):
    first, rest = sse_event(_delta("Hel")), sse_events([_delta("lo"), _stop()])
    upstream.enqueue(
        Reply(
            body=(first, Pause(seconds=0.5), Mark(name="second"), *rest),
            framing=framing,
        )
    )
    with record(f"{upstream.url}/v1", tmp_path) as rec:
        first_at = _read_until(rec.base_url, b'"Hel"', b"[DONE]")
    assert first_at < upstream.marks["second"]
    (path,) = rec.paths
    cassette = Cassette.load(path)
    reads = cassette.response.reads
    # The first read is the first event alone; later ones may coalesce (one
    # socket read brought them), but every byte is there.
    assert reads[0].data == first
    assert b"".join(r.data for r in reads) == first + b"".join(rest)
    # The recorded offsets show the pause, in order.
    assert reads[1].at_ms - reads[0].at_ms >= 400
    assert [r.at_ms for r in reads] == sorted(r.at_ms for r in reads)
    assert cassette.request.url == f"{upstream.url}/v1/chat/completions"
    assert cassette.base_path == "/v1"


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
def test_non_ascii_text_round_trips_exactly_through_record_and_replay(
    upstream, tmp_path, framing
):
    body = b"".join(sse_events([_delta("café ☕ "), _delta("naïve"), _stop()]))
    # 1-byte writes: reads split é, ☕ and ï between them.
    upstream.enqueue(Reply(body=body, split=1, framing=framing))
    path = tmp_path / "cafe.jsonl"
    live = record_call(openai_compat, _options(), path, upstream=f"{upstream.url}/v1")
    cassette = Cassette.load(path)
    assert cassette.response.framing == framing
    assert cassette.response.body == body
    assert cassette.response.ended == "complete"
    replayed = replay_chunks(path, openai_compat)
    assert [chunk_to_dict(c) for c in replayed] == [chunk_to_dict(c) for c in live]
    text = "".join(c.text for c in live if isinstance(c, TextDelta))
    assert text == "café ☕ naïve"


def test_a_recorded_cassette_never_contains_the_key(upstream, tmp_path):
    echoed = sse_events([_delta(f"you sent {KEY}, "), _delta("bye"), _stop()])
    upstream.enqueue(
        Reply(
            headers={"x-echo-key": KEY, "x-request-id": "req-1"}, body=echoed, split=3
        )
    )
    path = tmp_path / "secret.jsonl"
    record_call(
        lambda url: OpenAICompatAdapter(url, api_key=KEY),
        _options(),
        path,
        upstream=f"{upstream.url}/v1",
        secrets=[KEY],
    )
    assert upstream.requests[0].header("authorization") == f"Bearer {KEY}"
    text = path.read_text(encoding="utf-8")
    assert KEY not in text
    assert KEY[:16] not in text
    assert KEY[-16:] not in text
    cassette = Cassette.load(path)
    assert dict(cassette.request.headers)["authorization"] == "***"
    assert cassette.response.header("x-echo-key") == "***"
    assert b"you sent ***, " in cassette.response.body


QUERY_KEY = "AIzaQueryKey-7Hk2Lm9Np4Qr"
ODD_KEY = "k3y/with+odd=chars&more-0123456789"


def test_the_query_string_of_the_upstream_url_is_forwarded(upstream, tmp_path):
    upstream.enqueue(Reply(body=sse_events([_delta("hi"), _stop()])))
    root = f"{upstream.url}/openai/deployments/gpt/"
    with record(f"{root}?api-version=2024-10-21", tmp_path / "azure.jsonl") as rec:
        assert rec.base_url.endswith("/openai/deployments/gpt?api-version=2024-10-21")
        with OpenAICompatAdapter(rec.base_url) as adapter:
            chunks = list(adapter.stream(_options()))
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.kind == "stop"
    sent = upstream.requests[0].path
    assert sent == "/openai/deployments/gpt/chat/completions?api-version=2024-10-21"
    cassette = Cassette.load(rec.paths[0])
    assert cassette.request.url.endswith("/chat/completions?api-version=2024-10-21")
    assert cassette.base_path == "/openai/deployments/gpt"


def test_a_key_in_the_query_never_reaches_the_cassette(upstream, tmp_path):
    # The upstream echoes the URL it was called with, as error pages do.
    def handler(request: RecordedRequest) -> Reply:
        return Reply(
            headers={"x-called": request.path},
            body=sse_events([_delta(f"called {request.path}"), _stop()]),
        )

    upstream.handler = handler
    path = tmp_path / "keyed.jsonl"
    query = f"api-version=1&key={QUERY_KEY}&code={urllib.parse.quote(ODD_KEY)}"
    record_call(
        lambda url: OpenAICompatAdapter(url),
        _options(),
        path,
        upstream=f"{upstream.url}/v1?{query}",
        secrets=[ODD_KEY],  # named by the caller: not a secret-looking parameter
    )
    assert QUERY_KEY in upstream.requests[0].path  # the key did reach upstream
    text = path.read_text(encoding="utf-8")
    for secret in (QUERY_KEY, ODD_KEY, urllib.parse.quote(ODD_KEY, safe="")):
        assert secret not in text
        assert secret[:16] not in text
    cassette = Cassette.load(path)
    assert "key=***" in cassette.request.url
    assert "code=***" in cassette.request.url
    assert "api-version=1" in cassette.request.url


def test_credentials_in_the_upstream_url_stay_out_of_the_host_header(
    upstream, tmp_path
):
    upstream.enqueue(Reply(body=sse_events([_stop()])))
    netloc = upstream.url.removeprefix("http://")
    with record(f"http://user:Zq7xW@{netloc}/v1", tmp_path / "c.jsonl") as rec:
        requests.post(f"{rec.base_url}/chat/completions", json={}, timeout=10)
    cassette = Cassette.load(rec.paths[0])
    assert dict(cassette.request.headers)["host"] == netloc
    assert "Zq7xW" not in rec.paths[0].read_text(encoding="utf-8")


def test_every_call_becomes_its_own_cassette_in_a_directory(upstream, tmp_path):
    body = sse_events([_delta("a"), _stop()])
    upstream.enqueue(Reply(body=body), Reply(body=body))
    with (
        record(f"{upstream.url}/v1", tmp_path / "calls") as rec,
        OpenAICompatAdapter(rec.base_url) as adapter,
    ):
        list(adapter.stream(_options()))
        list(adapter.stream(_options()))
    assert [p.name for p in rec.paths] == ["call-001.jsonl", "call-002.jsonl"]
    assert all(Cassette.load(p).response.body == b"".join(body) for p in rec.paths)


def test_later_calls_to_a_file_path_are_numbered(upstream, tmp_path):
    upstream.enqueue(
        Reply(body=sse_events([_stop()])), Reply(body=sse_events([_stop()]))
    )
    with record(f"{upstream.url}/v1", tmp_path / "x.jsonl") as rec:
        for _ in range(2):
            requests.post(f"{rec.base_url}/chat/completions", json={}, timeout=10)
    assert [p.name for p in rec.paths] == ["x.jsonl", "x-2.jsonl"]


def test_an_upstream_cut_mid_body_is_recorded_as_cut_and_cut_for_the_client(
    upstream, tmp_path
):
    from dsh_llm.testing import Cut

    upstream.enqueue(Reply(body=(sse_event(_delta("par")), Cut())))
    path = tmp_path / "cut.jsonl"
    with pytest.raises(LlmError) as live:
        record_call(openai_compat, _options(), path, upstream=f"{upstream.url}/v1")
    cassette = Cassette.load(path)
    assert cassette.response.ended == "cut"
    assert cassette.response.body == sse_event(_delta("par"))
    with pytest.raises(LlmError) as replayed:
        replay_chunks(cassette, openai_compat)
    assert replayed.value.code == live.value.code


def test_an_abort_while_the_upstream_is_silent_ends_the_recording_at_once(
    upstream, tmp_path
):
    from dsh_llm.signal import AbortController

    upstream.enqueue(Reply(body=(sse_event(_delta("wait")), Stall(seconds=10))))
    controller = AbortController()
    options = attrs.evolve(_options(), signal=controller.signal)
    path = tmp_path / "aborted.jsonl"
    started = time.monotonic()
    with pytest.raises(LlmError) as caught:
        record_call(
            openai_compat,
            options,
            path,
            upstream=f"{upstream.url}/v1",
            on_chunk=lambda _chunk: controller.abort(),
        )
    # Far below the 10 s stall: the proxy did not wait for the upstream.
    assert time.monotonic() - started < 5
    assert caught.value.code == "ABORTED"
    cassette = Cassette.load(path)
    assert cassette.response.ended == "client-closed"
    assert cassette.response.body == sse_event(_delta("wait"))
    assert upstream.wait_until_idle(timeout=2)


def test_leaving_while_the_upstream_holds_its_headers_does_not_wait(upstream, tmp_path):
    from dsh_llm.signal import AbortController

    upstream.enqueue(Reply(header_delay=None))  # never answers on its own
    controller = AbortController()
    options = attrs.evolve(_options(), signal=controller.signal)
    timer = threading.Timer(0.2, controller.abort)
    timer.start()
    started = time.monotonic()
    with pytest.raises(LlmError) as caught:
        record_call(
            openai_compat,
            options,
            tmp_path / "x.jsonl",
            upstream=f"{upstream.url}/v1",
            upstream_timeout_s=3,
        )
    # Well before the proxy's own 3 s upstream timeout.
    assert time.monotonic() - started < 2
    assert caught.value.code == "ABORTED"
    assert not (tmp_path / "x.jsonl").exists()


def test_an_http_error_is_recorded_and_replays_to_the_same_code(upstream, tmp_path):
    upstream.enqueue(
        Reply(
            status=429,
            reason="Too Many Requests",
            headers={"content-type": "application/json", "retry-after": "3"},
            body=b'{"error":{"message":"slow down","type":"rate_limit_error"}}',
            framing="length",
        )
    )
    path = tmp_path / "429.jsonl"
    with pytest.raises(LlmError) as live:
        record_call(openai_compat, _options(), path, upstream=f"{upstream.url}/v1")
    assert live.value.code == "RATE_LIMIT"
    with pytest.raises(LlmError) as replayed:
        replay_chunks(path, openai_compat)
    assert replayed.value.code == "RATE_LIMIT"
    assert replayed.value.failure.provider_retry_after_ms == 3000


def test_an_unreachable_upstream_gets_a_502_and_no_cassette(tmp_path):
    with LoopbackServer() as gone:
        url = gone.url
    with record(url, tmp_path) as rec:
        response = requests.get(f"{rec.base_url}/models", timeout=10)
    assert response.status_code == 502
    assert rec.paths == ()


def test_an_upstream_url_that_is_not_http_is_refused(tmp_path):
    with pytest.raises(ValueError, match="http"), record("ftp://example.com", tmp_path):
        pass
