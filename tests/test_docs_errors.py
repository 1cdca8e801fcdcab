"""docs/errors.md lists every known error code with its documented meaning, and
its wording table shows what serde and config say."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final
from typing import Literal

import attrs
import pytest

from dsh_llm.config import ConfigError
from dsh_llm.config import render_problems
from dsh_llm.config import structure_config
from dsh_llm.errors import ERROR_CODES
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.serde import chunk_from_dict

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"


def _rows() -> dict[str, tuple[str, str]]:
    rows: dict[str, tuple[str, str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            code, when, retry = (cell.strip() for cell in line.strip("|").split(" | "))
            rows[code.strip("`")] = (when, retry)
    return rows


def test_every_error_code_is_documented_with_its_meaning_and_retry_advice() -> None:
    rows = _rows()
    assert set(rows) == {code.value for code in ErrorCode}
    for code, info in ERROR_CODES.items():
        when, retry = rows[code.value]
        assert when == info.when
        assert retry == ("yes" if info.retry_may_help else "no")


# --- the wording table: serde and config say the same thing -------------------------


@attrs.frozen(kw_only=True)
class _Model:
    id: str


@attrs.frozen(kw_only=True)
class _Policy:
    mode: Literal["normal", "always"]


@attrs.frozen(kw_only=True)
class _Config:
    api_key: str
    base_url: str | None = None
    models: tuple[_Model, ...] = ()
    retry_policy: _Policy | None = None


_WORDING_INPUTS: Final[dict[str, tuple[object, object]]] = {
    "wrong type": (
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": 1}},
        {"apiKey": "k", "models": [{"id": 1}]},
    ),
    "optional field": (
        {"type": "tool-call-delta", "index": 0, "argumentsDelta": "", "name": []},
        {"apiKey": "k", "baseURL": []},
    ),
    "not an object": ([], []),
    "missing key": ({"type": "text-delta", "index": 0}, {}),
    "unknown key": (
        {"type": "text-delta", "index": 0, "text": "", "txt": ""},
        {"api_key": "k"},
    ),
    "unknown tag or choice": (
        {"type": "video"},
        {"apiKey": "k", "retryPolicy": {"mode": "sometimes"}},
    ),
}
"""For each row of the wording table: a bad chunk and a bad ``_Config`` mapping."""


def _wording_rows() -> dict[str, tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## What a message says about bad JSON or config", 1)[1]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and cells[1].startswith("`"):
            rows[cells[0]] = (cells[1].strip("`"), cells[2].strip("`"))
    return rows


def _pattern(shown: str) -> re.Pattern[str]:
    """A documented message as a pattern: ``...`` stands for what is left out."""
    return re.compile(".*".join(re.escape(part) for part in shown.split("...")))


def test_the_wording_table_shows_what_serde_and_config_say() -> None:
    rows = _wording_rows()
    assert set(rows) == set(_WORDING_INPUTS)
    for problem, (chunk, config) in _WORDING_INPUTS.items():
        serde_shown, config_shown = rows[problem]
        with pytest.raises(LlmError) as serde:
            chunk_from_dict(chunk)
        assert _pattern(serde_shown).fullmatch(serde.value.message), problem
        with pytest.raises(ConfigError) as caught:
            structure_config(_Config, config)
        said = [render_problems([found]) for found in caught.value.problems]
        assert any(_pattern(config_shown).fullmatch(one) for one in said), said
