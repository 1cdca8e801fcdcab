"""The one config mechanism: YAML- or JSON-shaped mappings into frozen attrs config
classes, and the error that names the key.

Adapters, retry policies and plugins are configured through it, so a key is read,
checked and reported the same way wherever it is written. The leaf rules, the
wording and the key-path flattener are ``dsh_llm.converter``'s (shared with
``dsh_llm.serde``); this module adds the key spellings, ``Secret`` fields, raw
fields, ``ConfigError`` and the field validators. Contracts callers may rely on:

- Keys are the TypeScript camelCase names of the snake_case attrs fields
  (``api_key`` <- ``apiKey``). A later word may also be written in capitals, so
  ``base_url`` accepts ``baseUrl`` and ``baseURL`` (the key is reported as
  ``baseURL``: ``url`` is spelt as in the TypeScript config). A field's
  ``metadata={KEY_METADATA: "exactKey"}`` pins one exact spelling instead.
- Strict, by ``dsh_llm.converter``'s rules: a missing required key, an unknown
  key (with a "did you mean" hint), a key given twice in two spellings, and a
  value of the wrong type are refused; nothing is coerced (``"8"`` is not an
  integer, a string is not a list, ``1`` is not a boolean). A ``Secret`` field
  takes a string.
- Validators of the class itself (attrs validators, ``__attrs_post_init__``) run
  too; what they raise is reported against the field they name (a
  ``PluginConfigError``, an attrs ``Attribute`` in the exception, or the field
  name quoted in its message).
- Every failure is one ``ConfigError`` listing each problem as a key path
  (``models[0].contextWindow``) and what was expected. Messages never echo a
  config value except the choice given for a ``Literal``/``Enum`` field.
- A config class checks its own fields (``validators`` below): what is wrong is
  raised as a ``PluginConfigError`` whose ``key`` is the camelCase config key and
  whose ``detail`` says what is wrong, as data; nothing parses a message.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import ClassVar
from typing import Final
from typing import cast

import attrs
import cattrs
from cattrs import BaseConverter
from cattrs.errors import ClassValidationError
from cattrs.gen import make_dict_structure_fn
from cattrs.gen import override

from dsh_llm.converter import KeyProblem
from dsh_llm.converter import LeafError
from dsh_llm.converter import StructureError
from dsh_llm.converter import join_key
from dsh_llm.converter import problems
from dsh_llm.converter import quoted
from dsh_llm.converter import show
from dsh_llm.converter import strict_converter
from dsh_llm.converter import unknown_key_detail
from dsh_llm.converter import value_kind
from dsh_llm.credentials import Secret
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.protocol.checks import timeout_detail

__all__ = [
    "KEY_METADATA",
    "RAW_METADATA",
    "ConfigError",
    "PluginConfigError",
    "check_bool",
    "check_non_empty_str",
    "check_one_of",
    "check_optional_match",
    "check_optional_str",
    "check_optional_timeout",
    "check_positive_int",
    "check_safe_positive_int",
    "check_that",
    "check_timeout",
    "config_key",
    "field_error",
    "join_key",
    "quoted",
    "render_problems",
    "structure_config",
    "value_kind",
]

KEY_METADATA: Final = "key"
"""attrs field metadata key pinning a field's exact config key, e.g.
``attrs.field(metadata={"key": "baseURL"})``."""
RAW_METADATA: Final = "raw"
"""attrs field metadata key: ``{"raw": True}`` passes the field's value to the class
as written (its own attrs converter and validators read and check it)."""


class ConfigError(StructureError):
    """A config could not be read. ``problems`` lists each ``(key path, what is
    wrong)`` as data (``""`` for the config as a whole; what is wrong as the rest
    of a sentence); the message joins them as ``config key "<path>" <what>``."""

    def _render(self) -> str:
        return render_problems(self.problems)

    @property
    def key(self) -> str | None:
        """The key path of the first problem, ``None`` for the whole config."""
        return self.problems[0][0] or None if self.problems else None

    @property
    def detail(self) -> str:
        """What is wrong with the first problem's key."""
        return self.problems[0][1] if self.problems else ""


