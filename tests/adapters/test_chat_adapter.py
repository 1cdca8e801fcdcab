"""What the chat-completions families share (dsh_llm.adapters.chat): one rule for
the API root, whichever adapter and wherever the URL comes from, and the keyed
config errors of the timeouts and the retry policy in both config classes."""

from __future__ import annotations

import importlib
import math
import pickle
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import WireAdapter
from dsh_llm.adapters import api_root_url
from dsh_llm.adapters import deepseek as deepseek_module
from dsh_llm.adapters import endpoint_url
from dsh_llm.adapters import openai_compat as openai_compat_module
from dsh_llm.adapters.chat.request import CHAT_COMPLETIONS_PATH
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.deepseek import DeepSeekConfig
from dsh_llm.adapters.deepseek import resolve_base_url
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatConfig
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.plugins.builtin import DEEPSEEK as deepseek_plugin
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.retry import NormalRetryPolicy
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events
from dsh_llm.validator import validate_stream

from .chat_chunks import FIRST
from .chat_chunks import finish
from .chat_chunks import text


def _root(value: object, source: str | None = None) -> str:
    """The shared rule for a chat-completions root, for a package "pkg"."""
    return api_root_url(
        value, package="pkg", source=source, endpoint=CHAT_COMPLETIONS_PATH
    )


# Each refused root, and the words its message must hold. The password "pw-9z"
# and the host "secret-host" must never appear in any message.
REFUSED_ROOTS: list[tuple[object, str]] = [
    ("127.0.0.1:8080/v1", "must be an http:// or https:// URL"),
    ("ftp://h/v1", "must be an http:// or https:// URL"),
    ("http:///v1", "must be an http:// or https:// URL"),
    ("http://[::1/v1", "must be an http:// or https:// URL"),
    ("http://u:pw-9z@secret-host:port/v1", "must be an http:// or https:// URL"),
    ("http://secret-host:0/v1", "must be an http:// or https:// URL"),
    ("http://secret-host:70000/v1", "must be an http:// or https:// URL"),
    ("", "must be an http:// or https:// URL"),
    (8080, "must be a string"),
    ("http://u:pw-9z@secret-host/v1#frag", "must not have a #fragment"),
    ("http://u:pw-9z@secret-host/v1/chat/completions", "must end at the API root"),
    ("http://secret-host/v1/chat/completions/", "must end at the API root"),
    ("http://secret-host/chat/completions?api-version=1", "must end at the API root"),
]


@pytest.mark.parametrize(("value", "detail"), REFUSED_ROOTS)
def test_a_bad_root_is_refused_keyed_base_url_without_echoing_it(value, detail):
    with pytest.raises(AdapterConfigError) as caught:
        _root(value)
    error = caught.value
    assert error.key == "baseURL"
    assert error.detail.startswith(detail)
    assert str(error).startswith(f"pkg: baseURL {detail}")
    shown = "".join(traceback.format_exception(error))
    assert "pw-9z" not in shown
    assert "secret-host" not in shown


def test_the_source_of_a_root_is_named_in_the_detail():
    with pytest.raises(AdapterConfigError) as caught:
        _root("ftp://h", source="MY_BASE_URL")
    assert caught.value.key == "baseURL"
    assert caught.value.detail == (
        "must be an http:// or https:// URL (read from MY_BASE_URL)"
    )


@pytest.mark.parametrize(
    ("value", "root", "endpoint"),
    [
        ("http://h/v1", "http://h/v1", "http://h/v1/chat/completions"),
        ("http://h/v1///", "http://h/v1", "http://h/v1/chat/completions"),
        ("https://h", "https://h", "https://h/chat/completions"),
        ("https://h/", "https://h", "https://h/chat/completions"),
        ("http://h:8080/v1#", "http://h:8080/v1", "http://h:8080/v1/chat/completions"),
        (
            "https://h/openai/v1/?api-version=2024-10-21",
            "https://h/openai/v1?api-version=2024-10-21",
            "https://h/openai/v1/chat/completions?api-version=2024-10-21",
        ),
        (
            "http://u:pw@h/v1/",
            "http://u:pw@h/v1",
            "http://u:pw@h/v1/chat/completions",
        ),
    ],
)
def test_a_root_loses_its_trailing_slash_and_keeps_its_query(value, root, endpoint):
    assert _root(value) == root
    assert endpoint_url(root, CHAT_COMPLETIONS_PATH) == endpoint


def _openai_error(value: object) -> AdapterConfigError:
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter(value)  # type: ignore[arg-type]
    return caught.value


