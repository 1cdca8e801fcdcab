"""The one config mechanism (dsh_llm.config): errors as data, the field
validators, raw fields, and the pieces every adapter config class shares
(``config_from_options``, ``retry_policy_field``), down to a YAML composition.

The strict structuring itself (keys, types, hints) is tested in
``tests/test_plugin_config.py``."""

from __future__ import annotations

import math
import pickle
import re
import shutil
from pathlib import Path
from typing import Any
from typing import ClassVar

import attrs
import pytest

from dsh_llm.adapters import AdapterConfig
from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import adapter_field_order
from dsh_llm.adapters._wire.config import config_from_options
from dsh_llm.config import RAW_METADATA
from dsh_llm.config import ConfigError
from dsh_llm.config import PluginConfigError
from dsh_llm.config import check_bool
from dsh_llm.config import check_non_empty_str
from dsh_llm.config import check_one_of
from dsh_llm.config import check_optional_timeout
from dsh_llm.config import check_positive_int
from dsh_llm.config import check_safe_positive_int
from dsh_llm.config import check_timeout
from dsh_llm.config import field_error
from dsh_llm.config import structure_config
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.protocol.checks import MAX_TIMEOUT_MS
from dsh_llm.retry import DEFAULT_RETRY_POLICY
from dsh_llm.retry import AlwaysRetryPolicy
from dsh_llm.retry import NormalRetryPolicy
from dsh_llm.runtime import LlmRuntime

ROOT = Path(__file__).parent.parent


# --- the errors ---------------------------------------------------------------------


def test_a_config_error_holds_every_problem_as_data() -> None:
    error = ConfigError([("models[0].id", "is required"), ("", "must be a mapping")])

    assert isinstance(error, ValueError)
    assert error.problems == (
        ("models[0].id", "is required"),
        ("", "must be a mapping"),
    )
    assert (error.key, error.detail) == ("models[0].id", "is required")
    assert (
        str(error) == 'config key "models[0].id" is required; config must be a mapping'
    )


def test_a_config_error_about_the_whole_config_has_no_key() -> None:
    whole = ConfigError([("", "must be a mapping, got a list")])
    assert (whole.key, whole.detail) == (None, "must be a mapping, got a list")
    assert str(whole) == "config must be a mapping, got a list"
    empty = ConfigError([])
    assert (empty.problems, empty.key, empty.detail) == ((), None, "")


def test_a_plugin_config_error_is_one_keyed_problem() -> None:
    error = PluginConfigError("reasoningEffort", 'must be "off"')

    assert isinstance(error, ConfigError)
    assert isinstance(error, ValueError)
    assert error.problems == (("reasoningEffort", 'must be "off"'),)
    assert (error.key, error.detail) == ("reasoningEffort", 'must be "off"')
    assert str(error) == 'reasoningEffort must be "off"'


class _PackageError(PluginConfigError):
    package = "llm-example"


def test_a_package_names_itself_in_front_of_the_message_only() -> None:
    error = _PackageError("maxTokens", "must be a positive integer")

    assert str(error) == "llm-example: maxTokens must be a positive integer"
    # The data stays free of the prefix.
    assert (error.key, error.detail) == ("maxTokens", "must be a positive integer")
    assert error.problems == (("maxTokens", "must be a positive integer"),)


@pytest.mark.parametrize(
    "error",
    [
        ConfigError([("a", "is wrong"), ("b.c", "is required")]),
        PluginConfigError("baseURL", "must be a string"),
        _PackageError("models[1].id", "repeats an earlier entry"),
    ],
    ids=["config", "plugin", "package"],
)
def test_errors_survive_pickling(error: ConfigError) -> None:
    clone = pickle.loads(pickle.dumps(error))

    assert type(clone) is type(error)
    assert (clone.problems, clone.key, clone.detail, str(clone)) == (
        error.problems,
        error.key,
        error.detail,
        str(error),
    )


# --- the field validators -----------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Checked:
    config_error: ClassVar[type[PluginConfigError]] = _PackageError

    api_key_env: Any = attrs.field(default="K", validator=check_non_empty_str)
    include_usage: Any = attrs.field(default=True, validator=check_bool)
    pool_maxsize: Any = attrs.field(default=1, validator=check_positive_int)
    max_tokens: Any = attrs.field(default=1, validator=check_safe_positive_int)
    stream_idle_timeout_ms: Any = attrs.field(default=1, validator=check_timeout)
    total_timeout_ms: Any = attrs.field(default=None, validator=check_optional_timeout)
    thinking: Any = attrs.field(
        default="enabled", validator=check_one_of("enabled", "disabled", 1)
    )


TIMEOUT = "must be a positive finite number no greater than 2147483647"
SAFE = f"must be a positive integer no greater than {MAX_SAFE_INTEGER}"

