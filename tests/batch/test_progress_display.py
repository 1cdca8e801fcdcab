"""The batch progress bar where people watch it (issue 29, item 1).

- In a real Jupyter kernel (``nbclient`` runs a small notebook): ``progress=True``
  shows an ipywidgets bar that reaches the total, and ``ProgressBar(widget=False)``
  one text line updated in place (one output, replaced, never a line per
  update); the summary line follows on stderr. Skipped only when the kernel
  cannot start.
- In a terminal (a pseudo-terminal as stderr): the ``tqdm`` bar redrawn with
  carriage returns, then the summary line.
- Off a terminal and outside a kernel: no bar, the summary line only.

Each run is a batch against a loopback server (``tests/batch/servers.py``).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
TOTAL = 12

_SETUP = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
import tempfile
from tests.batch.servers import EchoServer, echo_runtime, prompts, write_requests
from dsh_llm.batch import ProgressBar, run_jsonl
from dsh_llm.batch.progress import in_jupyter_kernel
work = Path(tempfile.mkdtemp())
requests = write_requests(work / "requests.jsonl", prompts({TOTAL}))
assert in_jupyter_kernel()
"""


def _run_cell(progress: str, results: str) -> str:
    return (
        "with EchoServer() as server, echo_runtime(server.url) as runtime:\n"
        f"    summary = run_jsonl(requests, work / {results!r}, runtime=runtime,\n"
        f"                        progress={progress}, concurrency=2)\n"
        "assert summary.succeeded == summary.total\n"
    )


def _notebook_client(cells: list[str]) -> tuple[Any, Any, list[dict[str, Any]]]:
    """A client for a notebook of ``cells`` that records every display update."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed")
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in cells]
    )
    updates: list[dict[str, Any]] = []

    class Recording(nbclient.NotebookClient):  # type: ignore[misc]
        def process_message(self, msg, cell, cell_index):
            if msg["msg_type"] == "update_display_data":
                updates.append({"cell": cell_index, **msg["content"]})
            return super().process_message(msg, cell, cell_index)

    client = Recording(
        notebook,
        timeout=180,
        startup_timeout=120,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(ROOT)}},
    )
    return client, notebook, updates


def _execute(client: Any, notebook: Any) -> None:
    setup = client.setup_kernel()
    try:
        setup.__enter__()
    except Exception as exc:  # no kernel here: nothing to show a bar in
        pytest.skip(f"the Jupyter kernel cannot start: {type(exc).__name__}: {exc}")
    try:
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        client.set_widgets_metadata()
    finally:
        setup.__exit__(None, None, None)


@pytest.fixture
def jupyter_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # jupyter_core warns (DeprecationWarning) unless told to use platformdirs;
    # the suite turns warnings into errors.
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )


def _streams(cell: Any, name: str) -> str:
    return "".join(
        output["text"]
        for output in cell.outputs
        if output["output_type"] == "stream" and output["name"] == name
    )


def _widget_states(notebook: Any) -> dict[str, dict[str, Any]]:
    widgets = notebook.metadata.get("widgets", {})
    state = widgets.get("application/vnd.jupyter.widget-state+json", {})
    return {key: value["state"] for key, value in state.get("state", {}).items()}


def test_a_notebook_shows_a_widget_bar_and_a_text_bar_updated_in_place(jupyter_env):
    if importlib.util.find_spec("ipywidgets") is None:
        pytest.skip("ipywidgets is not installed: no widget to show")
    client, notebook, updates = _notebook_client(
        [
            _SETUP,
            _run_cell("True", "widget.jsonl"),
            _run_cell("ProgressBar(widget=False)", "text.jsonl"),
        ]
    )
    _execute(client, notebook)
    _, widget_cell, text_cell = notebook.cells

    # The widget: one display of an ipywidgets view, whose progress model
    # reached the total (its state is what the kernel last sent).
    (shown,) = [o for o in widget_cell.outputs if o["output_type"] == "display_data"]
    view = shown["data"]["application/vnd.jupyter.widget-view+json"]
    states = _widget_states(notebook)
    container = states[view["model_id"]]
    children = [states[ref.removeprefix("IPY_MODEL_")] for ref in container["children"]]
    (bar,) = [c for c in children if c["_model_name"] == "FloatProgressModel"]
    assert (bar["value"], bar["max"], bar["bar_style"]) == (TOTAL, TOTAL, "success")
    texts = " ".join(
        c.get("value", "") for c in children if c["_model_name"] == "HTMLModel"
    )
    assert f"{TOTAL}/{TOTAL}" in texts
    assert _streams(widget_cell, "stderr").startswith(
        f"batch done: {TOTAL} succeeded, 0 failed"
    )

    # The text bar: one output, replaced by display updates, ending at the
    # total; the bar never went to stderr as lines.
    displays = [o for o in text_cell.outputs if o["output_type"] == "display_data"]
    assert len(displays) == 1
    final = displays[0]["data"]["text/plain"]
    assert f"{TOTAL}/{TOTAL}" in final
    assert "failed=0" in final
    assert "application/vnd.jupyter.widget-view+json" not in displays[0]["data"]
    own = [u for u in updates if u["cell"] == 2]
    assert len(own) >= 2  # drawn at the start, redrawn at least at the end
    display_id = own[0]["transient"]["display_id"]
    assert all(u["transient"]["display_id"] == display_id for u in own)
    assert own[-1]["data"]["text/plain"] == final
    stderr = _streams(text_cell, "stderr")
    assert stderr.startswith(f"batch done: {TOTAL} succeeded")
    assert "\r" not in stderr
    assert stderr.count("\n") == 1


_TERMINAL = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
import tempfile
from tests.batch.servers import EchoServer, echo_runtime, prompts, write_requests
from dsh_llm.batch import run_jsonl
work = Path(tempfile.mkdtemp())
requests = write_requests(work / "requests.jsonl", prompts({TOTAL}))
with EchoServer() as server, echo_runtime(server.url) as runtime:
    run_jsonl(requests, work / "r.jsonl", runtime=runtime, progress=True)
"""