def _deepseek_argument_error(value: object) -> AdapterConfigError:
    with pytest.raises(AdapterConfigError) as caught:
        DeepSeekAdapter(base_url=value, environ={})  # type: ignore[arg-type]
    return caught.value


def _deepseek_environment_error(value: object) -> AdapterConfigError:
    assert isinstance(value, str)
    with pytest.raises(AdapterConfigError) as caught:
        DeepSeekAdapter(environ={"DEEPSEEK_BASE_URL": value})
    return caught.value


# An environment variable holds a string, and an empty one counts as unset.
_IN_ENVIRONMENT = [
    (value, detail)
    for value, detail in REFUSED_ROOTS
    if isinstance(value, str) and value
]


@pytest.mark.parametrize(
    ("build", "package", "source", "value", "detail"),
    [
        *(
            pytest.param(
                _openai_error, "llm-openai-compatible", "", *case, id=f"openai-{n}"
            )
            for n, case in enumerate(REFUSED_ROOTS)
        ),
        *(
            pytest.param(
                _deepseek_argument_error, "llm-deepseek", "", *case, id=f"ds-arg-{n}"
            )
            for n, case in enumerate(REFUSED_ROOTS)
        ),
        *(
            pytest.param(
                _deepseek_environment_error,
                "llm-deepseek",
                " (read from DEEPSEEK_BASE_URL)",
                *case,
                id=f"ds-env-{n}",
            )
            for n, case in enumerate(_IN_ENVIRONMENT)
        ),
    ],
)
def test_both_adapters_refuse_the_same_roots_with_the_same_detail(
    build: Callable[[object], AdapterConfigError],
    package: str,
    source: str,
    value: object,
    detail: str,
):
    error = build(value)
    assert isinstance(error, ValueError)
    assert error.key == "baseURL"
    assert error.detail == api_root_error(value).detail + source
    assert str(error) == f"{package}: baseURL {error.detail}"
    assert detail in str(error)
    assert "pw-9z" not in str(error)
    assert "secret-host" not in str(error)


def test_an_empty_deepseek_base_url_variable_counts_as_unset():
    with DeepSeekAdapter(environ={"DEEPSEEK_BASE_URL": ""}) as adapter:
        assert "https://api.deepseek.com" in repr(adapter)


def api_root_error(value: object) -> AdapterConfigError:
    with pytest.raises(AdapterConfigError) as caught:
        _root(value)
    return caught.value


@pytest.mark.parametrize("source", ["argument", "environment"])
def test_deepseek_keeps_a_query_after_the_endpoint_path(source):
    with LoopbackServer() as server:
        server.enqueue(Reply(body=sse_events([FIRST, text("ok"), finish()])))
        root = server.url + "/v1/?api-version=1"
        if source == "argument":
            adapter = DeepSeekAdapter("k", base_url=root, environ={})
        else:
            adapter = DeepSeekAdapter("k", environ={"DEEPSEEK_BASE_URL": root})
        with adapter:
            options = GenerateOptions(
                provider="deepseek-official",
                model="deepseek-v4-flash",
                messages=(create_user_message("hi"),),
            )
            list(validate_stream(adapter.stream(options)))
        (request,) = server.requests
        assert request.path == "/v1/chat/completions?api-version=1"
        assert server.wait_until_idle()


def test_deepseek_repr_hides_a_password_in_the_base_url():
    with DeepSeekAdapter(base_url="http://user:pw-9z@gpu.test/v1", environ={}) as a:
        assert repr(a) == (
            "DeepSeekAdapter(base_url='http://***@gpu.test/v1', "
            "api_key_env='DEEPSEEK_API_KEY')"
        )


def _compose(
    tmp_path: Path, config: str, environ: dict[str, str], runtime: LlmRuntime
) -> Any:
    path = tmp_path / "dsh.yml"
    path.write_text(f"- id: ds\n  name: llm-deepseek\n  config: {config}\n")
    return load_composition(str(path), runtime, environ=environ)


