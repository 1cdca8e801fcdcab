"""``dsh-llm batch`` as a real process against a loopback server: exit statuses,
Ctrl-C (SIGINT) and a run killed with SIGKILL, then resumed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from dsh_llm.testing import Reply
from dsh_llm.testing import Stall

from ..cli_run import clean_env
from ..cli_run import run_cli
from .servers import MODEL
from .servers import EchoServer
from .servers import prompts
from .servers import result_rows
from .servers import write_config
from .servers import write_requests


def _config(tmp_path: Path, url: str) -> Path:
    return write_config(
        tmp_path / "dsh.yml", url, "retryPolicy: {mode: normal, maxRetries: 0}"
    )


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dsh_llm", "batch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        cwd=tmp_path,
    )


def _wait_for_rows(path: Path, count: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {count} rows")


def test_exit_0_when_all_succeed_and_1_when_some_fail(tmp_path: Path) -> None:
    good = write_requests(tmp_path / "good.jsonl", prompts(3))
    mixed = write_requests(
        tmp_path / "mixed.jsonl",
        [
            *prompts(2),
            {"id": "x", "provider": "nowhere", "model": MODEL, "prompt": "p"},
        ],
    )
    with EchoServer() as server:
        config = _config(tmp_path, server.url)
        ok = run_cli(
            "batch",
            str(good),
            str(tmp_path / "a.jsonl"),
            "--config",
            str(config),
            cwd=tmp_path,
        )
        failed = run_cli(
            "batch",
            str(mixed),
            str(tmp_path / "b.jsonl"),
            "--config",
            str(config),
            "--concurrency",
            "2",
            "--rpm",
            "6000",
            cwd=tmp_path,
        )
        rerun = run_cli(
            "batch",
            str(mixed),
            str(tmp_path / "b.jsonl"),
            "--config",
            str(config),
            cwd=tmp_path,
        )
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr.startswith("batch done: 3 succeeded, 0 failed, ")
    assert ok.stdout == ""
    assert len(result_rows(tmp_path / "a.jsonl")) == 3
    assert failed.returncode == 1, failed.stderr
    assert failed.stderr.startswith("batch done: 2 succeeded, 1 failed, ")
    assert rerun.returncode == 1
    assert (
        "0 succeeded, 0 failed, 1 failed in an earlier run, 3 skipped" in rerun.stderr
    )


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "r.jsonl", prompts(1))
    missing = run_cli("batch", str(tmp_path / "nope.jsonl"), "out.jsonl", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: cannot read ")
    same = run_cli("batch", str(requests), str(requests), cwd=tmp_path)
    assert same.returncode == 2
    assert "different files" in same.stderr
    bad = run_cli(
        "batch", str(requests), "out.jsonl", "--concurrency", "0", cwd=tmp_path
    )
    assert bad.returncode == 2
    assert "--concurrency" in bad.stderr
    config = tmp_path / "broken.yml"
    config.write_text("- id: x\n  name: no-such-plugin\n")
    unloadable = run_cli(
        "batch", str(requests), "out.jsonl", "--config", str(config), cwd=tmp_path
    )
    assert unloadable.returncode == 2
    assert "error[PLUGIN_LOAD]" in unloadable.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_ctrl_c_aborts_in_flight_requests_and_exits_130(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "r.jsonl", prompts(4))
    results = tmp_path / "results.jsonl"
    with EchoServer() as server:
        server.server.handler = lambda request: Reply(body=(Stall(seconds=60),))
        process = _start(
            tmp_path,
            str(requests),
            str(results),
            "--config",
            str(_config(tmp_path, server.url)),
            "--concurrency",
            "2",
        )
        try:
            assert server.server.wait_for_requests(2, timeout=20), process.stderr
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=20)
        finally:
            process.kill()
        assert process.returncode == 130, stderr
        assert server.server.wait_until_idle(), (
            "an aborted request left its socket open"
        )
        assert len(server.server.requests) == 2
    assert "batch interrupted: 0 succeeded, 0 failed, 4 not run" in stderr
    assert stderr.rstrip().endswith("interrupted")
    assert results.read_bytes() == b""


def test_a_killed_run_resumes_without_duplicates_past_a_torn_line(
    tmp_path: Path,
) -> None:
    requests = write_requests(tmp_path / "r.jsonl", prompts(30))
    results = tmp_path / "results.jsonl"
    with EchoServer(delay=0.1) as server:
        config = _config(tmp_path, server.url)
        process = _start(
            tmp_path,
            str(requests),
            str(results),
            "--config",
            str(config),
            "--concurrency",
            "2",
        )
        try:
            _wait_for_rows(results, 4)
            process.send_signal(signal.SIGKILL)
            process.communicate(timeout=20)
        finally:
            process.kill()
        assert process.returncode == -signal.SIGKILL
        written = result_rows(results)
        assert 4 <= len(written) < 30
        # What a kill in the middle of a write leaves: half a row, no newline.
        torn = json.dumps({"id": "r29", "line": 30, "ok": True, "message": {"id": "m"}})
        with results.open("a") as out:
            out.write(torn[:25])
        server.arrivals.clear()
        rerun = run_cli(
            "batch", str(requests), str(results), "--config", str(config), cwd=tmp_path
        )
        resent = {prompt for _, prompt in server.arrivals}
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(written)} skipped" in rerun.stderr
    rows = result_rows(results)  # every line is whole JSON again
    assert Counter(row["id"] for row in rows) == {f"r{n}": 1 for n in range(30)}
    assert all(row["ok"] for row in rows)
    assert resent.isdisjoint(f"p{row['line'] - 1}" for row in written)


def test_a_second_run_on_one_results_file_exits_2_and_a_killed_one_holds_no_lock(
    tmp_path: Path,
) -> None:
    requests = write_requests(tmp_path / "r.jsonl", prompts(3))
    results = tmp_path / "results.jsonl"
    with EchoServer() as server:
        server.server.handler = lambda request: Reply(body=(Stall(seconds=60),))
        config = _config(tmp_path, server.url)
        args = (str(requests), str(results), "--config", str(config))
        first = _start(tmp_path, *args)
        try:
            # The first run holds the file: its requests are in flight.
            assert server.server.wait_for_requests(3, timeout=20), first.stderr
            second = run_cli("batch", *args, cwd=tmp_path)
            assert len(server.server.requests) == 3  # the second sent nothing
            first.send_signal(signal.SIGKILL)
            first.communicate(timeout=20)
        finally:
            first.kill()
        assert second.returncode == 2, second.stderr
        assert second.stderr == (
            f"error: {results} is in use by another batch run (it holds the "
            "file's lock); wait for that run to end, or write to another "
            "results file\n"
        )
        # The kernel dropped the dead run's lock: the next run goes ahead.
        server.server.handler = server.handle
        third = run_cli("batch", *args, cwd=tmp_path)
    assert third.returncode == 0, third.stderr
    assert Counter(row["id"] for row in result_rows(results)) == {
        f"r{n}": 1 for n in range(3)
    }
