"""examples/my_llm_adapter.py and .yml: the skeleton plugin works as written."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dsh_llm import AbortController
from dsh_llm import Finish
from dsh_llm import GenerateOptions
from dsh_llm import LlmRuntime
from dsh_llm import TextDelta
from dsh_llm import TokenUsage
from dsh_llm import ToolSchema
from dsh_llm import UsageChunk
from dsh_llm import collect
from dsh_llm import create_user_message
from dsh_llm import validate_stream
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins import load_composition
from dsh_llm.protocol import create_assistant_message

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMPOSITION = EXAMPLES / "my_llm_adapter.yml"
ENV = {"MY_API_KEY": "sk-example-key-123"}


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location(
        "my_llm_adapter_under_test", EXAMPLES / "my_llm_adapter.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def request(text: str = "hello there world", **changes: Any) -> GenerateOptions:
    return GenerateOptions(
        provider="my-provider",
        model="echo-1",
        messages=(
            create_user_message("an older question"),
            create_assistant_message("an answer", provider="my-provider", model="x"),
            create_user_message(text),
        ),
        **changes,
    )


def test_the_example_module_has_the_skeleton_names(example: ModuleType) -> None:
    assert example.name == "my-llm-adapter"
    assert example.inject == ("llm",)
    config = example.Config(api_key="k", providers=["p"])
    assert (config.api_key, config.providers) == ("k", ["p"])
    assert callable(example.apply)


def test_the_example_composition_boots_and_streams_with_the_env_key() -> None:
    with load_composition(COMPOSITION, environ=ENV) as composition:
        assert [p.id for p in composition.runtime.list_providers()] == ["my-provider"]
        assert composition.plugins[0].config.api_key == ENV["MY_API_KEY"]
        chunks = list(validate_stream(composition.runtime.stream(request())))
    texts = [chunk.text for chunk in chunks if isinstance(chunk, TextDelta)]
    assert texts == ["hello", " there", " world"]
    assert chunks[-2] == UsageChunk(usage=TokenUsage.unknown())
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.kind == "stop"
    assert composition.runtime.list_providers() == ()


def test_the_echo_is_a_valid_stream_that_assembles_to_the_prompt() -> None:
    with load_composition(COMPOSITION, environ=ENV) as composition:
        response = collect(validate_stream(composition.runtime.stream(request())))
    assert response.text == "hello there world"


def test_the_example_honours_stop_and_max_tokens() -> None:
    with load_composition(COMPOSITION, environ=ENV) as composition:
        stopped = collect(composition.runtime.stream(request(stop=(" world",))))
        capped_chunks = list(
            validate_stream(composition.runtime.stream(request(max_tokens=2)))
        )
        empty = list(validate_stream(composition.runtime.stream(request(text=""))))
    assert stopped.text == "hello there"
    assert "".join(c.text for c in capped_chunks if isinstance(c, TextDelta)) == (
        "hello there"
    )
    assert isinstance(capped_chunks[-1], Finish)
    assert capped_chunks[-1].reason.kind == "max-tokens"
    assert [chunk.type for chunk in empty] == ["usage", "finish"]


def test_a_forced_tool_call_is_refused_as_unsupported() -> None:
    tool = ToolSchema(name="lookup", description="d", parameters={"type": "object"})
    with load_composition(COMPOSITION, environ=ENV) as composition:
        chunks = list(
            composition.runtime.stream(request(tools=(tool,), tool_choice="required"))
        )
    (finish,) = chunks
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.UNSUPPORTED_OPTION


def test_an_abort_mid_stream_ends_with_an_aborted_finish() -> None:
    controller = AbortController()
    with load_composition(COMPOSITION, environ=ENV) as composition:
        stream = composition.runtime.stream(request(signal=controller.signal))
        first = [next(stream), next(stream)]
        controller.abort()
        rest = list(stream)
    assert [chunk.type for chunk in first] == ["block-start", "text-delta"]
    assert isinstance(rest[-1], Finish)
    assert rest[-1].reason.kind == "aborted"
    assert len(rest) == 1


def test_apply_can_be_called_directly_and_undone(example: ModuleType) -> None:
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="direct")
    example.apply(ctx, example.Config(api_key="sk-direct", providers=["a", "b"]))
    assert [p.id for p in runtime.list_providers()] == ["a", "b"]
    ctx.dispose()
    assert runtime.list_providers() == ()


def test_the_api_key_never_shows_in_the_adapter_repr(example: ModuleType) -> None:
    adapter = example.MyAdapter("sk-very-secret")
    assert "sk-very-secret" not in repr(vars(adapter))


def test_the_api_key_never_shows_in_the_config_repr(example: ModuleType) -> None:
    config = example.Config(api_key="sk-very-secret", providers=["p"])
    assert "sk-very-secret" not in repr(config)
    assert repr(config) == "Config(providers=['p'])"


def test_the_example_runs_as_a_script() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "my_llm_adapter.py"), "hi", "there"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **ENV},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hi there\n[finish: stop]\n"


def test_the_example_script_without_the_key_explains_what_is_missing() -> None:
    environ = {k: v for k, v in os.environ.items() if k != "MY_API_KEY"}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "my_llm_adapter.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
        check=False,
    )
    assert result.returncode != 0
    assert 'config key "apiKey" refers to ${MY_API_KEY}, which is not set' in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("changes", "option"),
    [
        ({"system": "Be brief."}, "system"),
        ({"temperature": 0.7}, "temperature"),
        (
            {
                "tools": (
                    ToolSchema(
                        name="lookup", description="d", parameters={"type": "object"}
                    ),
                )
            },
            "tools",
        ),
        ({"reasoning_effort": "high"}, "reasoning_effort"),
    ],
    ids=["system", "temperature", "tools", "reasoning_effort"],
)
def test_what_an_echo_cannot_honour_is_refused_not_dropped(
    example, changes, option
) -> None:
    # The adapter itself, since the runtime refuses an unadvertised effort first.
    with pytest.raises(LlmError) as caught:
        list(example.MyAdapter("k").stream(request(**changes)))
    assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    assert caught.value.message == f"my-llm-adapter: this model cannot honour {option}"


def test_an_empty_api_key_is_refused_at_load() -> None:
    from dsh_llm.plugins import PluginLoadError

    with pytest.raises(PluginLoadError) as caught:
        load_composition(COMPOSITION, environ={"MY_API_KEY": ""})
    assert 'config key "apiKey"' in caught.value.message


@pytest.mark.parametrize(
    "fields",
    [
        {"response_format": {"type": "object"}},
        {"extra_body": {"top_k": 1}},
        {"extra_headers": {"x-a": "1"}},
    ],
)
def test_structured_output_and_provider_fields_are_refused(fields) -> None:
    with load_composition(COMPOSITION, environ=ENV) as composition:
        chunks = list(composition.runtime.stream(request(**fields)))
    (finish,) = chunks
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.UNSUPPORTED_OPTION
