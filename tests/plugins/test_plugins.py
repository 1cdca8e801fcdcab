"""dsh_llm.plugins: plugin resolution, contexts, compositions and load errors."""

from __future__ import annotations

import logging
import pickle
import re
import shutil
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from dsh_llm.errors import ErrorCode
from dsh_llm.plugins import Composition
from dsh_llm.plugins import LoadedPlugin
from dsh_llm.plugins import PluginConfigError
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.runtime import LlmRuntime
from tests.plugin_loading import load_error
from tests.plugin_loading import write
from tests.runtime_adapters import Quiet

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "my_llm_adapter.py"
DOCS = REPO / "docs" / "plugins.md"


@attrs.frozen(kw_only=True)
class RouteConfig:
    providers: list[str] = attrs.field(validator=attrs.validators.min_len(1))
    base_url: str | None = None


def route_plugin(**extra: Any) -> types.SimpleNamespace:
    """A plugin object registering ``Quiet`` for ``config.providers``."""

    def apply(ctx: PluginContext, config: RouteConfig) -> None:
        ctx.llm.register_adapter(config.providers, Quiet())

    return types.SimpleNamespace(
        name="route-plugin", inject=("llm",), Config=RouteConfig, apply=apply, **extra
    )


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLE, tmp_path / "my_llm_adapter.py")
    return tmp_path


ENV = {"MY_API_KEY": "sk-test-secret"}


# --- loading ----------------------------------------------------------------------


def test_a_yaml_composition_registers_and_dispose_unregisters(plugin_dir: Path) -> None:
    path = write(
        plugin_dir / "dsh.yml",
        """\
        - id: my-llm
          name: ./my_llm_adapter.py
          config:
            apiKey: ${MY_API_KEY}
            providers: [first, second]
        """,
    )
    composition = load_composition(path, environ=ENV)
    assert isinstance(composition, Composition)
    assert [p.id for p in composition.runtime.list_providers()] == ["first", "second"]
    (plugin,) = composition.plugins
    assert plugin.id == "my-llm"
    assert plugin.name == "my-llm-adapter"
    assert plugin.config.api_key == "sk-test-secret"
    assert plugin.config.providers == ["first", "second"]
    composition.dispose()
    composition.dispose()
    assert composition.disposed
    assert composition.runtime.list_providers() == ()


def test_yaml_merge_keys_share_config_and_written_keys_override(
    plugin_dir: Path,
) -> None:
    path = write(
        plugin_dir / "dsh.yml",
        """\
        - id: first
          name: ./my_llm_adapter.py
          config: &shared
            apiKey: ${MY_API_KEY}
            providers: [a]
        - id: second
          name: ./my_llm_adapter.py
          config:
            <<: *shared
            providers: [b]
        """,
    )
    with load_composition(path, environ=ENV) as composition:
        assert [p.id for p in composition.runtime.list_providers()] == ["a", "b"]
        second = composition.plugins[1].config
        assert second.api_key == "sk-test-secret"
        assert second.providers == ["b"]


def test_an_existing_runtime_keeps_its_own_registrations() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["mine"], Quiet())
    with load_composition(
        [{"id": "p", "name": route_plugin(), "config": {"providers": ["theirs"]}}],
        runtime,
    ) as composition:
        assert composition.runtime is runtime
        assert [p.id for p in runtime.list_providers()] == ["mine", "theirs"]
    assert [p.id for p in runtime.list_providers()] == ["mine"]


def test_disabled_entries_are_not_even_resolved() -> None:
    composition = load_composition(
        [
            {"id": "off", "name": "no_such_module_anywhere", "disabled": True},
            {"id": "on", "name": route_plugin(), "config": {"providers": ["r"]}},
        ]
    )
    assert [p.id for p in composition.plugins] == ["on"]


def test_an_empty_composition_file_loads_nothing(tmp_path: Path) -> None:
    composition = load_composition(write(tmp_path / "empty.yml", "# nothing\n"))
    assert composition.plugins == ()


