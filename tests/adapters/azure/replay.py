"""The Azure OpenAI fixtures (``tests/fixtures/azure``), written from Azure's
documentation: SSE bodies (``chat_*.sse`` on the chat-completions wire,
``responses_*.sse`` on the Responses API) beside the chunks each must give
(``<name>.chunks.jsonl``), and HTTP error answers (``http_*.json``: status,
headers, body and the code, retry delay and request id they must give)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "azure"


def stream_names(wire: str) -> list[str]:
    """The SSE fixtures of ``wire`` (``chat`` or ``responses``), by name."""
    return sorted(path.stem for path in FIXTURES.glob(f"{wire}_*.sse"))


def error_names() -> list[str]:
    """The HTTP error fixtures, by name."""
    return sorted(path.stem for path in FIXTURES.glob("http_*.json"))


def body(name: str) -> bytes:
    """The SSE body of fixture ``name``."""
    return (FIXTURES / f"{name}.sse").read_bytes()


def expected(name: str) -> list[dict[str, Any]]:
    """The chunks (as ``chunk_to_dict`` gives them) fixture ``name`` must give."""
    text = (FIXTURES / f"{name}.chunks.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def error_case(name: str) -> dict[str, Any]:
    """HTTP error fixture ``name``."""
    case: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text("utf-8"))
    return case
