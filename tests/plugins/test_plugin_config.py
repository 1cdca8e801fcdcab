"""The config mechanism as plugins use it (dsh_llm.config): camelCase keys, strict
types, validators; and ${VAR} interpolation (dsh_llm.plugins.interpolation)."""

from __future__ import annotations

import enum
import pathlib
from typing import Any
from typing import Literal

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.config import KEY_METADATA
from dsh_llm.config import ConfigError
from dsh_llm.config import PluginConfigError
from dsh_llm.config import config_key
from dsh_llm.config import structure_config
from dsh_llm.config import value_kind
from dsh_llm.credentials import Secret
from dsh_llm.plugins.interpolation import interpolate
from dsh_llm.protocol import checks as c


class Thinking(enum.Enum):
    ENABLED = "enabled"
    DISABLED = "disabled"


@attrs.frozen(kw_only=True)
class Model:
    id: str
    context_window: int | None = None
    input_modalities: tuple[str, ...] = ("text",)


@attrs.frozen(kw_only=True)
class Profile:
    api_key_env: str = "MY_API_KEY"
    base_url: str | None = None
    max_tokens: int = 256_000
    temperature: float | None = None
    include_usage: bool = True
    models: tuple[Model, ...] = ()
    headers: dict[str, str] = attrs.Factory(dict)
    effort: Literal["off", "low", "high"] | None = None
    thinking: Thinking | None = None
    tags: frozenset[str] = frozenset()
    pair: tuple[str, int] | None = None
    limit: int | str | None = None
    extra: Any = None
    secret: Secret | None = None


@attrs.frozen(kw_only=True)
class Entry:
    context_window: int = attrs.field(validator=c.positive_int)


@attrs.frozen(kw_only=True)
class Catalog:
    models: list[Entry]


def problems(cls: type[Any], data: object) -> tuple[tuple[str, str], ...]:
    with pytest.raises(ConfigError) as caught:
        structure_config(cls, data)
    return caught.value.problems


# --- keys ------------------------------------------------------------------------


def test_camel_case_keys_fill_snake_case_fields() -> None:
    profile = structure_config(
        Profile,
        {
            "apiKeyEnv": "OTHER_KEY",
            "baseURL": "http://127.0.0.1:8080/v1",
            "maxTokens": 8,
            "includeUsage": False,
            "models": [{"id": "m", "contextWindow": 4096, "inputModalities": ["text"]}],
        },
    )
    assert profile == Profile(
        api_key_env="OTHER_KEY",
        base_url="http://127.0.0.1:8080/v1",
        max_tokens=8,
        include_usage=False,
        models=(Model(id="m", context_window=4096, input_modalities=("text",)),),
    )


def test_a_later_word_may_be_written_in_capitals() -> None:
    assert structure_config(Profile, {"baseUrl": "u"}).base_url == "u"
    assert structure_config(Profile, {"apiKEYEnv": "X"}).api_key_env == "X"
    assert config_key(Profile, "base_url") == "baseURL"
    assert config_key(Profile, "api_key_env") == "apiKeyEnv"
    assert config_key(Profile, "not_a_field") == "not_a_field"


def test_one_field_given_in_two_spellings_is_refused() -> None:
    assert problems(Profile, {"baseUrl": "a", "baseURL": "b"}) == (
        ("baseURL", 'is given twice (also as "baseUrl")'),
    )


def test_snake_case_and_misspelt_keys_are_refused_with_a_hint() -> None:
    found = dict(problems(Profile, {"max_tokens": 1, "maxTokns": 2, "zzz": 3}))
    assert found["max_tokens"].endswith('did you mean "maxTokens"?)')
    assert found["maxTokns"].endswith('did you mean "maxTokens"?)')
    assert "did you mean" not in found["zzz"]
    assert found["zzz"].startswith('is not a known key (expected one of "apiKeyEnv"')


