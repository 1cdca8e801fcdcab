"""Cassettes recorded from real servers (``tools/record_servers.py``), replayed
through the adapter that recorded them (issue 26, "Real servers").

``tests/fixtures/cassettes/<server>-<wire>/`` holds, per server and wire, a text
answer, a forced tool call (``tool_required``), a tool named in ``tool_choice``
(``tool_named``), a two-turn tool loop, a ``max_tokens`` cut, eight concurrent
streams, sixteen back-to-back requests and a server killed mid-stream;
``facts.json`` beside them is what each call gave live. CI never needs a server.

Every replay is strictly validated and must give what the live call gave; the
text the adapter assembles must be exactly the text the wire carried (read here
by a few lines per wire, independently of the translators). Where a recording
shows an adapter bug, the test of the right behaviour is a strict ``xfail``
naming it (``FINDINGS``), so fixing the bug turns it into a failure to remove.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_llm import LlmRuntime
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import UsageChunk
from dsh_llm.testing import Cassette
from dsh_llm.testing import assert_adapter_conforms
from dsh_llm.testing.replay import replay_base_url
from dsh_llm.testing.replay import replay_options
from dsh_llm.testing.replay import replay_server
from dsh_llm.validator import validate_stream

CASSETTES = Path(__file__).resolve().parent.parent / "fixtures" / "cassettes"
SERVERS = ("llama-server-", "llama-cpp-python-", "litellm-")
KEY = "sk-replay-placeholder"

Factory = Callable[..., Any]

FACTORIES: dict[str, Factory] = {
    "dsh_llm.adapters.openai_compat:OpenAICompatAdapter": (
        lambda base, **kw: OpenAICompatAdapter(base, **kw)
    ),
    "dsh_llm.adapters.anthropic:AnthropicAdapter": (
        lambda base, **kw: AnthropicAdapter(api_key=KEY, base_url=base, **kw)
    ),
    "dsh_llm.adapters.openai_responses:OpenAIResponsesAdapter": (
        lambda base, **kw: OpenAIResponsesAdapter(base, **kw)
    ),
    "dsh_llm.adapters.gemini:GeminiAdapter": (
        lambda base, **kw: GeminiAdapter(api_key=KEY, base_url=base, **kw)
    ),
}


TARGET_OPTIONS: dict[str, dict[str, Any]] = {
    # What a user tells the adapter about the server behind it (the recordings
    # were made without it): llama-server's profile reads its unmarked cut.
    "llama-server-responses": {"server": "llamacpp"},
    # LiteLLM's openai/ route passes llama-server's unmarked cut on, on both wires.
    "litellm-llama-server-responses": {"unmarked_cap_cut": True},
    "litellm-llama-server-messages": {"unmarked_cap_cut": True},
}
"""Adapter keywords a target is replayed with (besides the factory's)."""


def _target_dirs() -> list[Path]:
    return sorted(
        path
        for path in CASSETTES.iterdir()
        if path.is_dir() and path.name.startswith(SERVERS)
    )


def _cassettes() -> list[tuple[str, Path]]:
    found = []
    for target in _target_dirs():
        for path in sorted(target.rglob("*.jsonl")):
            found.append((path.relative_to(CASSETTES).as_posix(), path))
    return found


CASES = _cassettes()


def _facts(path: Path) -> dict[str, Any]:
    """What the live call of ``path`` gave (``facts.json`` of its target)."""
    relative = path.relative_to(CASSETTES)
    target = relative.parts[0]
    facts = json.loads((CASSETTES / target / "facts.json").read_text("utf-8"))
    if len(relative.parts) == 3:
        fact: dict[str, Any] = facts[relative.parts[1]][relative.name]
        return fact
    single: dict[str, Any] = facts[path.stem]
    return single


@functools.cache
def _replay(path: Path) -> dict[str, Any]:
    """The outcome of replaying ``path``, in the shape of ``facts.json`` (one
    replay per file for the whole module: the tests only read it)."""
    cassette = Cassette.load(path)
    assert cassette.adapter is not None
    target = path.relative_to(CASSETTES).parts[0]
    return _outcome(_runtime_chunks(cassette, **TARGET_OPTIONS.get(target, {})))


def _runtime_chunks(cassette: Cassette, **adapter_options: Any) -> list[StreamChunk]:
    """What a runtime consumer sees (a raised failure is the last finish, after
    the usage the adapter reported), strictly validated. The request carries
    the output cap the recording asked for."""
    options = replay_options(cassette, max_tokens=_cap(cassette))
    with replay_server(cassette, 0.0) as server:
        factory = FACTORIES[cassette.adapter]  # type: ignore[index]
        adapter = factory(replay_base_url(server, cassette), **adapter_options)
        runtime = LlmRuntime()
        try:
            runtime.register_adapter([options.provider], adapter)
            return list(validate_stream(runtime.stream(options), strict=True))
        finally:
            adapter.close()


def _outcome(chunks: list[StreamChunk]) -> dict[str, Any]:
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    failure = finish.reason.failure
    usage = next((c.usage for c in chunks if isinstance(c, UsageChunk)), None)
    return {
        "finish": finish.reason.kind,
        "failure": None if failure is None else failure.code,
        "message": None if failure is None else failure.message,
        "text": "".join(c.text for c in chunks if isinstance(c, TextDelta)),
        "toolCalls": [
            {"name": c.block.name, "arguments": c.block.arguments}
            for c in chunks
            if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallBlock)
        ],
        "usage": None
        if usage is None
        else {"input": usage.input_tokens, "output": usage.output_tokens},
    }


