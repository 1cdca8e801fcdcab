"""``dsh-llm logs`` and what ``chat`` logs: every call in the user's SQLite log,
shown and searched, logging turned off and on, a failure to log that never fails
the chat, several chats at once, and ``chat -c``/``--cid`` continuing a
conversation with its replay state."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.cli import main
from dsh_llm.cli.logdb import LogStore
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply

from ..cli_run import clean_env
from ..cli_run import deepseek_text_reply
from ..cli_run import run_cli

KEY = "sk-test-never-logged-7f3a"


def _env(server: LoopbackServer, **extra: str) -> dict[str, str]:
    return clean_env(DEEPSEEK_API_KEY=KEY, DEEPSEEK_BASE_URL=server.url, **extra)


def _logged(user_dir: Path) -> list[dict[str, Any]]:
    with LogStore(user_dir / "logs.db", create=False) as store:
        return [call.to_json() for call in store.calls()]


def _chat(server: LoopbackServer, *args: str, cwd: Path, **env: str) -> Any:
    result = run_cli("chat", *args, env=_env(server, **env), cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result


def test_chat_logs_the_call_and_never_the_key(server, tmp_path, user_dir):
    server.enqueue(deepseek_text_reply(["Hel", "lo!"], reasoning=["Greet."]))

    result = _chat(
        server,
        "--system",
        "Be brief.",
        "--max-tokens",
        "50",
        "-o",
        "user=ada",
        "hi there",
        cwd=tmp_path,
    )

    # Logging adds nothing to what the chat shows.
    assert result.stdout == "Hello!\n"
    assert result.stderr == (
        "[reasoning] Greet.\nfinish stop; usage: input 9, cache read 3, output 7\n"
    )
    (call,) = _logged(user_dir)
    assert (call["provider"], call["model"]) == (
        "deepseek-official",
        "deepseek-v4-flash",
    )
    assert (call["prompt"], call["system"]) == ("hi there", "Be brief.")
    assert call["options"] == {"maxTokens": 50, "extraBody": {"user": "ada"}}
    assert (call["response"], call["reasoning"]) == ("Hello!", "Greet.")
    assert [b["type"] for b in call["message"]["content"]] == ["reasoning", "text"]
    assert call["message"]["source"] == {
        "kind": "model",
        "provider": "deepseek-official",
        "model": "deepseek-v4-flash",
    }
    assert call["usage"] == {"inputTokens": 9, "outputTokens": 7, "cacheReadTokens": 3}
    assert call["finish"] == {"kind": "stop"}
    assert 0 <= call["firstChunkMs"] <= call["durationMs"]
    assert call["startedAt"].endswith("Z")
    for path in user_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_logs_shows_the_last_calls_searches_them_and_prints_json(server, tmp_path):
    for word in ("apple", "banana", "cherry"):
        server.enqueue(deepseek_text_reply([f"{word} pie"], reasoning=["Hm."]))
        _chat(server, f"tell me about {word}", cwd=tmp_path)

    shown = run_cli("logs", "-n", "2")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "apple" not in text
    assert text.index("tell me about banana") < text.index("tell me about cherry")
    assert "## Response\n\n[reasoning] Hm.\nbanana pie\n" in text
    assert "finish stop; usage: input 9, cache read 3, output 7; " in text
    assert "deepseek-official / deepseek-v4-flash" in text

    found = run_cli("logs", "-q", "PIE appl", "--json")
    assert found.returncode == 0, found.stderr
    (call,) = json.loads(found.stdout)
    assert call["prompt"] == "tell me about apple"

    everything = json.loads(run_cli("logs", "-n", "0", "--json").stdout)
    assert [c["response"] for c in everything] == [
        "apple pie",
        "banana pie",
        "cherry pie",
    ]
    # Each one-shot chat is a conversation of its own.
    assert len({c["conversationId"] for c in everything}) == 3
    one = run_cli(
        "logs", "list", "--cid", everything[1]["conversationId"][:12], "--json"
    )
    assert [c["response"] for c in json.loads(one.stdout)] == ["banana pie"]

    nothing = run_cli("logs", "-q", "durian")
    assert (nothing.returncode, nothing.stdout) == (0, "")
    assert nothing.stderr == "no calls logged match\n"


def test_logs_off_stops_logging_on_starts_it_and_the_flags_decide_once(
    server, tmp_path, user_dir
):
    off = run_cli("logs", "off")
    assert off.returncode == 0, off.stderr
    assert run_cli("logs", "status").stdout.startswith("logging is off\n")
    server.enqueue(deepseek_text_reply(["not kept"]))
    _chat(server, "one", cwd=tmp_path)
    assert not (user_dir / "logs.db").exists()

    server.enqueue(deepseek_text_reply(["kept anyway"]))
    _chat(server, "--log", "two", cwd=tmp_path)
    assert [c["response"] for c in _logged(user_dir)] == ["kept anyway"]

    assert run_cli("logs", "on").returncode == 0
    status = run_cli("logs", "status").stdout
    assert status.startswith("logging is on\n")
    assert f"database: {user_dir / 'logs.db'} (schema version 2)\ncalls: 1\n" in status
    server.enqueue(deepseek_text_reply(["skipped"]), deepseek_text_reply(["three"]))
    _chat(server, "--no-log", "skip", cwd=tmp_path)
    _chat(server, "three", cwd=tmp_path)
    assert [c["response"] for c in _logged(user_dir)] == ["kept anyway", "three"]
    assert run_cli("logs", "path").stdout == f"{user_dir / 'logs.db'}\n"


def test_a_call_that_cannot_be_logged_succeeds_with_one_warning(
    server, tmp_path, user_dir
):
    # Where the database should be, a directory: it cannot be opened.
    (user_dir / "logs.db").mkdir()
    server.enqueue(deepseek_text_reply(["fine"]))

    result = _chat(server, "hi", cwd=tmp_path)

    assert result.stdout == "fine\n"
    first, second = result.stderr.splitlines()
    assert first.startswith("dsh-llm: warning: the call was not logged: cannot open ")
    assert second.startswith("finish stop;")


def test_a_broken_log_database_does_not_break_a_chat(server, tmp_path, user_dir):
    (user_dir / "logs.db").write_bytes(b"garbage that is no database " * 100)
    server.enqueue(deepseek_text_reply(["still here"]))

    result = _chat(server, "hi", cwd=tmp_path)

    assert result.stdout == "still here\n"
    assert "dsh-llm: warning: the call was not logged: " in result.stderr
    shown = run_cli("logs")
    assert shown.returncode == 2
    assert shown.stderr.startswith("error: cannot open the log database ")


def test_a_failed_call_is_logged_with_its_error(server, tmp_path, user_dir):
    server.enqueue(Reply(status=500, reason="Server Error", body=b"", framing="length"))

    result = run_cli("chat", "hi", env=_env(server), cwd=tmp_path)

    assert result.returncode == 1
    (call,) = _logged(user_dir)
    assert call["finish"]["kind"] == "error"
    assert call["finish"]["failure"]["code"] == "SERVER"
    assert "SERVER" in run_cli("logs").stdout


def test_several_chats_at_once_are_all_logged(tmp_path, user_dir):
    with LoopbackServer() as server:
        server.handler = lambda request: deepseek_text_reply(
            ["echo: ", json.loads(request.body)["messages"][-1]["content"]]
        )
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "dsh_llm", "chat", f"prompt {n}"],
                env=_env(server),
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(5)
        ]
        for n, process in enumerate(processes):
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            assert out == f"echo: prompt {n}\n"
            assert "warning" not in err

    calls = _logged(user_dir)
    assert sorted(c["prompt"] for c in calls) == [f"prompt {n}" for n in range(5)]
    assert all(c["response"] == f"echo: {c['prompt']}" for c in calls)


# --- continuing a conversation ------------------------------------------------------


def test_chat_c_continues_the_last_conversation_with_its_reasoning(
    server, tmp_path, user_dir
):
    server.enqueue(
        deepseek_text_reply(["Paris."], reasoning=["Capital of France."]),
        deepseek_text_reply(["About 2 million."], reasoning=["Population."]),
    )
    _chat(server, "--system", "Be brief.", "Capital of France?", cwd=tmp_path)

    result = _chat(server, "-c", "How many people live there?", cwd=tmp_path)

    assert result.stdout == "About 2 million.\n"
    second = server.requests[1].json()
    # The system prompt, the first turn (with the reasoning DeepSeek needs
    # back), then the new prompt.
    assert second["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
        {
            "role": "assistant",
            "content": "Paris.",
            "reasoning_content": "Capital of France.",
        },
        {"role": "user", "content": "How many people live there?"},
    ]
    first, then = _logged(user_dir)
    assert first["conversationId"] == then["conversationId"]


def test_cid_continues_a_given_conversation_and_skips_failed_turns(server, tmp_path):
    server.enqueue(deepseek_text_reply(["A1"]), deepseek_text_reply(["B1"]))
    _chat(server, "first A", cwd=tmp_path)
    _chat(server, "first B", cwd=tmp_path)
    calls = json.loads(run_cli("logs", "--json").stdout)
    conversation_a = calls[0]["conversationId"]
    server.enqueue(Reply(status=500, reason="Server Error", body=b"", framing="length"))
    assert run_cli("chat", "--cid", conversation_a, "lost", env=_env(server)).returncode
    server.enqueue(deepseek_text_reply(["A2"]))

    _chat(server, "--cid", conversation_a[:10], "second A", cwd=tmp_path)

    messages = server.requests[-1].json()["messages"]
    assert [m["content"] for m in messages] == ["first A", "A1", "second A"]
    logged = json.loads(run_cli("logs", "--cid", conversation_a, "--json").stdout)
    assert [c["prompt"] for c in logged] == ["first A", "lost", "second A"]


def test_continuing_with_nothing_logged_is_a_usage_error(tmp_path):
    result = run_cli("chat", "-c", "hi", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: cannot continue a conversation: no log")
    unknown = run_cli("chat", "--cid", "nope", "hi", cwd=tmp_path)
    assert unknown.returncode == 2


SIGNATURE = "EqQBCkYIBxgCKkB0c2lnbmF0dXJlLWZvci1jbGk="


def _anthropic(payloads: list[dict[str, Any]]) -> Reply:
    body = b"".join(
        f"event: {p['type']}\ndata: {json.dumps(p)}\n\n".encode() for p in payloads
    )
    return Reply(body=body)


def _claude_answer(blocks: list[tuple[str, str]]) -> Reply:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 12, "output_tokens": 1},
            },
        }
    ]
    for index, (kind, text) in enumerate(blocks):
        if kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": text},
                {"type": "signature_delta", "signature": SIGNATURE},
            ]
        else:
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": text}]
        events.append(
            {"type": "content_block_start", "index": index, "content_block": start}
        )
        events += [
            {"type": "content_block_delta", "index": index, "delta": delta}
            for delta in deltas
        ]
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    return _anthropic(events)


def test_a_continued_claude_conversation_sends_back_its_signed_thinking(
    server, tmp_path
):
    server.enqueue(
        _claude_answer([("thinking", "They want a colour."), ("text", "Blue.")]),
        _claude_answer([("text", "Green.")]),
    )
    env = clean_env(ANTHROPIC_API_KEY="sk-ant", ANTHROPIC_BASE_URL=server.url)
    first = run_cli(
        "chat",
        "--provider",
        "anthropic",
        "--model",
        "claude-haiku-4-5",
        "--reasoning-effort",
        "low",
        "A colour?",
        env=env,
        cwd=tmp_path,
    )
    assert first.returncode == 0, first.stderr

    # -c alone: the route and model come from the conversation.
    then = run_cli(
        "chat", "-c", "--reasoning-effort", "low", "Another?", env=env, cwd=tmp_path
    )

    assert then.returncode == 0, then.stderr
    assert then.stdout == "Green.\n"
    second = server.requests[1].json()
    assert second["model"] == "claude-haiku-4-5"
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "They want a colour.",
                "signature": SIGNATURE,
            },
            {"type": "text", "text": "Blue."},
        ],
    }


def test_an_interactive_session_is_logged_and_continued(server, tmp_path, user_dir):
    server.enqueue(deepseek_text_reply(["One."]), deepseek_text_reply(["Two."]))
    result = run_cli(
        "chat", "-i", env=_env(server), cwd=tmp_path, stdin="first\nsecond\n"
    )
    assert result.returncode == 0, result.stderr
    calls = _logged(user_dir)
    assert [c["prompt"] for c in calls] == ["first", "second"]
    assert len({c["conversationId"] for c in calls}) == 1

    server.enqueue(deepseek_text_reply(["Three."]))
    result = run_cli(
        "chat", "-i", "-c", env=_env(server), cwd=tmp_path, stdin="third\n"
    )

    assert result.returncode == 0, result.stderr
    assert "4 messages so far" in result.stderr
    contents = [m["content"] for m in server.requests[-1].json()["messages"]]
    assert contents == ["first", "One.", "second", "Two.", "third"]
    assert len({c["conversationId"] for c in _logged(user_dir)}) == 1


def test_continuing_with_logging_off_says_the_turn_is_not_kept(
    server, tmp_path, monkeypatch, capsys
):
    server.enqueue(deepseek_text_reply(["A"]), deepseek_text_reply(["B"]))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    monkeypatch.setenv("DEEPSEEK_BASE_URL", server.url)
    assert main(["chat", "one"]) == 0
    assert main(["chat", "-c", "--no-log", "two"]) == 0
    assert "logging is off, so this turn will not be part" in capsys.readouterr().err


def _request_texts(request: RecordedRequest) -> list[str]:
    return [m["content"] for m in request.json()["messages"]]


@pytest.mark.parametrize("flag", ["-c", "--continue"])
def test_a_continued_base_url_conversation_goes_back_to_its_server(
    server, tmp_path, flag
):
    server.enqueue(deepseek_text_reply(["local one"]), deepseek_text_reply(["two"]))
    env = clean_env()
    first = run_cli(
        "chat", "--base-url", server.url, "--model", "m", "one", env=env, cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr

    then = run_cli("chat", flag, "two", env=env, cwd=tmp_path)

    assert then.returncode == 0, then.stderr
    assert server.requests[1].path == "/chat/completions"
    assert server.requests[1].json()["model"] == "m"
    assert _request_texts(server.requests[1]) == ["one", "local one", "two"]
