"""``logging_middleware`` over a real adapter: one line per call, written when
the stream ends, naming route, model, attempt, timings, usage and outcome, and
never the key or the content unless asked."""

from __future__ import annotations

import logging

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.observe.logging import DEFAULT_LOGGER
from dsh_llm.observe.logging import logging_middleware
from dsh_llm.observe.watch import CallRecord
from dsh_llm.routing import retrying
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer

from .replies import SECRET_ANSWER
from .replies import SECRET_PROMPT
from .replies import answer
from .replies import cut_after_text
from .replies import options
from .replies import slow_answer
from .replies import status

KEY = "sk-live-0123456789abcdef"


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == DEFAULT_LOGGER]


def test_one_info_line_per_call_without_key_or_content(
    server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    runtime = LlmRuntime()
    with OpenAICompatAdapter(f"{server.url}/v1", api_key=KEY) as adapter:
        runtime.register_adapter(["local"], adapter)
        runtime.use(logging_middleware())
        server.enqueue(answer())
        stream = runtime.stream(options(system="a private system prompt"))
        next(stream)
        assert _records(caplog) == []  # not written while the stream runs
        list(stream)

    assert server.requests[0].header("authorization") == f"Bearer {KEY}"
    (record,) = _records(caplog)
    line = record.getMessage()
    assert record.levelno == logging.INFO
    assert line.startswith('llm call route="local" model="model-a" attempt=1 ttfc_ms=')
    assert (
        "usage=[in=6 out=6 cache_read=4 cache_write=- reasoning=2] finish=stop" in line
    )
    everything = caplog.text + repr(record.__dict__)
    for secret in (KEY, SECRET_PROMPT, SECRET_ANSWER, "private system"):
        assert secret not in everything
    call = record.llm_call  # type: ignore[attr-defined]
    assert isinstance(call, CallRecord)
    assert call.time_to_first_chunk_s is not None
    assert 0 < call.time_to_first_chunk_s <= call.duration_s


def test_content_is_logged_only_when_asked(
    runtime: LlmRuntime, server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    runtime.use(logging_middleware(include_content=True, max_content_chars=9))
    server.enqueue(answer())

    list(runtime.stream(options()))

    (record,) = _records(caplog)
    assert record.getMessage().endswith(f" content={SECRET_ANSWER[:9]!r}")
    assert SECRET_PROMPT not in caplog.text


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [(status(503), "error=SERVER"), (cut_after_text(), "error=TRANSPORT")],
)
def test_a_failed_call_is_a_warning_naming_its_code(
    runtime: LlmRuntime,
    server: LoopbackServer,
    caplog: pytest.LogCaptureFixture,
    reply: object,
    outcome: str,
) -> None:
    caplog.set_level(logging.INFO)
    runtime.use(logging_middleware())
    server.enqueue(reply)  # type: ignore[arg-type]

    list(runtime.stream(options()))

    (record,) = _records(caplog)
    assert record.levelno == logging.WARNING
    assert record.getMessage().endswith(outcome)


def test_a_stream_closed_early_is_logged_as_closed(
    runtime: LlmRuntime, server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    runtime.use(logging_middleware())
    server.enqueue(slow_answer())
    stream = runtime.stream(options())
    for chunk in stream:
        if chunk.type == "text-delta":
            break
    stream.close()

    (record,) = _records(caplog)
    assert record.getMessage().endswith("usage=[none] finish=closed")


def test_inside_retrying_each_attempt_has_its_line(
    runtime: LlmRuntime, server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    runtime.use(
        retrying({"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 2}})
    )
    runtime.use(logging_middleware())
    server.enqueue(status(503), answer())

    list(runtime.stream(options()))

    lines = [r.getMessage() for r in _records(caplog)]
    assert [("attempt=1" in lines[0]), ("attempt=2" in lines[1])] == [True, True]
    assert lines[0].endswith("error=SERVER")
    assert lines[1].endswith("finish=stop")
