"""The pytest plugin: declared under ``pytest11``, and its fixtures work in a
project of their own (a separate pytest process)."""

from __future__ import annotations

import configparser
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
