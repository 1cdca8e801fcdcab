"""run_jsonl_dask on a real two-process LocalCluster against a loopback server:
the same rows as run_jsonl, one runtime per worker, failed requests as rows,
resume past a torn line; and the core install never imports Dask."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

from dsh_llm.batch import run_jsonl  # noqa: E402
from dsh_llm.batch.dask import run_jsonl_dask  # noqa: E402
from dsh_llm.batch.dask import worker_runtimes_built  # noqa: E402

from .servers import MODEL  # noqa: E402
from .servers import ROUTE  # noqa: E402
from .servers import EchoServer  # noqa: E402
from .servers import echo_runtime  # noqa: E402
from .servers import prompts  # noqa: E402
from .servers import result_rows  # noqa: E402
from .servers import write_config  # noqa: E402
from .servers import write_requests  # noqa: E402


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as connected,
    ):
        yield connected


def _entries(url: str) -> list[dict[str, Any]]:
    return [
        {
            "id": "local",
            "name": "llm-openai-compatible",
            "config": {"providers": [ROUTE], "baseURL": url, "models": [MODEL]},
        }
    ]


def _shape(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row without what differs between two runs (message ids, durations)."""
    message = dict(row.get("message") or {})
    message.pop("id", None)
    return (
        row["id"],
        row["line"],
        row["ok"],
        json.dumps(message, sort_keys=True),
        json.dumps(row.get("usage")),
        json.dumps(row.get("finish")),
        json.dumps(row.get("failure")),
        row["attempts"],
    )


def test_the_cluster_writes_the_rows_run_jsonl_writes(
    client: Any, tmp_path: Path
) -> None:
    lines = [
        *prompts(12),
        "not json",
        {"id": "gone", "provider": "nowhere", "model": MODEL, "prompt": "x"},
        "[" * 100_000,  # nested too deeply for any reader: one failed row
    ]
    requests = write_requests(tmp_path / "requests.jsonl", lines)
    with EchoServer() as server:
        summary = run_jsonl_dask(
            client, requests, tmp_path / "dask.jsonl", composition=_entries(server.url)
        )
        with echo_runtime(server.url) as runtime:
            run_jsonl(requests, tmp_path / "local.jsonl", runtime=runtime)
    assert (summary.total, summary.succeeded, summary.failed) == (15, 12, 3)
    on_cluster = sorted(
        map(_shape, result_rows(tmp_path / "dask.jsonl")), key=lambda r: r[1]
    )
    on_machine = sorted(
        map(_shape, result_rows(tmp_path / "local.jsonl")), key=lambda r: r[1]
    )
    assert on_cluster == on_machine
    failed = [
        row for row in result_rows(tmp_path / "dask.jsonl") if row["id"] == "gone"
    ]
    assert failed[0]["failure"]["code"] == "NO_ADAPTER"
    deep = [row for row in result_rows(tmp_path / "dask.jsonl") if row["line"] == 15]
    assert deep[0]["failure"]["message"] == "line 15: $ is nested too deeply"
    # Each worker built its runtime once, however many requests it served.
    # Each worker built its runtime at most once (the scheduler may have given
    # every task to one of them), however many requests it served.
    built = client.run(worker_runtimes_built)
    assert len(built) == 2
    assert set(built.values()) <= {0, 1}
    assert sum(built.values()) >= 1


def test_a_cluster_run_resumes_past_a_torn_line(client: Any, tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(16))
    results = tmp_path / "results.jsonl"
    with EchoServer() as server:
        config = write_config(tmp_path / "dsh.yml", server.url)
        run_jsonl_dask(client, requests, results, composition=config)
        kept = results.read_text().splitlines(keepends=True)[:6]
        results.write_text("".join(kept) + '{"id":"r3","line":4,"ok":tr')
        kept_lines = {json.loads(line)["line"] for line in kept}
        server.arrivals.clear()
        summary = run_jsonl_dask(client, requests, results, composition=config)
        sent = sorted(prompt for _, prompt in server.arrivals)
    assert sent == sorted(
        f"p{line - 1}" for line in range(1, 17) if line not in kept_lines
    )
    assert summary.skipped == 6
    assert summary.succeeded == 10
    assert summary.ok
    assert Counter(row["id"] for row in result_rows(results)) == {
        f"r{n}": 1 for n in range(16)
    }


def test_importing_the_library_and_dsh_llm_batch_does_not_import_dask() -> None:
    code = (
        "import sys, dsh_llm, dsh_llm.batch, dsh_llm.cli\n"
        "roots = ('dask', 'distributed')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in roots)\n"
        "print(loaded)\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "[]"
