"""Loopback servers for the batch tests: an OpenAI-compatible echo server that
counts the requests it is handling at once, and the runtime that talks to it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events

ROUTE = "local"
MODEL = "echo-1"
FAST_RETRIES = {
    "mode": "normal",
    "maxRetries": 3,
    "backoff": {"initialDelayMs": 1, "maxDelayMs": 5000, "jitterRatio": 0},
}


def text_reply(
    text: str, *, prompt_tokens: int = 5, completion_tokens: int = 2
) -> Reply:
    """A chat-completions stream answering ``text`` and ending ``stop``."""

    def event(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    usage = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": MODEL,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return Reply(
        body=sse_events(
            [event({"role": "assistant", "content": text}), event({}, "stop"), usage]
        )
    )


def prompt_of(request: RecordedRequest) -> str:
    """The text of the last message of a chat-completions request."""
    body = request.json()
    content = body["messages"][-1]["content"]
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


class EchoServer:
    """Answers ``echo: <prompt>`` after ``delay`` seconds, counting the requests
    it is handling at once; a prompt in ``rate_limited`` gets one 429 with
    ``retry-after-ms`` first (at once), one in ``replies`` that reply instead."""

    def __init__(self, *, delay: float = 0.0, retry_after_ms: int = 300) -> None:
        self.delay = delay
        self.retry_after_ms = retry_after_ms
        self.rate_limited: set[str] = set()
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.arrivals: list[tuple[float, str]] = []
        self.replies: dict[str, Callable[[], Reply]] = {}
        self.server = LoopbackServer(handler=self.handle)

    def handle(self, request: RecordedRequest) -> Reply:
        prompt = prompt_of(request)
        with self.lock:
            self.arrivals.append((time.monotonic(), prompt))
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            limited = prompt in self.rate_limited
            self.rate_limited.discard(prompt)
        try:
            if self.delay and not limited:
                time.sleep(self.delay)
            if limited:
                return Reply(
                    status=429,
                    reason="Too Many Requests",
                    headers={
                        "content-type": "application/json",
                        "retry-after-ms": str(self.retry_after_ms),
                    },
                    body=b'{"error":{"message":"slow down","type":"rate_limit"}}',
                    framing="length",
                )
            special = self.replies.get(prompt)
            return special() if special is not None else text_reply(f"echo: {prompt}")
        finally:
            with self.lock:
                self.active -= 1

    def __enter__(self) -> EchoServer:
        self.server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.stop()

    @property
    def url(self) -> str:
        """The API root the adapter is given."""
        return f"{self.server.url}/v1"


@contextmanager
def echo_runtime(
    url: str, *, retry_policy: Any = None, pool_maxsize: int = 16
) -> Iterator[LlmRuntime]:
    """An ``LlmRuntime`` with an ``OpenAICompatAdapter`` on ``ROUTE`` at ``url``."""
    adapter = OpenAICompatAdapter(
        url,
        models=[MODEL],
        retry_policy=FAST_RETRIES if retry_policy is None else retry_policy,
        pool_maxsize=pool_maxsize,
    )
    runtime = LlmRuntime()
    registration = runtime.register_adapter([ROUTE], adapter)
    try:
        yield runtime
    finally:
        registration.dispose()
        adapter.close()


def write_config(path: Path, url: str, *extra: str) -> Path:
    """A composition file registering the ``llm-openai-compatible`` plugin on
    ``ROUTE`` at ``url``; ``extra`` lines go into its config."""
    lines = [
        "- id: local",
        "  name: llm-openai-compatible",
        "  config:",
        f"    providers: [{ROUTE}]",
        f"    baseURL: {url}",
        f"    models: [{MODEL}]",
        *(f"    {line}" for line in extra),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_requests(path: Path, rows: list[Any]) -> Path:
    """Write ``rows`` as JSON Lines (a ``str`` row is written as it is)."""
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(row if isinstance(row, str) else json.dumps(row))
            out.write("\n")
    return path


def prompts(count: int, *, start: int = 0) -> list[dict[str, Any]]:
    """``count`` prompt requests with ids ``r<n>``."""
    return [
        {"id": f"r{n}", "provider": ROUTE, "model": MODEL, "prompt": f"p{n}"}
        for n in range(start, start + count)
    ]


def result_rows(path: Path) -> list[dict[str, Any]]:
    """Every line of a results file, decoded."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]