def test_the_id_defaults_to_the_name(tmp_path: Path) -> None:
    write(tmp_path / "solo.py", "name = 'solo'\ndef apply(ctx, config):\n    pass\n")
    path = write(tmp_path / "dsh.yml", "- name: ./solo.py\n")
    assert load_composition(path).plugins == (
        LoadedPlugin(id="./solo.py", name="solo", config=None),
    )


def test_config_strings_are_interpolated_from_the_environment() -> None:
    seen: list[RouteConfig] = []

    def apply(ctx: PluginContext, config: RouteConfig) -> None:
        seen.append(config)

    plugin = types.SimpleNamespace(Config=RouteConfig, apply=apply)
    load_composition(
        [
            {
                "id": "p",
                "name": plugin,
                "config": {
                    "providers": ["${ROUTE}", "${MISSING:-fallback}", "$${LITERAL}"],
                    "baseURL": "http://${HOST:-localhost}:8080/v1",
                },
            }
        ],
        environ={"ROUTE": "from-env", "HOST": ""},
    )
    assert seen == [
        RouteConfig(
            providers=["from-env", "fallback", "${LITERAL}"],
            base_url="http://localhost:8080/v1",
        )
    ]


def test_ctx_exposes_environ_logger_id_and_injected_services() -> None:
    seen: dict[str, Any] = {}
    service = object()

    def apply(ctx: PluginContext, config: None) -> None:
        seen.update(
            environ=ctx.environ,
            logger=ctx.logger.name,
            id=ctx.id,
            agents=ctx.get("agents"),
            llm=ctx.get("llm"),
            config=config,
        )

    plugin = types.SimpleNamespace(inject=("llm", "agents"), apply=apply)
    environ = {"A": "1"}
    load_composition(
        [{"id": "p", "name": plugin}], environ=environ, services={"agents": service}
    )
    assert seen["environ"] is environ
    assert seen["logger"] == "dsh_llm.plugins.p"
    assert seen["id"] == "p"
    assert seen["agents"] is service
    assert seen["config"] is None
    assert seen["llm"].runtime is not None


def test_services_cannot_replace_llm() -> None:
    with pytest.raises(ValueError, match="llm"):
        load_composition([], services={"llm": object()})


# --- plugin shape errors ----------------------------------------------------------


@pytest.mark.parametrize(
    ("plugin", "key", "message"),
    [
        (
            types.SimpleNamespace(inject="llm", apply=lambda ctx, config: None),
            "inject",
            'plugin "p": inject must be a list of service names, got a string',
        ),
        (
            types.SimpleNamespace(inject=("llm", ""), apply=lambda ctx, config: None),
            "inject",
            'plugin "p": inject must hold non-empty service names',
        ),
        (
            types.SimpleNamespace(Config=dict, apply=lambda ctx, config: None),
            "config",
            'plugin "p": Config must be an attrs class, got type',
        ),
        (
            types.SimpleNamespace(inject=("llm", "agents", "sessions"), apply=print),
            "inject",
            'plugin "p": inject lists the service "agents", which this composition '
            'does not provide (provided: "llm")',
        ),
    ],
)
def test_malformed_plugins_are_refused(plugin: Any, key: str, message: str) -> None:
    error = load_error([{"id": "p", "name": plugin}])
    assert error.plugin_id == "p"
    assert error.key == key
    assert error.message == message


def test_inject_none_asks_for_no_service() -> None:
    applied: list[str] = []
    plugin = types.SimpleNamespace(
        inject=None, apply=lambda ctx, config: applied.append(ctx.id)
    )
    load_composition([{"id": "p", "name": plugin}])
    assert applied == ["p"]


def test_config_for_a_plugin_without_config_class_is_refused() -> None:
    plugin = types.SimpleNamespace(apply=lambda ctx, config: None)
    error = load_error([{"id": "p", "name": plugin, "config": {"apiKey": "x"}}])
    assert error.key == "config"
    assert error.message == (
        'plugin "p": takes no config (it has no Config class), but config was given '
        'with "apiKey"'
    )


