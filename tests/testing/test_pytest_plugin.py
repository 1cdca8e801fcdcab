"""The pytest plugin: declared under ``pytest11``, and its fixtures work in a
project of their own (a separate pytest process)."""

from __future__ import annotations

import configparser
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CASSETTE = ROOT / "tests" / "fixtures" / "cassettes" / "llamacpp" / "length.jsonl"


def test_setup_cfg_registers_the_plugin_under_pytest11():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    entries = config["options.entry_points"]["pytest11"].split("\n")
    assert "dsh_llm = dsh_llm.testing.pytest_plugin" in [e.strip() for e in entries]


def test_a_users_project_gets_the_fixtures(tmp_path):
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            f"""
            import requests
            from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
            from dsh_llm.testing import Reply

            def test_loopback(loopback_server):
                loopback_server.enqueue(Reply(body=b"ok", framing="length"))
                assert requests.get(loopback_server.url, timeout=5).text == "ok"

            def test_replay(cassette_replay):
                chunks = cassette_replay({str(CASSETTE)!r}, OpenAICompatAdapter)
                assert chunks[-1].reason.kind == "max-tokens"

            def test_conformance(adapter_conformance):
                report = adapter_conformance(
                    OpenAICompatAdapter, {str(CASSETTE)!r}, groups=["resplit"]
                )
                assert "1-byte writes" in report.variants

            def test_fake(fake_adapter):
                assert fake_adapter([], strict=False).chunks == ()
            """
        ),
        encoding="utf-8",
    )
    env = dict(os.environ)
    # Load exactly this tree's plugin, whatever the installed metadata says.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "dsh_llm.testing.pytest_plugin",
            "-p",
            "no:cacheprovider",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


_MODULES_PROBE = """
import json, sys

BEFORE = set(sys.modules)


def test_report_what_the_plugin_loaded(request):
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "dsh_llm")
    print("REPORT " + json.dumps({
        "dsh_llm": loaded,
        "requests": "requests" in sys.modules,
        "http.server": "http.server" in sys.modules,
        "fixtures": list(request.fixturenames),
    }))
"""

_ROOT_MODULES = """
import json, sys
import dsh_llm
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "dsh_llm")))
"""


def _plugin_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_loading_the_plugin_imports_nothing_but_the_package_root(tmp_path):
    (tmp_path / "test_probe.py").write_text(_MODULES_PROBE, encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "dsh_llm.testing.pytest_plugin",
            "-p",
            "no:cacheprovider",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_plugin_env(),
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("REPORT ")]
    report = json.loads(line.removeprefix("REPORT "))
    root = subprocess.run(
        [sys.executable, "-c", _ROOT_MODULES],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_plugin_env(),
        timeout=60,
        check=True,
    )
    by_root = json.loads(root.stdout)
    # What ``import dsh_llm`` loads anyway, plus the plugin, its package and
    # the package's lazy-export helper: no test kit module, no transport, no
    # adapter, no HTTP.
    assert sorted(report["dsh_llm"]) == sorted(
        {
            *by_root,
            "dsh_llm.protocol.lazy",
            "dsh_llm.testing",
            "dsh_llm.testing.pytest_plugin",
        }
    )
    assert "dsh_llm.testing.loopback" not in report["dsh_llm"]
    assert not [m for m in report["dsh_llm"] if m.startswith("dsh_llm.adapters")]
    assert report["requests"] is False
    assert report["http.server"] is False
    # No autouse fixture: a test that asks for nothing gets nothing.
    assert report["fixtures"] == ["request"]


def test_the_testing_package_imports_its_kit_on_first_use():
    script = (
        "import sys, dsh_llm.testing as t\n"
        "assert 'dsh_llm.testing.loopback' not in sys.modules\n"
        "server = t.LoopbackServer\n"
        "assert 'dsh_llm.testing.loopback' in sys.modules\n"
        "assert server.__module__ == 'dsh_llm.testing.loopback'\n"
        "assert set(t.__all__) <= set(dir(t))\n"
        "try:\n"
        "    t.NoSuchName\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=_plugin_env(),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "has no attribute 'NoSuchName'" in result.stdout
