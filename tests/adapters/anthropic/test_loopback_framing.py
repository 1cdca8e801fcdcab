"""The recorded Anthropic streams read over real HTTP from a loopback server, in
each framing, fed to ``SseDecoder`` from ``raw.read1`` as the transport does, give
the same chunks as the recorded expectation. (The adapter's own read loop, with
its watchdog and abort checks, is tested with the adapter.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from typing import Literal

import pytest
import requests

from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.validator import assert_chunk_sequence

from .replay import FIXTURES
from .replay import fixture_names
from .replay import replay

NAMES = fixture_names()


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def _read1(response: requests.Response) -> Iterator[bytes]:
    while True:
        data = response.raw.read1(65536)
        if not data:
            return
        yield data


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_over_http_gives_its_expected_chunks(
    server: LoopbackServer, name: str, framing: Literal["chunked", "close", "length"]
) -> None:
    body = (FIXTURES / f"{name}.sse").read_bytes()
    server.enqueue(Reply(body=body, framing=framing, split=7))
    with requests.post(f"{server.url}/v1/messages", stream=True, timeout=10) as reply:
        assert reply.status_code == 200
        chunks = replay(_read1(reply))
    assert_chunk_sequence(chunks, strict=True)
    wanted: list[dict[str, Any]] = [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]
    assert [chunk_to_dict(c) for c in chunks] == wanted
