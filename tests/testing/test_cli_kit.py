"""``dsh-llm record`` and ``dsh-llm replay``: a live call recorded while it is
shown as ``chat`` shows it, and a cassette replayed into the strict trace."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from dsh_llm.cli import main
from dsh_llm.testing import Cassette
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events

from ..cli_run import clean_env
from ..cli_run import deepseek_text_reply
from ..cli_run import run_cli
from .sse_cassettes import CASSETTES
from .sse_cassettes import cassette_path

KEY = "sk-test-cli-key-0123456789"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def _delta(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def test_record_deepseek_streams_like_chat_and_writes_a_redacted_cassette(
    server, tmp_path
):
    server.enqueue(deepseek_text_reply(["Bon", "jour"], reasoning=["Greet."]))
    out = tmp_path / "hello.jsonl"
    result = run_cli(
        "record",
        "say hello",
        "-o",
        str(out),
        env=clean_env(DEEPSEEK_API_KEY=KEY, DEEPSEEK_BASE_URL=server.url),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Bonjour\n"
    assert result.stderr == (
        "[reasoning] Greet.\n"
        f"cassette: {out}\n"
        "finish stop; usage: input 9, cache read 3, output 7\n"
    )
    assert server.requests[0].header("authorization") == f"Bearer {KEY}"
    text = out.read_text(encoding="utf-8")
    assert KEY not in text
    cassette = Cassette.load(out)
    assert cassette.adapter == "dsh_llm.adapters.deepseek:DeepSeekAdapter"
    assert json.loads(cassette.request.body)["messages"][0]["content"] == "say hello"


def test_record_base_url_then_replay_prints_the_strict_trace(server, tmp_path, capsys):
    server.enqueue(
        Reply(
            body=sse_events(
                [
                    _delta("café"),
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                ]
            )
        )
    )
    out = tmp_path / "cafe.jsonl"
    status = main(
        [
            "record",
            "--base-url",
            f"{server.url}/v1",
            "--model",
            "m",
            "hi",
            "-o",
            str(out),
        ]
    )
    recorded = capsys.readouterr()
    assert status == 0, recorded.err
    assert recorded.out == "café\n"

    status = main(["replay", str(out), "--speed", "0"])
    replayed = capsys.readouterr()
    assert status == 0, replayed.err
    lines = replayed.out.splitlines()
    assert (
        lines[0]
        == '[cafe.jsonl] #1 {"type":"block-start","index":0,"blockType":"text"}'
    )
    assert lines[1] == '[cafe.jsonl] #2 {"type":"text-delta","index":0,"text":"café"}'
    assert lines[-1] == "[cafe.jsonl] total chunks 5, order check passed"


def test_record_forwards_the_query_of_base_url_and_keeps_every_key_out(
    server, tmp_path
):
    server.enqueue(Reply(body=sse_events([_delta("ok"), _stop_event()])))
    out = tmp_path / "azure.jsonl"
    query_key = "az-query-key-5e6f7a8b9c0d"
    result = run_cli(
        "record",
        "--base-url",
        f"{server.url}/openai/deployments/d?api-version=2024-10-21&api-key={query_key}",
        "--model",
        "m",
        "--api-key-env",
        "AZURE_KEY",
        "hi",
        "-o",
        str(out),
        env=clean_env(AZURE_KEY=KEY),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"
    (request,) = server.requests
    assert request.path == (
        "/openai/deployments/d/chat/completions"
        f"?api-version=2024-10-21&api-key={query_key}"
    )
    assert request.header("authorization") == f"Bearer {KEY}"
    text = out.read_text(encoding="utf-8")
    assert query_key not in text
    assert KEY not in text
    assert "api-version=2024-10-21" in text


def _stop_event() -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


def test_replay_with_an_adapter_class_and_a_label(capsys):
    path = cassette_path("deepseek", "tool_calls")
    status = main(
        [
            "replay",
            str(path),
            "--adapter",
            "dsh_llm.adapters.deepseek:DeepSeekAdapter",
            "--label",
            "ds",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert out.splitlines()[-1].startswith("[ds] total chunks ")
    assert '"type":"finish","reason":{"kind":"tool-calls"}' in out


def test_replay_by_provider_at_recorded_speed(capsys):
    status = main(
        [
            "replay",
            str(CASSETTES / "llamacpp" / "length.jsonl"),
            "--provider",
            "openai-compatible",
            "--speed",
            "4",
        ]
    )
    assert status == 0
    assert '"reason":{"kind":"max-tokens"}' in capsys.readouterr().out


def test_replay_of_an_in_stream_error_exits_1_after_the_trace(capsys):
    status = main(["replay", str(cassette_path("deepseek", "in_stream_error"))])
    captured = capsys.readouterr()
    assert status == 1
    # The adapter raises the in-stream error after the chunks before it: the
    # trace shows them, and no closing line follows a failure.
    assert '#2 {"type":"text-delta","index":0,"text":"Partial"}' in captured.out
    assert "order check passed" not in captured.out
    assert captured.err.startswith("error[SERVER]: ")


def test_replay_of_a_bad_cassette_exits_2_with_invalid_cassette(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"dshCassette": 9}\n', encoding="utf-8")
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error[INVALID_CASSETTE]: invalid cassette {bad}: line 1:")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"dshCassette": 1' + "0" * 5000 + "}", "holds a number too long to read"),
        ("[" * 100_000, "is nested too deeply"),
    ],
)
def test_replay_of_a_hostile_cassette_exits_2_without_a_traceback(
    line, problem, tmp_path
):
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text(line + "\n", encoding="utf-8")
    result = run_cli("replay", str(hostile), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"error[INVALID_CASSETTE]: invalid cassette {hostile}: line 1: $: {problem}\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provider", "nope"], 'not "nope"'),
        (
            ["--adapter", "dsh_llm.protocol:GenerateOptions"],
            "is not an LlmAdapter class",
        ),
        (["--adapter", "no_such_module_x:Y"], "cannot import no_such_module_x"),
        (["--adapter", "nocolon"], "--adapter must be module:Class"),
    ],
)
def test_replay_usage_errors_exit_2(args, message, capsys):
    path = str(cassette_path("deepseek", "tool_calls"))
    assert main(["replay", path, *args]) == 2
    assert message in capsys.readouterr().err


def test_replay_speed_must_be_a_non_negative_number(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["replay", "x.jsonl", "--speed", "-1"])
    assert caught.value.code == 2
    assert "must be a number >= 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provider", "other"], 'not "other"'),
        (["--base-url", "http://127.0.0.1:9/v1"], "--base-url needs --model"),
        (["--base-url", "ftp://x", "--model", "m"], "baseURL"),
        ([], "DEEPSEEK_API_KEY is not set"),
    ],
)
def test_record_usage_errors_exit_2(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    out = tmp_path / "c.jsonl"
    assert main(["record", "hi", "-o", str(out), *args]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_record_of_a_failing_call_exits_1_and_keeps_the_cassette(
    server, tmp_path, capsys
):
    server.enqueue(
        Reply(
            status=500,
            reason="Internal Server Error",
            headers={"content-type": "application/json"},
            body=b'{"error":{"message":"boom","type":"server_error"}}',
            framing="length",
        )
    )
    out = tmp_path / "500.jsonl"
    status = main(
        [
            "record",
            "--base-url",
            f"{server.url}/v1",
            "--model",
            "m",
            "hi",
            "-o",
            str(out),
        ]
    )
    assert status == 1
    assert "error[SERVER]: boom" in capsys.readouterr().err
    assert Cassette.load(out).response.status == 500


def test_building_the_parser_imports_neither_requests_nor_the_kit():
    import subprocess
    import sys

    probe = (
        "import sys, dsh_llm.cli; dsh_llm.cli.build_parser(); "
        "print(sorted(m for m in ('requests', 'dsh_llm.testing', "
        "'dsh_llm.adapters.deepseek') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"
