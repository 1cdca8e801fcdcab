"""Tests for the ``dsh-llm validate`` and ``dsh-llm trace`` subcommands, in process
through ``dsh_llm.cli.main`` and as a real ``python -m dsh_llm`` process."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_llm.cli import main
from dsh_llm.serde import read_jsonl

STREAMS = Path(__file__).parents[1] / "fixtures" / "streams"
VALID = ("text.jsonl", "tool_call.jsonl", "error_open_block.jsonl")


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "dsh_llm", *args],
        capture_output=True,
        input=stdin,
        timeout=60,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode("utf-8"),
        result.stderr.decode("utf-8"),
    )


def set_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    """Replace ``sys.stdin`` with a text stream over ``data`` (with ``.buffer``,
    as the real one has)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), "utf-8"))


# --- validate ----------------------------------------------------------------


@pytest.mark.parametrize("name", VALID)
def test_validate_prints_a_one_line_summary_for_a_valid_stream(name, capsys):
    path = str(STREAMS / name)
    assert main(["validate", path]) == 0
    captured = capsys.readouterr()
    chunks = list(read_jsonl(path))
    blocks = sum(c.type == "block-start" for c in chunks)
    assert captured.out.splitlines() == [
        f"{path}: valid (strict): {len(chunks)} chunks, "
        f"{blocks} {'block' if blocks == 1 else 'blocks'}, "
        f"finish {chunks[-1].reason.kind}"  # type: ignore[union-attr]
    ]
    assert captured.err == ""


def test_validate_exits_1_with_the_violation(capsys):
    path = str(STREAMS / "tool_call_with_stop.jsonl")
    assert main(["validate", path]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        "error[INVARIANT]: chunk #5 (finish): tool-call block with a stop finish"
    )


def test_validate_is_strict_by_default_and_lenient_on_request(capsys):
    path = str(STREAMS / "interleaved.jsonl")
    assert main(["validate", path]) == 1
    assert "blocks interleaved" in capsys.readouterr().err
    assert main(["validate", "--lenient", path]) == 0
    assert capsys.readouterr().out == (
        f"{path}: valid (lenient): 8 chunks, 2 blocks, finish stop\n"
    )


def test_validate_reports_an_empty_file_as_a_missing_finish(tmp_path, capsys):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    assert main(["validate", str(path)]) == 1
    assert "finish missing" in capsys.readouterr().err


def test_validate_exits_2_naming_the_bad_line(capsys):
    path = str(STREAMS / "not_chunks.jsonl")
    assert main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error[INVALID_CHUNK]: {path} is not JSON Lines of chunks")
    assert "line 2" in err
    assert "$.text" in err


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"not json at all\n", "line 1: invalid chunk: not JSON"),
        (
            b'{"type":"usage","usage":{"inputTokens":1,"outputTokens":1}}\n\xff\n',
            "line 2",
        ),
        (b"[1, 2]\n", "line 1: invalid chunk: $ must be a mapping, got a list"),
    ],
    ids=["text", "not-utf8", "array"],
)
def test_validate_exits_2_for_a_file_that_is_not_chunks(
    tmp_path, capsys, content, fragment
):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is not JSON Lines of chunks" in err
    assert fragment in err


@pytest.mark.parametrize("target", ["missing.jsonl", "."], ids=["missing", "directory"])
def test_validate_exits_2_for_an_unreadable_path(tmp_path, capsys, target):
    path = str(tmp_path / target)
    assert main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot read {path}: ")
    assert "Traceback" not in err


def test_validate_reports_the_first_problem_it_reaches(tmp_path, capsys):
    # A violation on line 1 wins over a malformed line 3: reading stops there.
    path = tmp_path / "both.jsonl"
    path.write_text(
        '{"type":"text-delta","index":0,"text":"x"}\n'
        '{"type":"finish","reason":{"kind":"stop"}}\n'
        "garbage\n"
    )
    assert main(["validate", str(path)]) == 1
    assert "delta without block-start" in capsys.readouterr().err


def test_validate_runs_as_a_module():
    ok = run("validate", str(STREAMS / "text.jsonl"))
    assert (ok.returncode, ok.stderr) == (0, "")
    assert "valid (strict): 9 chunks, 2 blocks, finish stop" in ok.stdout
    bad = run("validate", str(STREAMS / "interleaved.jsonl"))
    assert bad.returncode == 1
    assert bad.stderr.startswith("error[INVARIANT]: chunk #3 (block-start, index 1)")
    unreadable = run("validate", str(STREAMS / "not_chunks.jsonl"))
    assert unreadable.returncode == 2
    assert "Traceback" not in unreadable.stderr
    assert "line 2" in unreadable.stderr


def test_validate_requires_a_file_argument(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["validate"])
    assert caught.value.code == 2
    assert "FILE.jsonl" in capsys.readouterr().err


def test_validate_says_a_utf16_file_is_not_utf8(tmp_path, capsys):
    path = tmp_path / "wide.jsonl"
    path.write_bytes((STREAMS / "text.jsonl").read_text("utf-8").encode("utf-16"))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error[INVALID_CHUNK]: {path} is not JSON Lines of chunks: line 1: invalid "
        "chunk: not UTF-8 text (byte 0xff at offset 0: invalid start byte; it starts "
        "with a UTF-16 byte order mark)\n"
    )