def test_metadata_pins_one_exact_key() -> None:
    @attrs.frozen
    class Pinned:
        user_id: str = attrs.field(metadata={KEY_METADATA: "userID"})

    assert structure_config(Pinned, {"userID": "u"}) == Pinned("u")
    assert problems(Pinned, {"userId": "u"})[0][0] == "userId"


def test_private_fields_use_their_alias() -> None:
    @attrs.frozen
    class Private:
        _secret_name: str

    assert structure_config(Private, {"secretName": "s"}) == Private("s")


def test_a_class_with_no_fields_refuses_every_key() -> None:
    @attrs.frozen
    class Empty:
        pass

    assert problems(Empty, {"a": 1}) == (
        ("a", "is not a known key (no keys are expected)"),
    )
    assert structure_config(Empty, None) == Empty()


def test_non_string_keys_are_refused() -> None:
    assert problems(Profile, {1: "x"}) == (("1", "is not a string key"),)


# --- types -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "key", "detail"),
    [
        ({"maxTokens": "8"}, "maxTokens", "must be an integer, got a string"),
        ({"maxTokens": True}, "maxTokens", "must be an integer, got a boolean"),
        ({"maxTokens": 1.5}, "maxTokens", "must be an integer, got a number"),
        (
            {"temperature": "hot"},
            "temperature",
            "must be a number or null, got a string",
        ),
        (
            {"temperature": False},
            "temperature",
            "must be a number or null, got a boolean",
        ),
        ({"includeUsage": 1}, "includeUsage", "must be a boolean, got an integer"),
        ({"baseURL": ["x"]}, "baseURL", "must be a string or null, got a list"),
        ({"models": "m"}, "models", "must be a list of mappings, got a string"),
        ({"models": ["m"]}, "models[0]", "must be a mapping, got a string"),
        (
            {"models": [{"id": "a"}, {"id": "b", "contextWindow": "big"}]},
            "models[1].contextWindow",
            "must be an integer or null, got a string",
        ),
        ({"models": [{}]}, "models[0].id", "is required (expected a string)"),
        (
            {"models": [{"id": "a", "inputModalities": "text"}]},
            "models[0].inputModalities",
            "must be a list of strings, got a string",
        ),
        ({"headers": ["a"]}, "headers", "must be a mapping, got a list"),
        ({"headers": {"x-a": 1}}, "headers.x-a", "must be a string, got an integer"),
        (
            {"effort": "medium"},
            "effort",
            'must be one of "off", "low", "high" or null, got "medium"',
        ),
        (
            {"thinking": "maybe"},
            "thinking",
            'must be one of "enabled", "disabled" or null, got "maybe"',
        ),
        ({"tags": "a"}, "tags", "must be a list of strings, got a string"),
        ({"pair": ["a"]}, "pair", "must be a list of 2 items or null, got a list"),
        ({"pair": ["a", "b"]}, "pair[1]", "must be an integer, got a string"),
        (
            {"limit": 1.5},
            "limit",
            "must be an integer or a string or null, got a number",
        ),
        ({"secret": 5}, "secret", "must be a string or null, got an integer"),
    ],
)
def test_wrong_types_are_refused_naming_the_key_path(
    data: dict[str, Any], key: str, detail: str
) -> None:
    assert problems(Profile, data) == ((key, detail),)


def test_every_problem_is_reported_at_once() -> None:
    error_problems = problems(
        Profile, {"maxTokens": "x", "bogus": 1, "models": [{"id": 3}]}
    )
    assert {key for key, _ in error_problems} == {"maxTokens", "bogus", "models[0].id"}