REFUSED: list[tuple[str, object, str, str]] = [
    ("api_key_env", "", "apiKeyEnv", "must be a non-empty string"),
    ("api_key_env", 3, "apiKeyEnv", "must be a non-empty string"),
    ("api_key_env", None, "apiKeyEnv", "must be a non-empty string"),
    ("include_usage", 1, "includeUsage", "must be a boolean"),
    ("include_usage", "true", "includeUsage", "must be a boolean"),
    ("pool_maxsize", 0, "poolMaxsize", "must be a positive integer"),
    ("pool_maxsize", -3, "poolMaxsize", "must be a positive integer"),
    ("pool_maxsize", 1.0, "poolMaxsize", "must be a positive integer"),
    ("pool_maxsize", True, "poolMaxsize", "must be a positive integer"),
    ("max_tokens", 0, "maxTokens", SAFE),
    ("max_tokens", MAX_SAFE_INTEGER + 1, "maxTokens", SAFE),
    ("max_tokens", True, "maxTokens", SAFE),
    ("max_tokens", 2.0, "maxTokens", SAFE),
    ("stream_idle_timeout_ms", 0, "streamIdleTimeoutMs", TIMEOUT),
    ("stream_idle_timeout_ms", -1.5, "streamIdleTimeoutMs", TIMEOUT),
    ("stream_idle_timeout_ms", math.inf, "streamIdleTimeoutMs", TIMEOUT),
    ("stream_idle_timeout_ms", math.nan, "streamIdleTimeoutMs", TIMEOUT),
    ("stream_idle_timeout_ms", MAX_TIMEOUT_MS + 1, "streamIdleTimeoutMs", TIMEOUT),
    ("stream_idle_timeout_ms", True, "streamIdleTimeoutMs", TIMEOUT),
    ("stream_idle_timeout_ms", None, "streamIdleTimeoutMs", TIMEOUT),
    ("stream_idle_timeout_ms", "5", "streamIdleTimeoutMs", TIMEOUT),
    ("total_timeout_ms", 0, "totalTimeoutMs", TIMEOUT),
    ("total_timeout_ms", math.inf, "totalTimeoutMs", TIMEOUT),
    ("thinking", "sometimes", "thinking", 'must be one of "enabled", "disabled", 1'),
    # Compared by type and value: True == 1 in Python, never in a config.
    ("thinking", True, "thinking", 'must be one of "enabled", "disabled", 1'),
    ("thinking", 1.0, "thinking", 'must be one of "enabled", "disabled", 1'),
]


@pytest.mark.parametrize(("field", "value", "key", "detail"), REFUSED)
def test_each_validator_refuses_keyed_by_the_config_key(
    field: str, value: object, key: str, detail: str
) -> None:
    with pytest.raises(_PackageError) as caught:
        _Checked(**{field: value})

    assert (caught.value.key, caught.value.detail) == (key, detail)
    assert str(caught.value) == f"llm-example: {key} {detail}"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("api_key_env", "X"),
        ("include_usage", False),
        ("pool_maxsize", 1),
        ("max_tokens", MAX_SAFE_INTEGER),
        ("stream_idle_timeout_ms", 0.5),
        ("stream_idle_timeout_ms", MAX_TIMEOUT_MS),
        ("total_timeout_ms", None),
        ("total_timeout_ms", 250),
        ("thinking", "disabled"),
        ("thinking", 1),
    ],
)
def test_each_validator_accepts_its_bounds(field: str, value: object) -> None:
    assert getattr(_Checked(**{field: value}), field) == value


@pytest.mark.parametrize(("field", "value", "key", "detail"), REFUSED[:3])
def test_yaml_reports_the_same_validator_under_its_key_path(
    field: str, value: object, key: str, detail: str
) -> None:
    @attrs.frozen(kw_only=True)
    class Outer:
        entries: tuple[_Checked, ...] = ()

    with pytest.raises(ConfigError) as caught:
        structure_config(Outer, {"entries": [{}, {key: value}]})

    assert caught.value.problems == ((f"entries[1].{key}", detail),)


def test_a_class_without_its_own_error_raises_plugin_config_errors() -> None:
    @attrs.frozen
    class Plain:
        name: Any = attrs.field(validator=check_non_empty_str)

    with pytest.raises(PluginConfigError) as caught:
        Plain("")
    assert type(caught.value) is PluginConfigError
    assert str(caught.value) == "name must be a non-empty string"


def test_field_error_takes_an_attribute_or_a_config_key() -> None:
    inst = _Checked()
    by_name = field_error(inst, "max_tokens", "is too big")
    by_key = field_error(inst, "maxTokens", "is too big")

    for error in (by_name, by_key):
        assert type(error) is _PackageError
        assert (error.key, error.detail) == ("maxTokens", "is too big")
    assert field_error(object(), "some_key", "x").key == "some_key"