# --- the wire, read independently -------------------------------------------------


def _events(cassette: Cassette) -> list[tuple[str | None, Any]]:
    """``(event name, decoded data)`` of every complete SSE event of the body."""
    text = cassette.response.body.decode("utf-8").replace("\r\n", "\n")
    events = []
    for block in text.split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if not data or data == ["[DONE]"]:
            continue
        try:
            events.append((name, json.loads("\n".join(data))))
        except ValueError:
            continue
    return events


def _wire_text(cassette: Cassette) -> str:
    """The answer text the server sent, however its wire spells it."""
    parts = []
    for _name, data in _events(cassette):
        if not isinstance(data, dict):
            continue
        for choice in data.get("choices") or ():
            content = (choice.get("delta") or {}).get("content")
            if choice.get("index", 0) == 0 and isinstance(content, str):
                parts.append(content)
        delta = data.get("delta")
        if (
            data.get("type") == "content_block_delta"
            and isinstance(delta, dict)
            and delta.get("type") == "text_delta"
        ):
            parts.append(delta["text"])
        if data.get("type") == "response.output_text.delta":
            parts.append(data["delta"])
        for candidate in data.get("candidates") or ():
            for part in (candidate.get("content") or {}).get("parts") or ():
                if isinstance(part.get("text"), str) and not part.get("thought"):
                    parts.append(part["text"])
    return "".join(parts)


def _cap(cassette: Cassette) -> int | None:
    """The output cap the request asked for, whatever the wire calls it."""
    body = cassette.request.json()
    for key in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
        if isinstance(body.get(key), int):
            value: int = body[key]
            return value
    config = body.get("generationConfig") or {}
    cap = config.get("maxOutputTokens")
    return cap if isinstance(cap, int) else None


# --- findings ---------------------------------------------------------------------

