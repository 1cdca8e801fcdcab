"""docs/errors.md lists every known error code with its documented meaning."""

from __future__ import annotations

from pathlib import Path

from dsh_llm.errors import ERROR_CODES, ErrorCode

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