# --- raw fields ---------------------------------------------------------------------


def _split(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split(","))
    if isinstance(value, list | tuple):
        return tuple(value)
    raise PluginConfigError("tags", "must be a comma-separated string or a list")


@attrs.frozen(kw_only=True)
class _Tagged:
    tags: tuple[str, ...] = attrs.field(
        default=(), converter=_split, metadata={RAW_METADATA: True}
    )
    strict: tuple[str, ...] = ()


def test_a_raw_field_is_handed_its_value_as_written() -> None:
    # The declared type would refuse a string; the raw field's converter reads it.
    assert structure_config(_Tagged, {"tags": "a,b"}) == _Tagged(tags=("a", "b"))
    assert structure_config(_Tagged, {"tags": ["c"]}).tags == ("c",)
    with pytest.raises(ConfigError) as caught:
        structure_config(_Tagged, {"strict": "a,b"})
    assert caught.value.problems == (
        ("strict", "must be a list of strings, got a string"),
    )


def test_a_raw_field_reports_its_own_checks_under_its_key() -> None:
    with pytest.raises(ConfigError) as caught:
        structure_config(_Tagged, {"tags": 5})

    assert caught.value.problems == (
        ("tags", "must be a comma-separated string or a list"),
    )


# --- what every adapter config class shares -----------------------------------------


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class _AdapterConfig(AdapterConfig):
    package = "llm-test"
    default_stream_idle_timeout_ms = 1000
    default_stream_keepalive_timeout_ms = None

    base_url: str = attrs.field(default="http://h", validator=check_non_empty_str)
    _secret_name: str = attrs.field(default="K", alias="secret_name")


_AdapterError = AdapterConfigError


def test_config_from_options_builds_the_class_from_keywords() -> None:
    config = config_from_options(
        _AdapterConfig, {"base_url": "http://x", "secret_name": "S"}
    )

    assert config == _AdapterConfig(base_url="http://x", secret_name="S")
    assert config_from_options(_AdapterConfig, {}) == _AdapterConfig()


def test_config_from_options_refuses_an_unknown_keyword_listing_the_fields() -> None:
    with pytest.raises(TypeError) as caught:
        config_from_options(_AdapterConfig, {"base_uri": "http://x", "zzz": 1})

    assert str(caught.value) == (
        "unexpected keyword argument 'base_uri' (the options are the "
        "_AdapterConfig fields: base_url, secret_name, stream_idle_timeout_ms, "
        "stream_keepalive_timeout_ms, total_timeout_ms, retry_policy, pool_maxsize, "
        "empty_response_as_stop)"
    )


def test_config_from_options_lets_the_class_checks_raise() -> None:
    with pytest.raises(_AdapterError) as caught:
        config_from_options(_AdapterConfig, {"base_url": ""})

    assert (caught.value.key, caught.value.detail) == (
        "baseURL",
        "must be a non-empty string",
    )


def test_the_retry_policy_field_takes_a_mapping_a_policy_or_none() -> None:
    policy = AlwaysRetryPolicy(initial_delay_ms=5)

    assert _AdapterConfig().retry_policy is DEFAULT_RETRY_POLICY
    assert _AdapterConfig(retry_policy=None).retry_policy is DEFAULT_RETRY_POLICY  # type: ignore[arg-type]
    assert _AdapterConfig(retry_policy=policy).retry_policy is policy
    mapped = _AdapterConfig(retry_policy={"mode": "normal", "maxRetries": 1})  # type: ignore[arg-type]
    assert mapped.retry_policy == NormalRetryPolicy(max_retries=1)
    # From YAML the mapping reaches the field as written.
    loaded = structure_config(
        _AdapterConfig,
        {"retryPolicy": {"mode": "always", "backoff": {"jitterRatio": 0}}},
    )
    assert loaded.retry_policy == AlwaysRetryPolicy(jitter_ratio=0)


@pytest.mark.parametrize(
    ("value", "key", "detail"),
    [
        (42, "retryPolicy", "must be a mapping or a resolved retry policy"),
        ({}, "retryPolicy.mode", 'is required (expected one of "normal", "always")'),
        (
            {"mode": "normal", "backoff": {"maxDelayMs": 0}},
            "retryPolicy.backoff.maxDelayMs",
            TIMEOUT,
        ),
        (
            {"mode": "normal", "x": 1},
            "retryPolicy.x",
            'is not a known key (expected one of "mode", "maxRetries", '
            '"retryableCodes", "backoff")',
        ),
    ],
)
def test_a_bad_retry_policy_raises_the_adapter_error_keyed_by_its_path(
    value: object, key: str, detail: str
) -> None:
    with pytest.raises(_AdapterError) as caught:
        _AdapterConfig(retry_policy=value)  # type: ignore[arg-type]
    assert (caught.value.key, caught.value.detail) == (key, detail)
    assert str(caught.value) == f"llm-test: {key} {detail}"
    with pytest.raises(ConfigError) as loaded:
        structure_config(_AdapterConfig, {"retryPolicy": value})
    assert loaded.value.problems == ((key, detail),)