def _run_with_stderr(stderr: int) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", _TERMINAL],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )


def test_a_terminal_gets_the_tqdm_bar_redrawn_in_place():
    controller, terminal = pty.openpty()
    # A terminal of 24 rows and 100 columns (a fresh pty has no size).
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    seen = b""
    try:
        with subprocess.Popen(
            [sys.executable, "-c", _TERMINAL],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=terminal,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        ) as child:
            os.close(terminal)
            terminal = -1
            while True:  # read as it comes, until the child's side closes
                try:
                    piece = os.read(controller, 4096)
                except OSError:  # EIO on Linux once the child has gone
                    break
                if not piece:
                    break
                seen += piece
            returncode = child.wait(timeout=120)
    finally:
        os.close(controller)
        if terminal != -1:
            os.close(terminal)
    text = seen.decode("utf-8", errors="replace")
    assert returncode == 0, text
    assert text.count("\r") >= 2  # redrawn in place
    assert f"{TOTAL}/{TOTAL}" in text
    assert text.rstrip().splitlines()[-1].startswith(f"batch done: {TOTAL} succeeded")


def test_off_a_terminal_only_the_summary_line_is_written():
    result = _run_with_stderr(subprocess.PIPE)
    assert result.returncode == 0
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"batch done: {TOTAL} succeeded")


def test_the_kernel_check_is_false_outside_a_kernel():
    script = (
        "import IPython\n"
        "from dsh_llm.batch.progress import in_jupyter_kernel\n"
        "print(in_jupyter_kernel())\n"
    )
    if importlib.util.find_spec("IPython") is None:
        pytest.skip("IPython is not installed")
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "False"