class PluginConfigError(ConfigError):
    """One config key is wrong: raised by a config class's validators, by
    ``__attrs_post_init__`` or by a plugin's ``apply``. The message is
    ``<key> <detail>``, with ``<package>: `` in front when a package is named.

    Args:
        key: The key as written in YAML (``reasoningEffort``,
            ``models[0].maxTokens``) or the attrs field name (``reasoning_effort``).
        detail: What is wrong, as the rest of a sentence after the key: ``"must be
            'off' when thinking is disabled"``.
        package: The package the config belongs to (``llm-deepseek``), named at
            the start of the message; default the class's ``package``.
    """

    package: ClassVar[str | None] = None
    """The package a subclass names when none is given."""

    def __init__(self, key: str, detail: str, *, package: str | None = None) -> None:
        self.package_name = type(self).package if package is None else package
        """The package named at the start of the message (``None``: none)."""
        super().__init__([(key, detail)])

    def _render(self) -> str:
        key, detail = self.problems[0]
        prefix = "" if self.package_name is None else f"{self.package_name}: "
        return f"{prefix}{key} {detail}"

    @property
    def key(self) -> str:
        """The key concerned."""
        return self.problems[0][0]

    def __reduce__(self) -> tuple[Any, ...]:
        key, detail = self.problems[0]
        return (_rebuild_plugin_error, (type(self), key, detail, self.package_name))


def _rebuild_plugin_error(
    cls: type[PluginConfigError], key: str, detail: str, package: str | None
) -> PluginConfigError:
    return cls(key, detail, package=package)


def render_problems(problems: Iterable[tuple[str, str]], what: str = "config") -> str:
    """``config key "<path>" <detail>`` for each problem, joined by ``"; "``."""
    return "; ".join(
        f'{what} key "{key}" {detail}' if key else f"{what} {detail}"
        for key, detail in problems
    )


def structure_config(config_cls: type[Any], data: object) -> Any:
    """Build ``config_cls`` (an attrs class) from a YAML-shaped mapping.

    ``None`` counts as an empty mapping.

    Raises:
        ConfigError: naming every offending key and what was expected.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError([("", f"must be a mapping, got {value_kind(data)}")])
    try:
        return _converter().structure(dict(data), config_cls)
    except Exception as exc:
        found = problems(exc, "", key_of=config_key)
        raise ConfigError(found or [("", "could not be read")]) from exc


# --- the converter: structure's leaves, plus key spellings and secrets ------------


def _secret(value: Any, _: Any) -> Secret:
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise LeafError("a string", value_kind(value))
    return Secret(value)


def _pinned_key(field: attrs.Attribute[Any]) -> str | None:
    explicit = field.metadata.get(KEY_METADATA)
    return explicit if isinstance(explicit, str) and explicit else None


def _words(field: attrs.Attribute[Any]) -> list[str]:
    """The snake_case words of the field's init name (its alias)."""
    return [part for part in (field.alias or field.name).split("_") if part] or [
        field.name
    ]


def _yaml_key(field: attrs.Attribute[Any]) -> str:
    pinned = _pinned_key(field)
    if pinned is not None:
        return pinned
    head, *rest = _words(field)
    return head + "".join(
        "URL" if part == "url" else part[:1].upper() + part[1:] for part in rest
    )


def _spellings(field: attrs.Attribute[Any]) -> set[str]:
    pinned = _pinned_key(field)
    if pinned is not None:
        return {pinned}
    head, *rest = _words(field)
    options = [(part[:1].upper() + part[1:], part.upper()) for part in rest]
    return {head + "".join(combo) for combo in itertools.product(*options)}


def _class_factory(cls: Any, conv: BaseConverter) -> Callable[[Any, Any], Any]:
    fields = [field for field in attrs.fields(cls) if field.init]
    canonical = {field.name: _yaml_key(field) for field in fields}
    by_spelling: dict[str, str] = {}
    for field in fields:
        for spelling in _spellings(field):
            by_spelling[spelling] = canonical[field.name]
    known = list(canonical.values())
    overrides = {
        field.name: override(
            rename=canonical[field.name]
            if canonical[field.name] != field.name
            else None,
            struct_hook=_raw if field.metadata.get(RAW_METADATA) else None,
        )
        for field in fields
        if canonical[field.name] != field.name or field.metadata.get(RAW_METADATA)
    }
    inner = make_dict_structure_fn(
        cls, conv, _cattrs_forbid_extra_keys=True, **cast(dict[str, Any], overrides)
    )

    def structure(value: Any, type_: Any) -> Any:
        if not isinstance(value, Mapping):
            raise LeafError("a mapping", value_kind(value))
        normalized: dict[str, Any] = {}
        spelt: dict[str, str] = {}
        refused: list[Exception] = []
        for key, item in value.items():
            if not isinstance(key, str):
                refused.append(KeyProblem(str(key), "is not a string key"))
                continue
            target = by_spelling.get(key)
            if target is None:
                refused.append(KeyProblem(key, unknown_key_detail(key, known)))
            elif target in normalized:
                refused.append(
                    KeyProblem(key, f'is given twice (also as "{spelt[target]}")')
                )
            else:
                normalized[target] = item
                spelt[target] = key
        try:
            result = inner(normalized, type_)
        except ClassValidationError as exc:
            raise ClassValidationError(
                exc.message, [*refused, *exc.exceptions], cls
            ) from None
        if refused:
            raise ClassValidationError(
                f"While structuring {cls.__name__}", refused, cls
            )
        return result

    return structure