def test_validate_skips_a_utf8_bom_at_the_start_of_the_file(tmp_path, capsys):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (STREAMS / "text.jsonl").read_bytes())
    assert main(["validate", str(path)]) == 0
    assert "valid (strict): 9 chunks" in capsys.readouterr().out


def test_validate_dash_reads_the_chunks_from_stdin(monkeypatch, capsys):
    set_stdin(monkeypatch, (STREAMS / "text.jsonl").read_bytes())
    assert main(["validate", "-"]) == 0
    assert capsys.readouterr().out == (
        "<stdin>: valid (strict): 9 chunks, 2 blocks, finish stop\n"
    )
    set_stdin(monkeypatch, (STREAMS / "interleaved.jsonl").read_bytes())
    assert main(["validate", "-"]) == 1
    assert "blocks interleaved" in capsys.readouterr().err


def test_validate_dash_decodes_stdin_as_utf8_and_names_it(monkeypatch, capsys):
    set_stdin(monkeypatch, b"\xff\xfe{\x00}\x00\n")
    assert main(["validate", "-"]) == 2
    assert capsys.readouterr().err.startswith(
        "error[INVALID_CHUNK]: <stdin> is not JSON Lines of chunks: line 1: invalid "
        "chunk: not UTF-8 text"
    )


def test_validate_dash_without_a_standard_input_is_unreadable(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", None)
    assert main(["validate", "-"]) == 2
    assert capsys.readouterr().err == (
        "error: cannot read <stdin>: there is no standard input\n"
    )


def test_validate_dash_reads_a_text_stdin_without_a_buffer(monkeypatch, capsys):
    text = (STREAMS / "text.jsonl").read_text("utf-8")
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main(["validate", "-"]) == 0
    assert capsys.readouterr().out.startswith("<stdin>: valid (strict): 9 chunks")


def test_validate_and_trace_dash_read_stdin_as_a_module():
    data = (STREAMS / "tool_call.jsonl").read_bytes()
    validated = run("validate", "-", stdin=data)
    assert (validated.returncode, validated.stderr) == (0, "")
    assert validated.stdout == (
        "<stdin>: valid (strict): 9 chunks, 2 blocks, finish tool-calls\n"
    )
    traced = run("trace", "-", stdin=data)
    assert (traced.returncode, traced.stderr) == (0, "")
    lines = traced.stdout.splitlines()
    assert lines[0].startswith("[stdin] #1 ")
    assert lines[-1] == "[stdin] total chunks 9, order check passed"
    wide = run("validate", "-", stdin=data.decode("utf-8").encode("utf-16"))
    assert wide.returncode == 2
    assert "<stdin> is not JSON Lines of chunks: line 1: invalid chunk: not UTF-8" in (
        wide.stderr
    )


# --- trace -------------------------------------------------------------------


def test_trace_prints_the_numbered_chunks_and_summary_to_stdout(capsys):
    path = STREAMS / "tool_call.jsonl"
    assert main(["trace", str(path)]) == 0
    captured = capsys.readouterr()
    raw_lines = path.read_text(encoding="utf-8").splitlines()
    assert captured.out.splitlines() == [
        *(f"[tool_call.jsonl] #{n} {line}" for n, line in enumerate(raw_lines, 1)),
        "[tool_call.jsonl] total chunks 9, order check passed",
    ]
    assert captured.err == ""


def test_trace_takes_a_label(capsys):
    assert main(["trace", "--label", "ds", str(STREAMS / "text.jsonl")]) == 0
    assert capsys.readouterr().out.endswith("[ds] total chunks 9, order check passed\n")


def test_trace_exits_1_after_printing_up_to_the_violation(capsys):
    assert main(["trace", str(STREAMS / "interleaved.jsonl")]) == 1
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 3
    assert captured.err.startswith("error[INVARIANT]: chunk #3")


def test_trace_lenient(capsys):
    assert main(["trace", "--lenient", str(STREAMS / "interleaved.jsonl")]) == 0
    assert capsys.readouterr().out.endswith("order check passed (lenient)\n")


def test_trace_exits_2_for_an_unreadable_file(capsys):
    assert main(["trace", str(STREAMS / "not_chunks.jsonl")]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        '[not_chunks.jsonl] #1 {"type":"block-start","index":0,"blockType":"text"}'
    ]
    assert "line 2" in captured.err


def test_trace_runs_as_a_module():
    result = run("trace", str(STREAMS / "error_open_block.jsonl"))
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == (
        "[error_open_block.jsonl] total chunks 3, order check passed"
    )
    missing = run("trace", "no-such-file.jsonl")
    assert missing.returncode == 2
    assert missing.stderr == (
        "error: cannot read no-such-file.jsonl: No such file or directory\n"
    )


def test_trace_dash_reads_the_chunks_from_stdin(monkeypatch, capsys):
    data = (STREAMS / "text.jsonl").read_bytes()
    set_stdin(monkeypatch, data)
    assert main(["trace", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        *(
            f"[stdin] #{n} {line}"
            for n, line in enumerate(data.decode().splitlines(), 1)
        ),
        "[stdin] total chunks 9, order check passed",
    ]
    set_stdin(monkeypatch, data)
    assert main(["trace", "--label", "rec", "-"]) == 0
    assert capsys.readouterr().out.endswith(
        "[rec] total chunks 9, order check passed\n"
    )
