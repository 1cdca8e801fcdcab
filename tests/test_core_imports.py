"""The core install never imports OpenTelemetry: importing ``dsh_llm`` and every
module of the package but ``dsh_llm.observe.otel`` leaves it out of
``sys.modules`` (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent

SCRIPT = """
import importlib, json, pkgutil, sys
import dsh_llm
names = sorted(
    info.name
    for info in pkgutil.walk_packages(dsh_llm.__path__, "dsh_llm.")
    if info.name not in ("dsh_llm.observe.otel", "dsh_llm.__main__")
)
for name in names:
    importlib.import_module(name)
print(json.dumps({
    "modules": names,
    "otel": sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"),
}))
"""


def test_no_core_module_imports_opentelemetry() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,
    )
    report = json.loads(result.stdout)
    assert "dsh_llm.routing" in report["modules"]
    assert "dsh_llm.observe.logging" in report["modules"]
    assert "dsh_llm.observe.cost" in report["modules"]
    assert report["otel"] == []


def test_the_otel_module_does_import_it() -> None:
    # The check above could pass by never importing anything; this one shows
    # the same script does see OpenTelemetry when the module is imported.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, dsh_llm.observe.otel; print('opentelemetry' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,
    )
    assert result.stdout.strip() == "True"