# --- config errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "key", "detail"),
    [
        ({}, "providers", 'config key "providers" is required (expected a list of '),
        (
            {"providers": "my-provider"},
            "providers",
            'config key "providers" must be a list of strings, got a string',
        ),
        (
            {"providers": ["a"], "baseurl": "x"},
            "baseurl",
            'config key "baseurl" is not a known key (expected one of "providers", '
            '"baseURL"; did you mean "baseURL"?)',
        ),
        (
            {"providers": []},
            "providers",
            'config key "providers" is invalid: Length of "providers" must be >= 1: 0',
        ),
        (
            {"providers": ["a"], "baseURL": 8080},
            "baseURL",
            'config key "baseURL" must be a string or null, got an integer',
        ),
        ([1, 2], "config", "config must be a mapping, got a list"),
    ],
)
def test_bad_config_names_the_plugin_and_the_key(
    config: Any, key: str, detail: str
) -> None:
    runtime = LlmRuntime()
    error = load_error(
        [
            {"id": "good", "name": route_plugin(), "config": {"providers": ["ok"]}},
            {"id": "bad", "name": route_plugin(), "config": config},
        ],
        runtime,
    )
    assert error.plugin_id == "bad"
    assert error.key == key
    assert error.message.startswith(f'plugin "bad": {detail}')
    # Configs are checked before any apply: the good entry never ran.
    assert runtime.list_providers() == ()


def test_an_unset_variable_fails_the_load_naming_key_and_variable() -> None:
    error = load_error(
        [{"id": "p", "name": route_plugin(), "config": {"providers": ["${ROUTE}"]}}],
        environ={},
    )
    assert error.key == "providers[0]"
    assert error.message == (
        'plugin "p": config key "providers[0]" refers to ${ROUTE}, which is not set '
        "(write ${ROUTE:-default} to give a default)"
    )


def test_config_values_never_appear_in_load_errors() -> None:
    secret = "sk-live-0123456789abcdef"
    for config in (
        {"providers": [secret, 7]},
        {"providers": secret},
        {"providers": ["a"], "baseURL": [secret]},
        {"providers": ["a"], secret: "x"},
    ):
        error = load_error([{"id": "p", "name": route_plugin(), "config": config}])
        if secret in config:
            continue  # an unknown key is named as written, and this one is a key
        assert secret not in str(error)
        assert secret not in repr(error)


SECRET = "sk-ZZZSECRET"


def test_composition_reprs_show_config_fields_but_never_a_value(
    plugin_dir: Path,
) -> None:
    path = write(
        plugin_dir / "dsh.yml",
        """\
        - id: my-llm
          name: ./my_llm_adapter.py
          config:
            apiKey: ${MY_API_KEY}
            providers: [my-provider]
        """,
    )
    with load_composition(path, environ={"MY_API_KEY": SECRET}) as composition:
        (plugin,) = composition.plugins
        assert plugin.config.api_key == SECRET
        shown = [
            repr(composition),
            repr(composition.plugins),
            str(composition.plugins),
            repr(plugin),
            repr(plugin.config),  # the skeleton declares api_key with repr=False
        ]
    for text in shown:
        assert SECRET not in text
    assert repr(plugin) == (
        "LoadedPlugin(id='my-llm', name='my-llm-adapter', "
        "config=<Config: api_key, providers>)"
    )


def test_the_built_in_openai_compatible_config_stays_out_of_reprs() -> None:
    entry = {
        "id": "local",
        "name": "llm-openai-compatible",
        "config": {
            "providers": ["local"],
            "baseURL": "http://127.0.0.1:9/v1",
            "apiKey": SECRET,
            "headers": {"X-Api-Key": "hdr-ZZZSECRET"},
        },
    }
    with load_composition([entry]) as composition:
        shown = repr(composition) + repr(composition.plugins)
    assert SECRET not in shown
    assert "hdr-ZZZSECRET" not in shown
    assert (
        "config=<OpenAICompatPluginConfig: service, base_url, api_key_env, headers, "
        in shown
    )
    assert ", providers, api_key>" in shown