# --- YAML compositions --------------------------------------------------------------

_DEEPSEEK = "- id: ds\n  name: llm-deepseek\n  config:\n"
_OPENAI = (
    "- id: lab\n  name: llm-openai-compatible\n  config:\n"
    "    providers: [lab]\n    baseURL: http://127.0.0.1:9/v1\n"
)
_POLICY = (
    "    retryPolicy:\n      mode: normal\n      maxRetries: 2\n"
    "      backoff: {{initialDelayMs: 100, maxDelayMs: {max_delay}, jitterRatio: 0}}\n"
)


@pytest.mark.parametrize(
    ("entry", "plugin_id", "route"),
    [(_DEEPSEEK, "ds", "deepseek-official"), (_OPENAI, "lab", "lab")],
    ids=["deepseek", "openai-compatible"],
)
def test_a_retry_policy_round_trips_through_a_composition(
    tmp_path: Path, entry: str, plugin_id: str, route: str
) -> None:
    path = tmp_path / "dsh.yml"
    path.write_text(entry + _POLICY.format(max_delay=400))
    with load_composition(path, environ={}) as composition:
        assert composition.runtime.provider_retry_policy(route) == NormalRetryPolicy(
            max_retries=2, initial_delay_ms=100, max_delay_ms=400, jitter_ratio=0
        )

    path.write_text(entry + _POLICY.format(max_delay=0))
    runtime = LlmRuntime()
    with pytest.raises(PluginLoadError) as caught:
        load_composition(path, runtime, environ={})
    error = caught.value
    assert (error.plugin_id, error.key) == (plugin_id, "retryPolicy.backoff.maxDelayMs")
    assert error.message == (
        f'plugin "{plugin_id}": config key "retryPolicy.backoff.maxDelayMs" {TIMEOUT}'
    )
    assert runtime.list_providers() == ()


def test_a_bad_policy_in_the_second_entry_fails_the_whole_load(tmp_path: Path) -> None:
    path = tmp_path / "dsh.yml"
    path.write_text(
        _DEEPSEEK
        + _POLICY.format(max_delay=400)
        + _OPENAI
        + _POLICY.format(max_delay=MAX_TIMEOUT_MS + 1)
    )
    runtime = LlmRuntime()
    with pytest.raises(PluginLoadError) as caught:
        load_composition(path, runtime, environ={})

    assert (caught.value.plugin_id, caught.value.key) == (
        "lab",
        "retryPolicy.backoff.maxDelayMs",
    )
    assert runtime.list_providers() == ()


_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _documented_compositions() -> list[Any]:
    """Every YAML composition the project shows: examples/*.yml, and each yaml
    block of README.md, CONTRIBUTING.md and docs/*.md that the text does not show
    failing (a failure is shown as a ``text`` block with the PluginLoadError right
    after it)."""
    found = [
        pytest.param(path.read_text(encoding="utf-8"), id=path.name)
        for path in sorted((ROOT / "examples").glob("*.yml"))
    ]
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    pages += sorted((ROOT / "docs").glob("*.md"))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        blocks = [(m.group(1), m.group(2), m.start()) for m in _FENCE.finditer(text)]
        for index, (language, body, start) in enumerate(blocks):
            if language != "yaml":
                continue
            after = blocks[index + 1] if index + 1 < len(blocks) else None
            if after and after[0] == "text" and "PluginLoadError" in after[1]:
                continue
            line = text.count("\n", 0, start) + 1
            found.append(pytest.param(body, id=f"{page.name}:{line}"))
    return found


def test_the_documented_compositions_were_found() -> None:
    ids = [param.id for param in _documented_compositions()]
    assert "my_llm_adapter.yml" in ids
    for page in ("README.md", "deepseek.md", "local-servers.md", "plugins.md"):
        assert any(i.startswith(f"{page}:") for i in ids), page


@pytest.mark.parametrize("text", _documented_compositions())
def test_every_documented_composition_still_loads(tmp_path: Path, text: str) -> None:
    # Next to the example plugin, as the docs say; no I/O happens at load time.
    shutil.copy(ROOT / "examples" / "my_llm_adapter.py", tmp_path)
    path = tmp_path / "dsh.yml"
    path.write_text(text, encoding="utf-8")
    runtime = LlmRuntime()
    with load_composition(path, runtime, environ={"MY_API_KEY": "sk-doc"}):
        assert runtime.list_providers() != ()
    assert runtime.list_providers() == ()