RESPONSES_CUT = (
    "llama-server's /v1/responses ends a max_output_tokens cut with status "
    '"completed" and no incomplete_details; only usage.output_tokens == the cap '
    "shows it (issue 26.20): the cut comes out stop"
)
LITELLM_RESPONSES_CUT = (
    "LiteLLM's openai/ route sends /v1/responses and /v1/messages on to "
    "llama-server's /v1/responses, whose cut says completed: LiteLLM passes "
    "status completed / stop_reason end_turn on, so the cut comes out stop"
)
ANTHROPIC_FLAT_ERROR = (
    "llama-server's /v1/messages reports an in-stream failure as `event: error` "
    'with an OpenAI-style payload {"code":500,"message":...,"type":"server_error"}; '
    "the Anthropic translator dispatches on the payload's type (server_error, "
    "unknown) instead of the event name, drops the error and ends STREAM_CLOSED "
    "(ended before message_stop) without the server's message"
)
ANTHROPIC_SPLIT_CALL = (
    "LiteLLM's /v1/messages over a chat-completions route sends one tool_use "
    "block per argument fragment, all with the same id (then one more with no "
    "input); the Anthropic translator reports seven calls whose arguments are "
    "fragments such as '{\"' and finishes tool-calls: blocks repeating an id must "
    "be one call, or MALFORMED_RESPONSE, never calls with broken arguments"
)
RESPONSES_EMPTY_PART = (
    "LiteLLM's /v1/responses answers an upstream that sent nothing (llama-cpp-python "
    "crashed, or interrupted the request) with a message item holding one empty "
    "output_text part and status completed; the Responses translator opens and "
    "ends an empty text block and finishes stop, where an answer without content "
    "is EMPTY_RESPONSE (protocol rule 10)"
)
GEMINI_ZERO_USAGE = (
    "LiteLLM's Gemini route sends usageMetadata with promptTokenCount, "
    "candidatesTokenCount and totalTokenCount all 0 beside a generated answer; "
    "the Gemini adapter reports output_tokens=0 (never under-report: unknown is None)"
)
GEMINI_RANDOM_IDS = (
    "a Gemini functionCall without an id (LiteLLM's Gemini route sends none) gets "
    "a random id from the Gemini adapter, so the same bytes replayed twice give "
    "different chunks and assert_adapter_conforms cannot compare its variants; "
    "an id derived from the call's position would make a replay reproducible"
)


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _finding(relative: str) -> str | None:
    """Why the right outcome of ``relative`` is not what the adapter gives, if
    a finding says so."""
    path = CASSETTES / relative
    facts = _facts(path)
    target = relative.split("/")[0]
    cassette = Cassette.load(path)
    cap = _cap(cassette)
    usage = facts.get("usage") or {}
    stopped = facts.get("finish") == "stop"
    if stopped and cap is not None and usage.get("output") == cap:
        if target == "llama-server-responses":
            return RESPONSES_CUT
        if target in (
            "litellm-llama-server-responses",
            "litellm-llama-server-messages",
        ):
            return LITELLM_RESPONSES_CUT
    if stopped and not facts["text"] and not facts["toolCalls"]:
        return RESPONSES_EMPTY_PART
    calls = facts.get("toolCalls") or []
    if facts.get("finish") == "tool-calls" and not all(
        _json_object(call["arguments"]) for call in calls
    ):
        return ANTHROPIC_SPLIT_CALL
    answered = facts.get("text") or calls
    if target.endswith("-gemini") and answered and usage.get("output") == 0:
        return GEMINI_ZERO_USAGE
    if facts.get("error") == "STREAM_CLOSED" and any(
        name == "error" and isinstance(data, dict) and data.get("type") != "error"
        for name, data in _events(cassette)
    ):
        return ANTHROPIC_FLAT_ERROR
    return None


FINDINGS = {relative: _finding(relative) for relative, _ in CASES}
FIXED = frozenset(
    {
        RESPONSES_EMPTY_PART,
        ANTHROPIC_FLAT_ERROR,
        ANTHROPIC_SPLIT_CALL,
        GEMINI_ZERO_USAGE,
        GEMINI_RANDOM_IDS,
        RESPONSES_CUT,
        LITELLM_RESPONSES_CUT,
    }
)
"""Findings the adapters now get right: their files replay to the right outcome
instead of what the live call gave."""


def _same(replayed: dict[str, Any], expected: dict[str, Any]) -> None:
    if "error" in expected:
        # Raised by the adapter live; the runtime makes it the last finish. Its
        # message names the endpoint, whose port differs between the recording
        # proxy and the replay server: the code must match.
        assert replayed["finish"] in ("error", "aborted"), replayed
        assert replayed["failure"] == expected["error"], replayed
        if expected["error"] == "SERVER":
            assert replayed["message"] == expected["message"]
        return
    assert replayed == expected


