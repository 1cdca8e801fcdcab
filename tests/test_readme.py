"""Every code block of README.md, run.

Each fenced block carries a tag after its language (```` ```python notebook ````).
One test below covers each tag (``@covers``), and
``test_every_block_is_covered`` fails for a block without a tag, a repeated tag,
or a tag no test covers, so a new block cannot slip in untested. Python blocks run
as scripts in a fresh process against a loopback server: ``DEEPSEEK_BASE_URL``
points at it with a dummy ``DEEPSEEK_API_KEY``, and the documented local server
URL ``http://127.0.0.1:8080/v1`` is replaced by the server's. Shell blocks run in
bash with the same environment; YAML blocks are loaded with ``load_composition``.
"""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from dsh_llm import GenerateOptions
from dsh_llm import collect
from dsh_llm import create_user_message
from dsh_llm.plugins import load_composition
from dsh_llm.serde import chunk_from_json
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events
from dsh_llm.validator import assert_chunk_sequence

from .cli_run import clean_env
from .cli_run import deepseek_event
from .cli_run import deepseek_text_reply
from .cli_run import offline_env

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
LOCAL_URL = "http://127.0.0.1:8080/v1"
SETUP_COMMANDS = (
    "pip install -e . --config-settings editable_mode=compat && dsh-llm demo",
    "pip install -e '.[dev]' --config-settings editable_mode=compat && pytest",
)


@attrs.frozen(kw_only=True)
class Block:
    language: str
    tag: str | None
    code: str
    line: int