def test_a_plugin_without_config_shows_none_in_its_repr() -> None:
    plugin = types.SimpleNamespace(name="bare", apply=lambda ctx, config: None)
    with load_composition([{"id": "b", "name": plugin}]) as composition:
        assert repr(composition.plugins[0]) == (
            "LoadedPlugin(id='b', name='bare', config=None)"
        )
    assert "secret" not in repr(LoadedPlugin(id="x", name="y", config="secret"))


@pytest.mark.parametrize(
    "config",
    [
        {"apiKey": SECRET, "providers": "my-provider"},
        {"apiKey": SECRET, "providers": []},
        {"apiKey": SECRET, "providers": ["a", 5]},
        {"apiKey": SECRET, "providers": ["a"], "extra": SECRET},
        {"apiKey": [SECRET], "providers": ["a"]},
        {"apiKey": {"nested": SECRET}, "providers": ["a"]},
    ],
    ids=["wrong-type", "empty-list", "bad-item", "unknown-key", "key-in-list", "map"],
)
def test_load_errors_for_a_config_holding_a_key_never_show_it(
    plugin_dir: Path, config: dict[str, Any]
) -> None:
    error = load_error(
        [
            {
                "id": "my-llm",
                "name": str(plugin_dir / "my_llm_adapter.py"),
                "config": config,
            }
        ]
    )
    for text in (str(error), repr(error), error.message, str(error.failure)):
        assert SECRET not in text


def test_an_apply_failure_for_a_config_holding_a_key_never_shows_it(
    plugin_dir: Path,
) -> None:
    example = str(plugin_dir / "my_llm_adapter.py")
    config = {"apiKey": SECRET, "providers": ["same"]}
    duplicate = load_error(
        [
            {"id": "first", "name": example, "config": config},
            {"id": "second", "name": example, "config": config},
        ]
    )
    unusable = load_error(
        [
            {
                "id": "local",
                "name": "llm-openai-compatible",
                "config": {
                    "providers": ["local"],
                    "baseURL": "http://127.0.0.1:9/v1",
                    "apiKey": "sk-ZZZ SECRET",
                },
            }
        ]
    )
    assert duplicate.message.startswith('plugin "second": apply() failed')
    assert unusable.message == (
        'plugin "local": config key "apiKey" contains characters no HTTP header '
        "can carry"
    )
    for error in (duplicate, unusable):
        for text in (str(error), repr(error), str(error.failure)):
            assert "ZZZSECRET" not in text
            assert "ZZZ SECRET" not in text


def test_plugin_config_error_from_apply_names_the_key() -> None:
    def apply(ctx: PluginContext, config: RouteConfig) -> None:
        raise PluginConfigError("base_url", "must use https")

    plugin = types.SimpleNamespace(Config=RouteConfig, apply=apply)
    error = load_error(
        [
            {
                "id": "p",
                "name": plugin,
                "config": {"providers": ["a"], "baseURL": "http://x"},
            }
        ]
    )
    assert error.key == "baseURL"
    assert error.message == 'plugin "p": config key "baseURL" must use https'


# --- composition file errors ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id: x\nname: y\n", "must hold a list of plugin entries, got a mapping"),
        ("- just-a-string\n", "entry 1 must be a mapping with id and name, got a str"),
        ("- id: a\n  nmae: b\n", 'entry 1 has the unknown key "nmae"'),
        ("- id: a\n", "entry 1: name is required"),
        ("- name: a\n  id: ''\n", "entry 1: id must be a non-empty string"),
        ("- id: a\n  name: [x]\n", 'plugin "a": name must be a string, got a list'),
        (
            "- id: a\n  name: x\n  disabled: 'yes'\n",
            'plugin "a": disabled must be a boolean, got a string',
        ),
        (
            "- {id: a, name: x, disabled: true}\n- {id: a, name: y, disabled: true}\n",
            "entry 2: the id is used by an earlier entry",
        ),
        ("- id: a\n  id: b\n  name: c\n", "found duplicate key 'id'"),
        ("- id: a\n  name: [unclosed\n", "cannot parse composition file"),
        ("- id: a\n  name: !!js process.env\n", "cannot parse composition file"),
        ("- id: a\n  name: x\n  ? [k]\n  : v\n", "found unhashable key"),
        ("- id: a\n  name: \x07\n", "cannot parse composition file"),
        (
            "- id: a\n  name: ${PLUGIN_MODULE}\n",
            'plugin "a": name refers to ${PLUGIN_MODULE}, which is not set',
        ),
    ],
)
def test_malformed_composition_files_are_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    error = load_error(write(tmp_path / "dsh.yml", text), environ={})
    assert message in error.message