def _check_right(relative: str, replayed: dict[str, Any]) -> None:
    """Assert that ``replayed`` is the right outcome of ``relative``: what the
    live call gave, unless a finding says what it should have been."""
    path = CASSETTES / relative
    facts = dict(_facts(path))
    reason = FINDINGS[relative]
    if reason in (RESPONSES_CUT, LITELLM_RESPONSES_CUT):
        facts["finish"] = "max-tokens"
    elif reason == GEMINI_ZERO_USAGE:
        facts["usage"] = {"input": None, "output": None}
    elif reason == ANTHROPIC_FLAT_ERROR:
        error = next(
            data for name, data in _events(Cassette.load(path)) if name == "error"
        )
        facts = {"error": "SERVER", "message": error["message"]}
    elif reason == RESPONSES_EMPTY_PART:
        code = replayed.get("failure") or replayed.get("error")
        assert code == "EMPTY_RESPONSE", replayed
        return
    elif reason == ANTHROPIC_SPLIT_CALL:
        calls = replayed.get("toolCalls") or []
        assert replayed.get("finish") != "tool-calls" or all(
            _json_object(call["arguments"]) for call in calls
        ), replayed
        return
    _same(replayed, facts)


# --- tests ------------------------------------------------------------------------


def test_every_server_and_wire_that_runs_here_was_recorded():
    names = {path.name for path in _target_dirs()}
    assert {
        "llama-server-chat",
        "llama-server-messages",
        "llama-server-responses",
        "litellm-llama-server-chat",
        "litellm-llama-server-messages",
        "litellm-llama-server-responses",
        "litellm-llama-server-gemini",
        "llama-cpp-python-chat",
        "litellm-llama-cpp-python-chat",
        "litellm-llama-cpp-python-messages",
        "litellm-llama-cpp-python-responses",
        "litellm-llama-cpp-python-gemini",
    } <= names
    for target in _target_dirs():
        files = {p.relative_to(target).as_posix() for p in target.rglob("*.jsonl")}
        for scenario in ("text", "tool_required", "tool_named", "length", "killed"):
            assert f"{scenario}.jsonl" in files, (target.name, scenario)
        assert "tool_loop-1.jsonl" in files
        assert len([f for f in files if f.startswith("concurrent/")]) == 8
        assert len([f for f in files if f.startswith("back_to_back/")]) == 16


@pytest.mark.parametrize("relative", [r for r, _ in CASES])
def test_a_replay_gives_what_the_live_call_gave(relative):
    replayed = _replay(CASSETTES / relative)
    if FINDINGS[relative] in FIXED:
        _check_right(relative, replayed)
    else:
        _same(replayed, _facts(CASSETTES / relative))


def _finding_groups() -> dict[tuple[str, str], list[str]]:
    groups: dict[tuple[str, str], list[str]] = {}
    for relative, reason in FINDINGS.items():
        if reason is not None and reason not in FIXED:
            groups.setdefault((relative.split("/")[0], reason), []).append(relative)
    return groups


@pytest.mark.parametrize(
    "files",
    [
        pytest.param(
            files,
            id=f"{target}: {len(files)} files",
            marks=pytest.mark.xfail(strict=True, reason=reason),
        )
        for (target, reason), files in _finding_groups().items()
    ],
)
def test_a_finding_is_replayed_rightly(files):
    # One test per server and finding; it passes only once every file is right.
    for relative in files:
        _check_right(relative, _replay(CASSETTES / relative))


@pytest.mark.parametrize(
    "relative", [r for r, path in CASES if "error" not in _facts(path)]
)
def test_the_assembled_text_is_the_text_on_the_wire(relative):
    path = CASSETTES / relative
    assert _replay(path)["text"] == _wire_text(Cassette.load(path))


def _conformance_case(relative: str) -> Any:
    facts = _facts(CASSETTES / relative)
    if (
        GEMINI_RANDOM_IDS not in FIXED
        and "-gemini/" in relative
        and facts.get("toolCalls")
    ):
        return pytest.param(
            relative, marks=pytest.mark.xfail(strict=True, reason=GEMINI_RANDOM_IDS)
        )
    return relative


@pytest.mark.parametrize(
    "relative",
    [
        _conformance_case(r)
        for r, path in CASES
        # An empty body has no events to vary; replayed as Content-Length: 0 it
        # is EMPTY_RESPONSE by the transport's rule, chunked STREAM_CLOSED.
        if r.endswith(("/text.jsonl", "/tool_required.jsonl"))
        and Cassette.load(path).response.body
    ],
)
def test_a_real_recording_survives_the_hostile_variants(relative):
    cassette = Cassette.load(CASSETTES / relative)
    assert cassette.adapter is not None
    report = assert_adapter_conforms(
        FACTORIES[cassette.adapter], CASSETTES / relative, max_cuts=6
    )
    assert report.variants[0] == "recorded"