def test_values_of_the_right_type_are_kept() -> None:
    profile = structure_config(
        Profile,
        {
            "temperature": 1,
            "headers": {"x-a": "b"},
            "effort": "low",
            "thinking": "disabled",
            "tags": ["a", "a", "b"],
            "pair": ["a", 2],
            "limit": "none",
            "extra": {"anything": [1, None]},
            "secret": "sk-hidden",
        },
    )
    assert profile.temperature == 1
    assert profile.headers == {"x-a": "b"}
    assert profile.effort == "low"
    assert profile.thinking is Thinking.DISABLED
    assert profile.tags == frozenset({"a", "b"})
    assert profile.pair == ("a", 2)
    assert profile.limit == "none"
    assert profile.extra == {"anything": [1, None]}
    assert profile.secret == Secret("sk-hidden")
    assert "sk-hidden" not in repr(profile)


def test_a_non_mapping_config_is_refused() -> None:
    assert problems(Profile, ["a"]) == (("", "must be a mapping, got a list"),)
    assert str(ConfigError([("", "must be a mapping, got a list")])) == (
        "config must be a mapping, got a list"
    )


def test_values_are_never_echoed_in_type_errors() -> None:
    secret = "sk-live-abcdef0123456789"
    error_problems = problems(
        Profile, {"apiKeyEnv": [secret], "headers": {"auth": [secret]}}
    )
    assert secret not in repr(error_problems)


# --- validators ----------------------------------------------------------------------


def test_attrs_validators_are_reported_against_their_key() -> None:
    @attrs.frozen(kw_only=True)
    class Routes:
        provider_routes: list[str] = attrs.field(validator=attrs.validators.min_len(1))

    assert problems(Routes, {"providerRoutes": []}) == (
        ("providerRoutes", 'is invalid: Length of "providerRoutes" must be >= 1: 0'),
    )


def test_protocol_field_checks_are_reported_against_their_key() -> None:
    @attrs.frozen(kw_only=True)
    class Limits:
        max_tokens: int = attrs.field(validator=c.positive_int)

    assert problems(Limits, {"maxTokens": 0}) == (("maxTokens", "must be > 0, got 0"),)


def test_validators_carrying_the_attribute_are_reported_against_it() -> None:
    @attrs.frozen(kw_only=True)
    class Choice:
        mode: str = attrs.field(validator=attrs.validators.in_(["a", "b"]))

    ((key, detail),) = problems(Choice, {"mode": "c"})
    assert key == "mode"
    assert detail.startswith("is invalid: ")


def test_post_init_checks_may_name_a_key_with_plugin_config_error() -> None:
    @attrs.frozen(kw_only=True)
    class Deployment:
        thinking: str = "enabled"
        reasoning_effort: str | None = None

        def __attrs_post_init__(self) -> None:
            if self.thinking == "disabled" and self.reasoning_effort not in (
                None,
                "off",
            ):
                raise PluginConfigError(
                    "reasoning_effort", "must be 'off' when thinking is disabled"
                )

    assert problems(
        Deployment, {"thinking": "disabled", "reasoningEffort": "high"}
    ) == (("reasoningEffort", "must be 'off' when thinking is disabled"),)


def test_a_check_that_names_no_field_is_reported_for_the_whole_config() -> None:
    @attrs.frozen(kw_only=True)
    class Whole:
        a: int = 0

        def __attrs_post_init__(self) -> None:
            raise ValueError("these settings do not go together")

    assert problems(Whole, {}) == (
        ("", "is invalid: these settings do not go together"),
    )


def test_nested_validators_keep_the_path() -> None:
    assert problems(
        Catalog, {"models": [{"contextWindow": 1}, {"contextWindow": -1}]}
    ) == (("models[1].contextWindow", "must be >= 0, got -1"),)


# --- interpolation ------------------------------------------------------------------