def test_yaml_errors_give_the_position_but_never_the_line(tmp_path: Path) -> None:
    text = "- id: a\n  name: x\n  config: {apiKey: sk-secret-1, apiKey: sk-secret-2}\n"
    error = load_error(write(tmp_path / "dsh.yml", text))
    assert error.message == (
        f'cannot parse composition file "{tmp_path / "dsh.yml"}": while '
        "constructing a mapping: found duplicate key 'apiKey' (line 3, column 33)"
    )
    assert "sk-secret" not in str(error)


def test_an_unreadable_composition_file_is_reported(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yml"
    error = load_error(missing)
    assert error.plugin_id is None
    assert error.message.startswith(f'cannot read composition file "{missing}"')


def test_entries_that_are_not_a_list_are_refused() -> None:
    error = load_error({"id": "x"})
    assert error.message == (
        "composition must hold a list of plugin entries, got a mapping"
    )


def test_plugin_load_error_pickles_with_its_facts() -> None:
    error = PluginLoadError("p", 'config key "k" is required', key="k")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is PluginLoadError
    assert (copy.message, copy.code, copy.plugin_id, copy.key) == (
        'plugin "p": config key "k" is required',
        ErrorCode.PLUGIN_LOAD,
        "p",
        "k",
    )
    assert copy.failure == error.failure


# --- apply failures roll everything back ------------------------------------------


def test_a_failing_apply_rolls_back_every_plugin_of_the_composition() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["pre-existing"], Quiet())
    undone: list[str] = []

    def first_apply(ctx: PluginContext, config: None) -> Callable[[], None]:
        ctx.llm.register_adapter(["first"], Quiet())
        ctx.llm.use(lambda opts, next_: next_())
        ctx.effect(lambda: undone.append("first effect"))
        return lambda: undone.append("first undo")

    def failing_apply(ctx: PluginContext, config: None) -> None:
        ctx.llm.register_adapter(["second"], Quiet())
        ctx.effect(lambda: undone.append("second effect"))
        raise RuntimeError("second plugin broke")

    error = load_error(
        [
            {"id": "first", "name": types.SimpleNamespace(apply=first_apply)},
            {"id": "second", "name": types.SimpleNamespace(apply=failing_apply)},
        ],
        runtime,
    )
    assert error.message == (
        'plugin "second": apply() failed: RuntimeError: second plugin broke'
    )
    assert isinstance(error.__cause__, RuntimeError)
    assert [p.id for p in runtime.list_providers()] == ["pre-existing"]
    assert runtime._middleware == ()
    assert undone == ["second effect", "first undo", "first effect"]


def test_apply_returning_something_that_is_not_a_disposer_is_refused() -> None:
    runtime = LlmRuntime()

    def apply(ctx: PluginContext, config: None) -> int:
        ctx.llm.register_adapter(["r"], Quiet())
        return 42

    error = load_error(
        [{"id": "p", "name": types.SimpleNamespace(apply=apply)}], runtime
    )
    assert error.message == (
        'plugin "p": apply() returned int; expected None or a function that undoes it'
    )
    assert runtime.list_providers() == ()