@pytest.mark.parametrize(
    ("config", "environ", "detail"),
    [
        ("{baseURL: 'ftp://h'}", {}, "must be an http:// or https:// URL"),
        (
            "{baseURL: 'http://u:pw-9z@secret-host/v1/chat/completions'}",
            {},
            "must end at the API root",
        ),
        ("{baseURL: 'http://secret-host/v1#x'}", {}, "must not have a #fragment"),
        (
            "{}",
            {"DEEPSEEK_BASE_URL": "http://u:pw-9z@secret-host/chat/completions"},
            "must end at the API root (e.g. http://127.0.0.1:8080/v1); "
            "/chat/completions is appended to it (read from DEEPSEEK_BASE_URL)",
        ),
        (
            "{baseURL: 'http://u:pw-9z@secret-host/v1#x'}",
            {"DEEPSEEK_BASE_URL": "https://fine.test"},
            "must not have a #fragment",
        ),
    ],
)
def test_the_deepseek_plugin_reports_a_bad_base_url_keyed(
    tmp_path: Path, config, environ, detail
):
    runtime = LlmRuntime()
    with pytest.raises(PluginLoadError) as caught:
        _compose(tmp_path, config, environ, runtime)
    error = caught.value
    assert error.key == "baseURL"
    assert error.message.startswith(f'plugin "ds": config key "baseURL" {detail}')
    shown = "".join(traceback.format_exception(error))
    assert "pw-9z" not in shown
    assert "secret-host" not in shown
    assert runtime.list_providers() == ()


def test_the_deepseek_plugin_reads_the_base_url_from_its_context_environment():
    runtime = LlmRuntime()
    ctx = PluginContext(
        runtime, plugin_id="ds", environ={"DEEPSEEK_BASE_URL": "http://h/v1#x"}
    )
    with pytest.raises(ValueError, match="baseURL must not have a #fragment"):
        deepseek_plugin.apply(ctx, None)
    assert runtime.list_providers() == ()
    # An explicit baseURL wins over the variable, which is then not read.
    deepseek_plugin.apply(ctx, DeepSeekConfig(base_url="http://h/v1"))
    try:
        assert [p.id for p in runtime.list_providers()] == ["deepseek-official"]
    finally:
        ctx.dispose()


# --- timeouts and retry policies ------------------------------------------------------

# Each adapter's one config class, built as its constructor builds it, and the
# package its errors name.
_CONFIGS: list[tuple[Callable[..., object], str]] = [
    (DeepSeekConfig, "llm-deepseek"),
    (
        lambda **kw: OpenAICompatConfig(base_url="http://h/v1", **kw),
        "llm-openai-compatible",
    ),
]


@pytest.mark.parametrize(("build", "package"), _CONFIGS)
@pytest.mark.parametrize(
    ("field", "value", "key"),
    [
        ("stream_idle_timeout_ms", 0, "streamIdleTimeoutMs"),
        ("stream_idle_timeout_ms", math.inf, "streamIdleTimeoutMs"),
        ("stream_idle_timeout_ms", None, "streamIdleTimeoutMs"),
        ("stream_idle_timeout_ms", True, "streamIdleTimeoutMs"),
        ("stream_keepalive_timeout_ms", -1, "streamKeepaliveTimeoutMs"),
        ("total_timeout_ms", 2**31, "totalTimeoutMs"),
        ("total_timeout_ms", math.nan, "totalTimeoutMs"),
    ],
)
def test_a_bad_timeout_is_keyed_by_its_config_key(build, package, field, value, key):
    with pytest.raises(AdapterConfigError) as caught:
        build(**{field: value})
    assert caught.value.key == key
    assert caught.value.detail == (
        "must be a positive finite number no greater than 2147483647"
    )
    assert str(caught.value) == f"{package}: {key} {caught.value.detail}"


@pytest.mark.parametrize(("build", "package"), _CONFIGS)
def test_the_optional_timeouts_may_be_unbounded(build, package):
    config: Any = build(
        stream_idle_timeout_ms=1,
        stream_keepalive_timeout_ms=None,
        total_timeout_ms=None,
    )
    assert (config.stream_keepalive_timeout_ms, config.total_timeout_ms) == (
        None,
        None,
    )


@pytest.mark.parametrize(("build", "package"), _CONFIGS)
@pytest.mark.parametrize(
    ("value", "key", "detail"),
    [
        (42, "retryPolicy", "must be a mapping or a resolved retry policy"),
        (
            {"mode": "sometimes"},
            "retryPolicy.mode",
            'must be one of "normal", "always", got "sometimes"',
        ),
        (
            {"mode": "normal", "maxRetires": 1},
            "retryPolicy.maxRetires",
            'did you mean "maxRetries"?',
        ),
        (
            {"mode": "always", "backoff": {"maxDelayMs": 0}},
            "retryPolicy.backoff.maxDelayMs",
            "must be a positive finite number",
        ),
        (
            {"mode": "normal", "retryableCodes": []},
            "retryPolicy.retryableCodes",
            "must not be empty",
        ),
    ],
)
def test_a_bad_retry_policy_is_keyed_by_its_key_path(
    build, package, value, key, detail
):
    with pytest.raises(AdapterConfigError) as caught:
        build(retry_policy=value)
    assert caught.value.key == key
    assert detail in caught.value.detail
    assert str(caught.value) == f"{package}: {key} {caught.value.detail}"
    config: Any = build(retry_policy={"mode": "normal", "maxRetries": 2})
    assert config.retry_policy == NormalRetryPolicy(max_retries=2)