def test_interpolation_replaces_variables_and_defaults() -> None:
    environ = {"HOST": "example.org", "EMPTY": ""}
    assert interpolate(
        {
            "url": "https://${HOST}/v1",
            "list": ["${EMPTY}", "${EMPTY:-fallback}", "${UNSET:-}", "$${HOST}"],
            "number": 3,
            "nested": {"deep": "${UNSET:-a:b}"},
        },
        environ,
    ) == {
        "url": "https://example.org/v1",
        "list": ["", "fallback", "", "${HOST}"],
        "number": 3,
        "nested": {"deep": "a:b"},
    }


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        (
            "${NOPE}",
            "refers to ${NOPE}, which is not set (write ${NOPE:-default} to give a "
            "default)",
        ),
        ("abc ${", "has an unterminated ${ (write $${ for a literal ${)"),
        (
            "${1BAD}",
            "has the invalid expression ${1BAD} (expected ${NAME} or ${NAME:-default})",
        ),
        (
            "${A:-${B}}",
            "has ${...} inside ${A:-${B}: a default is plain text (write $${ for a "
            "literal ${)",
        ),
    ],
)
def test_interpolation_errors_name_the_key_path(text: str, detail: str) -> None:
    with pytest.raises(ConfigError) as caught:
        interpolate({"a": {"b": [text]}}, {})
    assert caught.value.problems == (("a.b[0]", detail),)
    assert caught.value.key == "a.b[0]"


@given(st.text().filter(lambda s: "$" not in s))
def test_text_without_a_dollar_is_never_changed(text: str) -> None:
    assert interpolate(text, {}) == text


@given(
    st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True),
    st.text(alphabet=st.characters(blacklist_characters="}$")),
    st.one_of(st.none(), st.text()),
)
def test_a_default_applies_exactly_when_the_variable_is_unset_or_empty(
    name: str, default: str, value: str | None
) -> None:
    environ = {} if value is None else {name: value}
    expected = value if value else default
    assert interpolate(f"${{{name}:-{default}}}", environ) == expected


def test_value_kind_speaks_yaml() -> None:
    values = (None, True, "s", 1, 1.5, {}, [], b"", object(), Thinking.ENABLED)
    assert [value_kind(v) for v in values] == [
        "null",
        "a boolean",
        "a string",
        "an integer",
        "a number",
        "a mapping",
        "a list",
        "bytes",
        "an object",
        "a Thinking",
    ]


# --- what a missing or refused value is said to be ------------------------------------


def test_a_missing_key_names_what_its_field_takes() -> None:
    @attrs.frozen(kw_only=True)
    class Required:
        flag: bool
        anything: Any
        model: Model
        items: list[Any]
        path: pathlib.Path

    assert problems(Required, {}) == (
        ("flag", "is required (expected a boolean)"),
        ("anything", "is required (expected any value)"),
        ("model", "is required (expected a mapping)"),
        ("items", "is required (expected a list)"),
        ("path", "is required (expected a Path)"),
    )


def test_literal_choices_are_shown_in_yaml_spelling() -> None:
    @attrs.frozen(kw_only=True)
    class Choice:
        mode: Literal["auto", True, 3, None] = "auto"

    assert problems(Choice, {"mode": "manual"}) == (
        ("mode", 'must be one of "auto", true, 3, null, got "manual"'),
    )
    assert structure_config(Choice, {"mode": True}) == Choice(mode=True)
    assert structure_config(Choice, {"mode": None}) == Choice(mode=None)


def test_null_is_taken_only_by_a_union_that_allows_it() -> None:
    assert structure_config(Profile, {"limit": None}).limit is None

    @attrs.frozen(kw_only=True)
    class Strict:
        limit: int | str = 0

    assert problems(Strict, {"limit": None}) == (
        ("limit", "must be an integer or a string, got null"),
    )


def test_a_secret_given_from_python_is_kept() -> None:
    secret = Secret("sk-hidden")
    assert structure_config(Profile, {"secret": secret}).secret is secret


def test_a_value_its_field_type_cannot_be_built_from_is_invalid() -> None:
    @attrs.frozen(kw_only=True)
    class Located:
        path: pathlib.Path = pathlib.Path(".")

    ((key, detail),) = problems(Located, {"path": 5})
    assert key == "path"
    assert detail.startswith("is invalid: ")
