"""The kit run on the shipped adapters: ``assert_adapter_conforms`` with
``DeepSeekAdapter`` and ``OpenAICompatAdapter`` on the cassettes converted from
their ``.sse`` fixtures and on the ones recorded from a real llama.cpp server.

Every group runs, ``truncation`` (the same cut gets the same code whatever the
framing) and ``end-marker`` (``data: [DONE]`` before any ``finish_reason`` is
never a clean finish) included: the two adapter bugs of issue 13 they caught are
fixed."""

from __future__ import annotations

import pytest

from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import StreamChunk
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.testing import Cassette
from dsh_llm.testing import assert_adapter_conforms
from dsh_llm.testing.conformance import GROUPS
from dsh_llm.testing.replay import replay_base_url
from dsh_llm.testing.replay import replay_options
from dsh_llm.testing.replay import replay_server
from dsh_llm.validator import validate_stream

from .adapters import FACTORIES
from .adapters import openai_compat
from .sse_cassettes import CASSETTES
from .sse_cassettes import CONVERTED
from .sse_cassettes import FIXTURES
from .sse_cassettes import cassette_for
from .sse_cassettes import cassette_path

CASES = [(family, name) for family, names in CONVERTED.items() for name in names]
IDS = [f"{family}/{name}" for family, name in CASES]
LLAMACPP = sorted(p.stem for p in (CASSETTES / "llamacpp").glob("*.jsonl"))


@pytest.mark.parametrize(("family", "name"), CASES, ids=IDS)
def test_converted_cassette_matches_its_sse_fixture(family, name):
    committed = Cassette.load(cassette_path(family, name))
    assert committed == cassette_for(family, name)
    assert committed.response.body == (FIXTURES / family / f"{name}.sse").read_bytes()


def _consumed(family: str, name: str) -> list[StreamChunk]:
    """What a runtime consumer sees for a replayed cassette: the adapter's chunks,
    ended by the error finish of an ``LlmError`` it raises; strictly validated."""
    cassette = Cassette.load(cassette_path(family, name))
    chunks: list[StreamChunk] = []
    with (
        replay_server(cassette) as server,
        FACTORIES[family](replay_base_url(server, cassette)) as adapter,
    ):
        try:
            chunks.extend(adapter.stream(replay_options(cassette)))
        except LlmError as error:
            chunks.append(Finish(reason=FinishReason.error(error.failure)))
    return list(validate_stream(chunks, strict=True))


@pytest.mark.parametrize(("family", "name"), CASES, ids=IDS)
def test_cassette_replays_to_the_fixture_chunks(family, name):
    expected = [
        chunk_to_dict(c)
        for c in read_jsonl(str(FIXTURES / family / f"{name}.chunks.jsonl"))
    ]
    assert [chunk_to_dict(c) for c in _consumed(family, name)] == expected


@pytest.mark.parametrize(("family", "name"), CASES, ids=IDS)
def test_shipped_adapter_conforms(family, name):
    report = assert_adapter_conforms(
        FACTORIES[family], cassette_path(family, name), groups=GROUPS
    )
    assert "stall after half the events" in report.variants
    assert "abort while waiting" in report.variants
    assert "http 429 with Retry-After" in report.variants


@pytest.mark.parametrize("name", LLAMACPP)
def test_llamacpp_recording_conforms(name):
    report = assert_adapter_conforms(
        openai_compat,
        CASSETTES / "llamacpp" / f"{name}.jsonl",
        groups=GROUPS,
    )
    assert report.variants[0] == "recorded"