def test_adapter_config_errors_survive_pickling():
    for error in (
        AdapterConfigError(
            "maxTokens", "must be a positive safe integer", package="llm-deepseek"
        ),
        AdapterConfigError(
            "baseURL", "must be a string", package="llm-openai-compatible"
        ),
    ):
        clone = pickle.loads(pickle.dumps(error))
        assert type(clone) is type(error)
        assert (clone.key, clone.detail, str(clone)) == (
            error.key,
            error.detail,
            str(error),
        )


def test_the_resolved_deepseek_root_is_normalised():
    assert (
        resolve_base_url(
            DeepSeekConfig(), {"DEEPSEEK_BASE_URL": "https://gw.test/v1/?x=1"}
        )
        == "https://gw.test/v1?x=1"
    )
    with DeepSeekAdapter(environ={"DEEPSEEK_BASE_URL": "https://gw.test/v1/"}) as a:
        assert a.base_url == "https://gw.test/v1"


# --- the two families on one wire -----------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "config_class", "config"),
    [
        (DeepSeekAdapter, DeepSeekConfig, DeepSeekConfig()),
        (
            OpenAICompatAdapter,
            OpenAICompatConfig,
            OpenAICompatConfig(base_url="http://h/v1"),
        ),
    ],
)
def test_each_adapter_is_the_wire_adapter_with_its_family(cls, config_class, config):
    assert issubclass(cls, WireAdapter)
    assert cls.family.config_class is config_class
    with cls.from_config(config, environ={}) as adapter:
        assert adapter.config is config
        assert isinstance(adapter.endpoint.profile, WireProfile)
        assert adapter.endpoint.profile.provider == adapter.display_name
    other = (
        OpenAICompatConfig(base_url="http://h/v1")
        if cls is DeepSeekAdapter
        else DeepSeekConfig()
    )
    with pytest.raises(TypeError, match=f"config must be an? {config_class.__name__}"):
        cls.from_config(other)


def test_the_server_profile_and_headers_of_an_openai_compatible_endpoint():
    with OpenAICompatAdapter(
        "http://h/v1",
        display_name="vLLM box",
        headers={"X-Team": "a"},
        include_usage=False,
        max_tokens_field="max_completion_tokens",
        response_format_style="json_object",
        reasoning_passback_field="reasoning",
    ) as adapter:
        endpoint = adapter.endpoint
    assert (endpoint.base_url, endpoint.display_name) == ("http://h/v1", "vLLM box")
    assert endpoint.profile == WireProfile(
        provider="vLLM box",
        reasoning_passback_field="reasoning",
        include_usage=False,
        max_tokens_field="max_completion_tokens",
        response_format_style="json_object",
        headers={"X-Team": "a"},
    )


def test_the_chat_wire_modules_list_no_names_and_encode_no_body():
    for name in ("request", "translate", "finish", "images", "services"):
        module = importlib.import_module(f"dsh_llm.adapters.chat.{name}")
        assert not hasattr(module, "__all__"), name
        assert not hasattr(module, "encode_body"), name
    assert not hasattr(importlib.import_module("dsh_llm.adapters.chat"), "__all__")
    for module in (deepseek_module, openai_compat_module):
        assert all(hasattr(module, name) for name in module.__all__)
        assert module.FAMILY in (DeepSeekAdapter.family, OpenAICompatAdapter.family)


def _refusal(adapter: Any, **fields: Any) -> LlmError:
    options = GenerateOptions(
        provider="deepseek-official",
        model="m",
        messages=(create_user_message("hi"),),
        **fields,
    )
    with adapter, pytest.raises(LlmError) as caught:
        next(iter(adapter.stream(options)))
    return caught.value


@pytest.mark.parametrize(
    ("adapter", "provider"),
    [
        (lambda: DeepSeekAdapter("k", base_url="http://127.0.0.1:1"), "DeepSeek"),
        (
            lambda: OpenAICompatAdapter("http://127.0.0.1:1", display_name="Box"),
            "Box",
        ),
    ],
)
def test_a_session_id_no_header_can_carry_is_refused_naming_the_provider(
    adapter, provider
):
    error = _refusal(adapter(), session_id="s 1\n")
    assert error.code == ErrorCode.INVALID_REQUEST
    assert error.message == (
        f"{provider} session_id must be printable ASCII without leading or "
        "trailing whitespace: it travels as a header"
    )