def _raw(value: Any, _: Any) -> Any:
    return value


@functools.cache
def _converter() -> cattrs.Converter:
    # One converter for every call: building one costs milliseconds, and the
    # hooks it generates for a class are kept for the next config of that class.
    conv = strict_converter()
    conv.register_structure_hook(Secret, _secret)
    conv.register_structure_hook_factory(attrs.has, _class_factory)
    return conv


# --- error reporting --------------------------------------------------------------


def config_key(cls: Any, attribute: str) -> str:
    """The config key of ``cls``'s field ``attribute`` (``attribute`` itself when
    ``cls`` has no such field)."""
    if isinstance(cls, type) and attrs.has(cls):
        for field in attrs.fields(cls):
            if attribute in (field.name, field.alias):
                return _yaml_key(field)
    return attribute


# --- field validators -------------------------------------------------------------
#
# attrs validators for config classes. Each raises the class's ``config_error``
# (a ``PluginConfigError`` subclass naming its package; ``PluginConfigError`` when
# the class names none) keyed by the field's config key, so direct construction and
# YAML loading report a bad value alike.

Check = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def field_error(inst: object, field: str, detail: str) -> PluginConfigError:
    """The error for ``inst``'s field ``field`` (attribute name or config key):
    the class's ``config_error`` (``PluginConfigError`` when it names none), naming
    the class's ``package`` when it has one."""
    cls = type(inst)
    error: type[PluginConfigError] = getattr(cls, "config_error", PluginConfigError)
    package = getattr(cls, "package", None)
    return error(
        config_key(cls, field),
        detail,
        package=package if isinstance(package, str) else None,
    )


def check_non_empty_str(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    """A non-empty string."""
    if not isinstance(value, str) or value == "":
        raise field_error(inst, attribute.name, "must be a non-empty string")


def check_optional_str(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    """A string or ``None``."""
    if value is not None and not isinstance(value, str):
        raise field_error(inst, attribute.name, "must be a string")


def check_bool(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """``True`` or ``False``."""
    if not isinstance(value, bool):
        raise field_error(inst, attribute.name, "must be a boolean")


def check_positive_int(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    """An ``int`` (not ``bool``) above 0."""
    if type(value) is not int or value <= 0:
        raise field_error(inst, attribute.name, "must be a positive integer")


def check_safe_positive_int(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    """An ``int`` in ``1..MAX_SAFE_INTEGER`` (exact in every JSON reader)."""
    if type(value) is not int or not 0 < value <= MAX_SAFE_INTEGER:
        raise field_error(
            inst,
            attribute.name,
            f"must be a positive integer no greater than {MAX_SAFE_INTEGER}",
        )


def check_timeout(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A timeout in ms: a finite number in (0, 2147483647]."""
    detail = timeout_detail(value)
    if detail is not None:
        raise field_error(inst, attribute.name, detail)


def check_optional_timeout(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    """``None`` (unbounded) or a timeout as ``check_timeout`` wants it."""
    if value is not None:
        check_timeout(inst, attribute, value)


def check_that(test: Callable[[Any], object], detail: str) -> Check:
    """A value ``test`` accepts (a true result); else a ``field_error`` saying
    ``detail`` (``"must be ..."``): a field's rule as one predicate."""

    def check(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not test(value):
            raise field_error(inst, attribute.name, detail)

    return check


def check_optional_match(pattern: re.Pattern[str], detail: str) -> Check:
    """``None``, or a string ``pattern`` matches whole; else ``detail``."""
    return check_that(
        lambda value: (
            value is None
            or (isinstance(value, str) and pattern.fullmatch(value) is not None)
        ),
        detail,
    )


def check_one_of(*choices: object) -> Check:
    """One of ``choices`` (compared by type and value: ``1`` is not ``True``)."""
    return check_that(
        lambda value: any(type(value) is type(c) and value == c for c in choices),
        f"must be one of {', '.join(show(choice) for choice in choices)}",
    )