_FENCE = re.compile(r"^```([^`\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def readme_blocks() -> tuple[Block, ...]:
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        words = match.group(1).split()
        blocks.append(
            Block(
                language=words[0] if words else "",
                tag=words[1] if len(words) > 1 else None,
                code=match.group(2),
                line=text.count("\n", 0, match.start()) + 1,
            )
        )
    return tuple(blocks)


BLOCKS = readme_blocks()
COVERED: set[str] = set()


def covers(tag: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a test as the one that runs the README block tagged ``tag``."""
    COVERED.add(tag)
    return lambda test: test


def block(tag: str) -> Block:
    (found,) = [b for b in BLOCKS if b.tag == tag]
    return found


def test_every_block_is_covered():
    assert BLOCKS, "README.md has no code blocks?"
    untagged = [b.line for b in BLOCKS if b.tag is None]
    assert not untagged, f"README blocks without a tag at lines {untagged}"
    tags = [b.tag for b in BLOCKS]
    assert len(tags) == len(set(tags)), f"repeated README block tags: {tags}"
    assert set(tags) == COVERED, (
        f"README tags without a test: {set(tags) - COVERED}; "
        f"tests without a README block: {COVERED - set(tags)}"
    )


def _repository_url() -> str:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    return config["metadata"]["url"].rstrip("/")


LINK_BASE = f"{_repository_url()}/blob/main/"
"""Where README links point: the repository's files on its default branch, so
they work on a package index page, where no file sits beside the README."""


def _anchors(markdown: Path) -> set[str]:
    """The heading anchors GitHub makes for ``markdown`` (lower case, spaces to
    hyphens, punctuation other than ``-`` and ``_`` dropped)."""
    anchors = set()
    for line in markdown.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#{1,6} (.*)", line)
        if heading:
            title = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            anchors.add(title.replace(" ", "-"))
    return anchors


def test_every_link_works_on_a_package_index_page():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    relative = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert not relative, f"relative links break on a package index page: {relative}"
    ours = [t for t in targets if t.startswith(_repository_url())]
    assert len(ours) >= 10
    for link in ours:
        assert link.startswith(LINK_BASE), link
        path, _, anchor = link.removeprefix(LINK_BASE).partition("#")
        assert (ROOT / path).is_file(), f"{link} names no file of the repository"
        if anchor:
            assert anchor in _anchors(ROOT / path), f"{link}: no such heading"


def test_the_package_index_page_is_the_readme():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    assert config["metadata"]["long_description"] == "file: README.md"
    assert config["metadata"]["long_description_content_type"] == "text/markdown"


# --- the loopback model ---------------------------------------------------------


def _last_user_text(request: RecordedRequest) -> str:
    messages = request.json()["messages"]
    content = messages[-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def _tool_call_reply(name: str, arguments: str) -> Reply:
    events = [deepseek_event({"role": "assistant", "content": None})]
    call = {"index": 0, "id": "call_1", "type": "function"}
    events.append(
        deepseek_event(
            {"tool_calls": [{**call, "function": {"name": name, "arguments": ""}}]}
        )
    )
    for piece in (arguments[:5], arguments[5:]):
        events.append(
            deepseek_event(
                {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
            )
        )
    events.append(
        deepseek_event(
            {"content": ""},
            finish_reason="tool_calls",
            usage={"prompt_tokens": 20, "completion_tokens": 9},
        )
    )
    return Reply(body=sse_events(events))


def _answer(request: RecordedRequest) -> Reply:
    """Echo the prompt; a prompt containing "fail" gets an HTTP 500. A request
    for JSON gets a JSON object (in small pieces); one with tools calls the first
    tool once, then answers with the tool's result."""
    body = request.json()
    last = body["messages"][-1]
    if last["role"] == "tool":
        return deepseek_text_reply(["The tool says: ", last["content"]])
    if body.get("tools"):
        name = body["tools"][0]["function"]["name"]
        return _tool_call_reply(name, '{"city": "Paris"}')
    if body.get("response_format") == {"type": "json_object"}:
        answer = '{"city": "Paris", "country": "France"}'
        return deepseek_text_reply(
            [answer[i : i + 7] for i in range(0, len(answer), 7)]
        )
    prompt = _last_user_text(request)
    if "fail" in prompt:
        return Reply(status=500, reason="Server Error", body=b"", framing="length")
    return deepseek_text_reply(["You said: ", prompt], reasoning=["Echo it."])


@pytest.fixture(scope="module")
def model() -> Iterator[LoopbackServer]:
    with LoopbackServer(handler=_answer) as server:
        yield server


@pytest.fixture
def env(model: LoopbackServer) -> dict[str, str]:
    return clean_env(DEEPSEEK_API_KEY="sk-readme", DEEPSEEK_BASE_URL=model.url)


def _local(code: str, model: LoopbackServer) -> str:
    assert LOCAL_URL in code
    return code.replace(LOCAL_URL, f"{model.url}/v1")


def run_python(
    code: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    script = cwd / "readme_block.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def run_shell(
    code: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


# --- the blocks -----------------------------------------------------------------


@covers("setup")
def test_setup_commands_are_the_ones_ci_runs_and_the_demo_works(tmp_path):
    commands = tuple(
        line.split("#", 1)[0].strip() for line in block("setup").code.splitlines()
    )
    assert commands == SETUP_COMMANDS
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert SETUP_COMMANDS[1] in ci.splitlines()
    assert "dsh-llm = dsh_llm.cli:main" in (ROOT / "setup.cfg").read_text()
    # The demo needs no key and no network: no DeepSeek variables, a dead proxy.
    offline = offline_env()
    result = run_shell(SETUP_COMMANDS[0].split(" && ")[1], offline, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "strict validation: passed" in result.stdout
    assert result.stdout.endswith("finish: tool-calls\n")


@covers("quickstart-deepseek")
def test_quickstart_streams_deepseek_text(model, env, tmp_path):
    result = run_python(block("quickstart-deepseek").code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: Explain SSE in one sentence."
    assert model.requests[-1].header("authorization") == "Bearer sk-readme"


@covers("quickstart-local")
def test_quickstart_streams_from_a_local_openai_compatible_server(model, env, tmp_path):
    del env["DEEPSEEK_API_KEY"]
    code = _local(block("quickstart-local").code, model)
    result = run_python(code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: Explain SSE in one sentence."
    request = model.requests[-1]
    assert request.path == "/v1/chat/completions"
    assert request.header("authorization") is None
    assert request.json()["model"] == "qwen2.5-7b-instruct"


@covers("protocol")
def test_protocol_example_is_a_strict_valid_stream():
    chunks = [chunk_from_json(line) for line in block("protocol").code.splitlines()]
    assert_chunk_sequence(chunks, strict=True)
    reply = collect(chunks)
    assert reply.finish.kind == "tool-calls"
    assert [call.name for call in reply.tool_calls] == ["get_weather"]


@covers("notebook")
def test_notebook_streams_then_collects(env, tmp_path):
    result = run_python(block("notebook").code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "You said: Name three rivers."
    assert lines[1] == "You said: Name three rivers."
    assert lines[2] == "in 9 / out 7 (cache 3) stop"


_FLASK_CHECK = """

client = app.test_client()
answer = client.post("/ask", data={"question": "What is SSE?"})
assert answer.status_code == 200, answer.status_code
assert answer.is_streamed
assert answer.mimetype == "text/event-stream", answer.mimetype
print(answer.get_data(as_text=True), end="")
failed = client.post("/ask", data={"question": "please fail"})
print(failed.status_code, failed.mimetype, failed.get_data(as_text=True))
"""


@covers("one-call")
def test_one_call_prints_the_text(env, tmp_path):
    code = block("one-call").code
    assert len([line for line in code.splitlines() if line.strip()]) == 4
    result = run_python(code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: Name a river.\n"


@covers("conversation")
def test_conversation_keeps_the_messages(model, env, tmp_path):
    result = run_python(block("conversation").code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "You said: Name a colour.",
        "You said: And another one?",
        "4 messages",
    ]
    sent = model.requests[-1].json()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == "You said: Name a colour."


@covers("structured")
def test_structured_output_parses_and_streams_partial_json(model, env, tmp_path):
    result = run_python(block("structured").code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "{'city': 'Paris', 'country': 'France'}"
    assert lines[-1] == lines[0]
    assert "{'city': 'Pari'}" in lines  # a cut string shows as its prefix
    assert model.requests[-1].json()["response_format"] == {"type": "json_object"}


@covers("structured-types")
def test_structured_output_into_a_dataclass(model, env, tmp_path):
    result = run_python(block("structured-types").code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Capital(city='Paris', country='France')\n"
    assert model.requests[-1].json()["response_format"] == {"type": "json_object"}


@covers("tools")
def test_tool_loop_runs_the_tool_and_answers(model, env, tmp_path):
    code = block("tools").code
    assert (
        len([line for line in code.splitlines() if line.strip()]) == 6
    )  # the tool (3), the loop (1), imports (2)
    result = run_python(code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "The tool says: 22 C and sunny in Paris\n"
    first, second = (r.json() for r in model.requests[-2:])
    assert first["tools"][0]["function"]["parameters"]["required"] == ["city"]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "22 C and sunny in Paris",
    }


@covers("tools-stream")
def test_tool_loop_streams_each_step(env, tmp_path):
    result = run_python(block("tools-stream").code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        '[get_weather({"city": "Paris"})]',
        "The tool says: 22 C and sunny in Paris",
        "finished 4 messages",
    ]


@covers("flask")
def test_flask_view_streams_events_and_fails_with_a_status(env, tmp_path):
    result = run_python(block("flask").code + _FLASK_CHECK, env, tmp_path)

    assert result.returncode == 0, result.stderr
    events = [
        'event: block\ndata: {"type": "reasoning"}',
        'event: reasoning\ndata: {"text": "Echo it."}',
        'event: block\ndata: {"type": "text"}',
        'event: text\ndata: {"text": "You said: "}',
        'event: text\ndata: {"text": "What is SSE?"}',
        'event: done\ndata: {"finish": "stop"}',
    ]
    # The model answered HTTP 500 before any byte: the view says 502 Bad
    # Gateway, with the failure's code, instead of a 200 carrying an error.
    failed = '502 application/json {"error": "SERVER"}\n'
    assert result.stdout == "".join(f"{e}\n\n" for e in events) + failed


@covers("batch")
def test_batch_answers_every_prompt_in_order(model, env, tmp_path):
    before = len(model.requests)
    result = run_python(block("batch").code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Name a prime. -> You said: Name a prime.",
        "Name a colour. -> You said: Name a colour.",
        "Name a river. -> You said: Name a river.",
    ]
    assert len(model.requests) - before == 3


@covers("async")
def test_async_example_streams_text(env, tmp_path):
    result = run_python(block("async").code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: Say hello."
    assert result.stderr == ""


def _plugin_dir(tmp_path: Path) -> Path:
    (tmp_path / "my_llm_adapter.py").write_text(
        block("plugin-module").code, encoding="utf-8"
    )
    (tmp_path / "dsh.yml").write_text(block("plugin-config").code, encoding="utf-8")
    return tmp_path


@covers("plugin-module")
@covers("plugin-config")
def test_plugin_module_and_config_load_through_load_composition(tmp_path):
    directory = _plugin_dir(tmp_path)

    environ = {"MY_API_KEY": "sk-readme-secret"}
    with load_composition(directory / "dsh.yml", environ=environ) as comp:
        assert [p.id for p in comp.runtime.list_providers()] == ["my-provider"]
        assert comp.plugins[0].config.api_key == "sk-readme-secret"
        assert "sk-readme-secret" not in repr(comp.plugins[0].config)
        options = GenerateOptions(
            provider="my-provider",
            model="echo-1",
            messages=(create_user_message("echo me"),),
        )
        chunks = list(comp.runtime.stream(options))
    assert_chunk_sequence(chunks, strict=True)
    assert collect(chunks).text == "echo me"


@covers("plugin-cli")
def test_plugin_is_used_by_the_command_line(tmp_path):
    directory = _plugin_dir(tmp_path)

    result = run_shell(block("plugin-cli").code, clean_env(), directory)

    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"my-provider  (my-provider, {directory / 'dsh.yml'})\n"
        "  (no models listed; pass --model to chat)\n"
        "hello from my adapter\n"
    )
    assert result.stderr == "finish stop; usage: not reported\n"


@covers("cli-memory")
def test_cli_memory_examples_run(model, tmp_path):
    user_dir = tmp_path / "user"
    env = clean_env(
        DEEPSEEK_BASE_URL=model.url,
        MY_DEEPSEEK_KEY="sk-stored",
        DSH_LLM_USER_DIR=str(user_dir),
    )
    before = len(model.requests)

    result = run_shell(block("cli-memory").code, env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert "sk-stored" not in result.stdout + result.stderr
    requests = model.requests[before:]
    assert [r.header("authorization") for r in requests] == ["Bearer sk-stored"] * 3
    first, then, aliased = (r.json() for r in requests)
    # -c sent the first turn back, its reasoning with it.
    assert then["messages"] == [
        *first["messages"],
        {
            "role": "assistant",
            "content": "You said: Name a colour.",
            "reasoning_content": "Echo it.",
        },
        {"role": "user", "content": "Another one?"},
    ]
    assert aliased["model"] == "deepseek-v4-pro"
    # The logs show both calls of the conversation, oldest first.
    shown = result.stdout
    assert shown.index("## Prompt\n\nName a colour.") < shown.index(
        "## Prompt\n\nAnother one?"
    )
    assert (user_dir / "logs.db").is_file()


@covers("cli")
def test_cli_examples_run(model, tmp_path):
    env = clean_env(DEEPSEEK_BASE_URL=model.url)
    before = len(model.requests)
    result = run_shell(_local(block("cli").code, model), env, tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "demo.jsonl: valid (strict): 23 chunks, 3 blocks, finish tool-calls",
        "You said: Explain SSE in one sentence.",
    ]
    traced = lines[2:11]
    assert [line.split(" ", 2)[:2] for line in traced] == [
        ["[answer.jsonl]", f"#{n}"] for n in range(1, 10)
    ]
    assert lines[11:14] == [
        "[answer.jsonl] total chunks 9, order check passed",
        "You said: Hello",
        "deepseek-official  (DeepSeek, built-in)",
    ]
    # Three DeepSeek models, the built-in Anthropic route and its six, Gemini
    # and its five, then Ollama, whose models only its server lists.
    assert lines[17] == "anthropic  (Anthropic, built-in)"
    assert lines[24] == "gemini  (Gemini, built-in)"
    assert lines[30:32] == [
        "ollama  (Ollama, built-in)",
        "  (the server lists its models: pass --model to chat)",
    ]
    assert lines[32] == "groq  (Groq, built-in)"  # the hosted services follow
    # No AWS region nor Azure resource here: both listed last, not available.
    assert lines[-4] == "bedrock  (Amazon Bedrock, built-in)"
    assert lines[-2] == "azure  (Azure OpenAI, built-in)"
    assert lines[-1].startswith("  (not available here: ")
    recorded = (tmp_path / "answer.jsonl").read_text(encoding="utf-8")
    answer = [chunk_from_json(line) for line in recorded.splitlines()]
    assert_chunk_sequence(answer, strict=True)
    assert collect(answer).text == "You said: Summarise: streams beat polling.\n"
    paths = [r.path for r in model.requests[before:]]
    assert paths == ["/chat/completions", "/chat/completions", "/v1/chat/completions"]