def test_an_llm_error_from_apply_keeps_its_code_in_the_message() -> None:
    def apply(ctx: PluginContext, config: None) -> None:
        ctx.llm.register_adapter([], Quiet())

    error = load_error([{"id": "p", "name": types.SimpleNamespace(apply=apply)}])
    assert error.message == (
        'plugin "p": apply() failed: an adapter must register at least one provider '
        "[INVALID_ADAPTER]"
    )


def test_a_base_exception_in_apply_rolls_back_and_propagates() -> None:
    runtime = LlmRuntime()

    def apply(ctx: PluginContext, config: None) -> None:
        ctx.llm.register_adapter(["r"], Quiet())
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        load_composition(
            [{"id": "p", "name": types.SimpleNamespace(apply=apply)}], runtime
        )
    assert runtime.list_providers() == ()


# --- disposal ---------------------------------------------------------------------


def test_dispose_runs_plugins_and_their_effects_in_reverse(
    caplog: pytest.LogCaptureFixture,
) -> None:
    order: list[str] = []

    def plugin(label: str, failing: bool = False) -> types.SimpleNamespace:
        def apply(ctx: PluginContext, config: None) -> Callable[[], None]:
            ctx.effect(lambda: order.append(f"{label}:1"))
            if failing:

                def broken() -> None:
                    order.append(f"{label}:broken")
                    raise RuntimeError(f"{label} disposer failed")

                ctx.effect(broken)
            ctx.effect(lambda: order.append(f"{label}:3"))
            return lambda: order.append(f"{label}:returned")

        return types.SimpleNamespace(apply=apply)

    composition = load_composition(
        [
            {"id": "a", "name": plugin("a")},
            {"id": "b", "name": plugin("b", failing=True)},
        ]
    )
    with caplog.at_level(logging.ERROR, logger="dsh_llm"):
        composition.dispose()
    assert order == [
        "b:returned",
        "b:3",
        "b:broken",
        "b:1",
        "a:returned",
        "a:3",
        "a:1",
    ]
    assert 'plugin "b": a disposer failed' in caplog.text
    assert "b disposer failed" in caplog.text
    composition.dispose()
    assert len(order) == 7


# --- docs/plugins.md stays true ---------------------------------------------------


def documented_error_cases() -> list[tuple[str, list[tuple[str, str]]]]:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## What each error looks like", 1)[1]
    cases = []
    for chunk in re.split(r"^### ", section, flags=re.M)[1:]:
        title = chunk.splitlines()[0]
        blocks = re.findall(r"```(\w+)\n(.*?)```", chunk, flags=re.S)
        cases.append((title, blocks))
    return cases


def test_the_docs_document_every_required_error_case() -> None:
    titles = [title for title, _ in documented_error_cases()]
    assert titles == [
        "A required key is missing",
        "A value has the wrong type",
        "A key is unknown",
        "A list that must not be empty is empty",
        "An environment variable is not set",
        "An injected service is missing",
        "The plugin cannot be found",
        "`apply` fails",
    ]


@pytest.mark.parametrize(
    ("title", "blocks"), documented_error_cases(), ids=lambda v: str(v)[:30]
)
def test_documented_error_messages_match_the_loader(
    tmp_path: Path, title: str, blocks: list[tuple[str, str]]
) -> None:
    environ = {} if "is not set" in title else dict(ENV)
    checked = 0
    pending_yaml: str | None = None
    for case, (language, body) in enumerate(blocks):
        if language == "python":
            first, _, rest = body.partition("\n")
            assert first.startswith("# file: ")
            (tmp_path / first.removeprefix("# file: ").strip()).write_text(rest)
        elif language == "yaml":
            pending_yaml = body
        elif language == "text":
            assert pending_yaml is not None
            directory = tmp_path / f"case{case}"
            directory.mkdir()
            shutil.copy(EXAMPLE, directory / "my_llm_adapter.py")
            for extra in tmp_path.glob("*.py"):
                shutil.copy(extra, directory / extra.name)
            path = directory / "dsh.yml"
            path.write_text(pending_yaml, encoding="utf-8")
            error = load_error(path, environ=environ)
            assert f"PluginLoadError: {error}" == body.strip()
            checked += 1
    assert checked >= 1
