"""The one config mechanism: YAML- or JSON-shaped mappings into frozen attrs config
classes, and the error that names the key.

Adapters, retry policies and plugins are configured through it, so a key is read,
checked and reported the same way wherever it is written. Contracts callers may
rely on:

- Keys are the TypeScript camelCase names of the snake_case attrs fields
  (``api_key`` <- ``apiKey``). A later word may also be written in capitals, so
  ``base_url`` accepts ``baseUrl`` and ``baseURL`` (the key is reported as
  ``baseURL``: ``url`` is spelt as in the TypeScript config). A field's
  ``metadata={KEY_METADATA: "exactKey"}`` pins one exact spelling instead.
- Strict: a missing required key, an unknown key (with a "did you mean" hint), a
  key given twice in two spellings, and a value of the wrong type are refused;
  nothing is coerced (``"8"`` is not an integer, a string is not a list, ``1`` is
  not a boolean). Nested attrs classes, lists, tuples, sets, mappings, optionals,
  unions, ``Literal`` and ``Enum`` fields follow the same rules; a ``Secret``
  field takes a string; ``Any`` takes anything as is.
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

import difflib
import enum
import itertools
import re
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Final, Literal, Union, cast, get_args, get_origin

import attrs
import cattrs
from cattrs import BaseConverter
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    is_any_set,
    is_mapping,
    is_sequence,
    list_structure_factory,
    mapping_structure_factory,
)
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, override

from dsh_llm.credentials import Secret
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER, FieldError, check_timeout_ms

__all__ = [
    "KEY_METADATA",
    "RAW_METADATA",
    "ConfigError",
    "PluginConfigError",
    "check_bool",
    "check_non_empty_str",
    "check_one_of",
    "check_optional_timeout",
    "check_positive_int",
    "check_safe_positive_int",
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


class ConfigError(ValueError):
    """A config could not be read. ``problems`` lists each ``(key path, what is
    wrong)`` as data; the message joins them as ``config key "<path>" <what>``."""

    def __init__(self, problems: Iterable[tuple[str, str]]) -> None:
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        """Each problem: the key path (``""`` for the config as a whole) and what
        is wrong, as the rest of a sentence."""
        super().__init__(self._render())

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

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.problems,))


class PluginConfigError(ConfigError):
    """One config key is wrong: raised by a config class's validators, by
    ``__attrs_post_init__`` or by a plugin's ``apply``. The message is
    ``<key> <detail>``; ``package`` (a subclass's name for itself, e.g.
    ``llm-deepseek``) is put in front as ``<package>: ``.

    Args:
        key: The key as written in YAML (``reasoningEffort``,
            ``models[0].maxTokens``) or the attrs field name (``reasoning_effort``).
        detail: What is wrong, as the rest of a sentence after the key: ``"must be
            'off' when thinking is disabled"``.
    """

    package: ClassVar[str | None] = None
    """The package named at the start of the message, if any."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__([(key, detail)])

    def _render(self) -> str:
        key, detail = self.problems[0]
        prefix = "" if self.package is None else f"{self.package}: "
        return f"{prefix}{key} {detail}"

    @property
    def key(self) -> str:
        """The key concerned."""
        return self.problems[0][0]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self.problems[0])


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
        return _new_converter().structure(dict(data), config_cls)
    except Exception as exc:
        problems = _problems(exc, "") or [
            ("", f"could not be read: {type(exc).__name__}: {exc}")
        ]
        raise ConfigError(problems) from exc


# --- the strict converter ---------------------------------------------------------


class _LeafError(TypeError):
    """A value of the wrong type or outside a fixed set: ``must be <expected>,
    got <got>`` (the rest of a sentence after the key)."""

    def __init__(self, expected: str, got: str) -> None:
        super().__init__(f"must be {expected}, got {got}")
        self.got = got


class _KeyProblem(Exception):
    """A problem with one key of a mapping (unknown, or given twice)."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{key} {detail}")
        self.key = key
        self.detail = detail


def value_kind(value: object) -> str:
    """How ``value`` reads in YAML terms: ``a string``, ``a list``, ``null``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


_PLURALS: Final[dict[Any, str]] = {
    str: "strings",
    int: "integers",
    float: "numbers",
    bool: "booleans",
    Secret: "strings",
}


def _describe(t: Any) -> str:
    """What a value of type ``t`` looks like in YAML."""
    if t is str or t is Secret:
        return "a string"
    if t is int:
        return "an integer"
    if t is float:
        return "a number"
    if t is bool:
        return "a boolean"
    if t is None or t is type(None):
        return "null"
    if t is Any or t is object:
        return "any value"
    origin = get_origin(t)
    args = get_args(t)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in args)
    if origin is Literal:
        return "one of " + ", ".join(_show(arg) for arg in args)
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return "one of " + ", ".join(_show(member.value) for member in t)
    if isinstance(t, type) and attrs.has(t):
        return "a mapping"
    if is_mapping(t):
        return "a mapping"
    if origin is tuple and args and args[-1] is not Ellipsis:
        return f"a list of {len(args)} items"
    if is_sequence(t) or is_any_set(t) or origin is tuple:
        item = args[0] if args else Any
        if item is Any:
            return "a list"
        plural = _PLURALS.get(item)
        if plural is None and isinstance(item, type) and attrs.has(item):
            plural = "mappings"
        return f"a list of {plural}" if plural else f"a list of {_describe(item)}"
    return f"a {getattr(t, '__name__', str(t))}"


def _show(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _leaf(expected: type | tuple[type, ...], label: str) -> Callable[[Any, Any], Any]:
    allowed = expected if isinstance(expected, tuple) else (expected,)

    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and bool not in allowed:
            raise _LeafError(label, "a boolean")
        if not isinstance(value, allowed):
            raise _LeafError(label, value_kind(value))
        return value

    return structure


def _secret(value: Any, _: Any) -> Secret:
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise _LeafError("a string", value_kind(value))
    return Secret(value)


def _is_union(t: Any) -> bool:
    return get_origin(t) in (Union, types.UnionType)


def _union_factory(t: Any, conv: BaseConverter) -> Callable[[Any, Any], Any]:
    members = [arg for arg in get_args(t) if arg is not type(None)]
    nullable = len(members) != len(get_args(t))
    label = _describe(t)

    def structure(value: Any, _: Any) -> Any:
        if value is None:
            if nullable:
                return None
            raise _LeafError(label, "null")
        failures: list[Exception] = []
        for member in members:
            try:
                return conv.structure(value, member)
            except Exception as exc:
                failures.append(exc)
        if len(failures) == 1:
            failure = failures[0]
            if not isinstance(failure, _LeafError):
                raise failure
            raise _LeafError(label, failure.got)
        raise _LeafError(label, value_kind(value))

    return structure


def _is_literal(t: Any) -> bool:
    return get_origin(t) is Literal


def _choices_factory(t: Any, _: BaseConverter) -> Callable[[Any, Any], Any]:
    if _is_literal(t):
        choices: list[tuple[Any, Any]] = [(arg, arg) for arg in get_args(t)]
    else:
        choices = [(member.value, member) for member in t]
    label = _describe(t)

    def structure(value: Any, _: Any) -> Any:
        for raw, result in choices:
            if type(raw) is type(value) and raw == value:
                return result
        shown = (
            _show(value) if isinstance(value, str | int | float) else value_kind(value)
        )
        raise _LeafError(label, shown)

    return structure


def _is_tuple(t: Any) -> bool:
    origin: Any = get_origin(t)
    return origin is tuple


def _is_enum(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, enum.Enum)


def _sequence_factory(t: Any, conv: BaseConverter) -> Callable[[Any, Any], Any]:
    origin = get_origin(t) or t
    args = get_args(t)
    label = _describe(t)
    if origin is tuple and args and args[-1] is not Ellipsis:
        return _fixed_tuple(t, conv, label)
    if origin is tuple:
        inner = homogenous_tuple_structure_factory(t, conv)
    elif is_any_set(t):
        item = args[0] if args else Any
        element = list_structure_factory(list[item], conv)  # type: ignore[valid-type]
        builder = frozenset if origin is frozenset else set

        def as_set(value: Any, type_: Any) -> Any:
            return builder(element(value, type_))

        inner = as_set
    else:
        inner = list_structure_factory(t, conv)

    def structure(value: Any, type_: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise _LeafError(label, value_kind(value))
        return inner(value, type_)

    return structure


def _fixed_tuple(t: Any, conv: BaseConverter, label: str) -> Callable[[Any, Any], Any]:
    items = get_args(t)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, list | tuple) or len(value) != len(items):
            raise _LeafError(f"a list of {len(items)} items", value_kind(value))
        results: list[Any] = []
        errors: list[Exception] = []
        for index, (item, item_type) in enumerate(zip(value, items, strict=True)):
            try:
                results.append(conv.structure(item, item_type))
            except Exception as exc:
                exc.__notes__ = [
                    *getattr(exc, "__notes__", []),
                    IterableValidationNote(f"item @ index {index}", index, item_type),
                ]
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {label}", errors, t)
        return tuple(results)

    return structure


def _mapping_factory(t: Any, conv: BaseConverter) -> Callable[[Any, Any], Any]:
    inner = mapping_structure_factory(t, conv)
    label = _describe(t)

    def structure(value: Any, type_: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _LeafError(label, value_kind(value))
        return inner(value, type_)

    return structure


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


def _squash(key: str) -> str:
    return re.sub(r"[_\-]", "", key).lower()


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
            raise _LeafError("a mapping", value_kind(value))
        normalized: dict[str, Any] = {}
        spelt: dict[str, str] = {}
        problems: list[Exception] = []
        for key, item in value.items():
            if not isinstance(key, str):
                problems.append(_KeyProblem(str(key), "is not a string key"))
                continue
            target = by_spelling.get(key)
            if target is None:
                problems.append(_KeyProblem(key, _unknown_key_detail(key, known)))
            elif target in normalized:
                problems.append(
                    _KeyProblem(key, f'is given twice (also as "{spelt[target]}")')
                )
            else:
                normalized[target] = item
                spelt[target] = key
        try:
            result = inner(normalized, type_)
        except ClassValidationError as exc:
            raise ClassValidationError(
                exc.message, [*problems, *exc.exceptions], cls
            ) from None
        if problems:
            raise ClassValidationError(
                f"While structuring {cls.__name__}", problems, cls
            )
        return result

    return structure


def _raw(value: Any, _: Any) -> Any:
    return value


def _unknown_key_detail(key: str, known: list[str]) -> str:
    expected = f"expected one of {quoted(known)}" if known else "no keys are expected"
    guess = next((k for k in known if _squash(k) == _squash(key)), None)
    if guess is None:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
        guess = close[0] if close else None
    hint = f'; did you mean "{guess}"?' if guess else ""
    return f"is not a known key ({expected}{hint})"


def _new_converter() -> cattrs.Converter:
    conv = cattrs.Converter(detailed_validation=True, forbid_extra_keys=True)
    conv.register_structure_hook(str, _leaf(str, "a string"))
    conv.register_structure_hook(int, _leaf(int, "an integer"))
    conv.register_structure_hook(float, _leaf((int, float), "a number"))
    conv.register_structure_hook(bool, _leaf(bool, "a boolean"))
    conv.register_structure_hook(Secret, _secret)
    conv.register_structure_hook(Any, lambda value, _: value)
    conv.register_structure_hook_factory(is_mapping, _mapping_factory)
    conv.register_structure_hook_factory(
        lambda t: is_sequence(t) or is_any_set(t) or _is_tuple(t),
        _sequence_factory,
    )
    conv.register_structure_hook_factory(
        lambda t: _is_literal(t) or _is_enum(t), _choices_factory
    )
    conv.register_structure_hook_factory(_is_union, _union_factory)
    conv.register_structure_hook_factory(attrs.has, _class_factory)
    return conv


# --- error reporting --------------------------------------------------------------


def join_key(path: str, key: str) -> str:
    """``key`` under ``path`` (``path.key``; ``key`` alone at the top)."""
    return key if not path else f"{path}.{key}"


def _note(exc: BaseException) -> object:
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, AttributeValidationNote | IterableValidationNote):
            return note
    return None


def _problems(exc: BaseException, path: str) -> list[tuple[str, str]]:
    """Flatten a structuring failure into ``(key path, what is wrong)`` pairs."""
    if isinstance(exc, ConfigError):
        return [(join_key(path, key), detail) for key, detail in exc.problems]
    if isinstance(exc, ClassValidationError):
        found: list[tuple[str, str]] = []
        for sub in exc.exceptions:
            note = _note(sub)
            if isinstance(note, AttributeValidationNote):
                sub_path = join_key(path, config_key(exc.cl, note.name))
                if isinstance(sub, KeyError):
                    found.append(
                        (sub_path, f"is required (expected {_describe(note.type)})")
                    )
                else:
                    found.extend(_problems(sub, sub_path))
            elif isinstance(sub, _KeyProblem | _LeafError):
                found.extend(_problems(sub, path))
            else:
                found.append(_construction_problem(sub, exc.cl, path))
        return found
    if isinstance(exc, IterableValidationError):
        found = []
        for sub in exc.exceptions:
            note = _note(sub)
            if isinstance(note, IterableValidationNote):
                index = note.index
                sub_path = (
                    join_key(path, index)
                    if isinstance(index, str)
                    else f"{path}[{index}]"
                )
                found.extend(_problems(sub, sub_path))
            else:
                found.extend(_problems(sub, path))
        return found
    if isinstance(exc, _KeyProblem):
        return [(join_key(path, exc.key), exc.detail)]
    if isinstance(exc, _LeafError):
        return [(path, str(exc))]
    if isinstance(exc, TypeError | ValueError):
        return [(path, f"is invalid: {exc}")]
    return []


def config_key(cls: Any, attribute: str) -> str:
    """The config key of ``cls``'s field ``attribute`` (``attribute`` itself when
    ``cls`` has no such field)."""
    if isinstance(cls, type) and attrs.has(cls):
        for field in attrs.fields(cls):
            if attribute in (field.name, field.alias):
                return _yaml_key(field)
    return attribute


def _construction_problem(exc: BaseException, cls: Any, path: str) -> tuple[str, str]:
    """Attribute an exception raised by ``cls(...)`` (a validator or
    ``__attrs_post_init__``) to the field it is about, when it says which."""
    if isinstance(exc, PluginConfigError):
        return (join_key(path, config_key(cls, exc.key)), exc.detail)
    if isinstance(exc, ConfigError) and exc.problems:
        key, detail = exc.problems[0]
        return (join_key(path, config_key(cls, key)), detail)
    if isinstance(exc, FieldError):
        return (join_key(path, config_key(cls, exc.field)), exc.detail)
    fields = list(attrs.fields(cls)) if isinstance(cls, type) and attrs.has(cls) else []
    attribute = next(
        (arg.name for arg in exc.args if isinstance(arg, attrs.Attribute)), None
    )
    text = str(exc.args[0]) if exc.args else str(exc)
    if attribute is None:
        for field in fields:
            if re.search(rf"""['"`]{re.escape(field.name)}['"`]""", text):
                attribute = field.name
                break
    if attribute is None:
        return (path, f"is invalid: {text}")
    key = config_key(cls, attribute)
    text = re.sub(rf"""['"`]{re.escape(attribute)}['"`]""", f'"{key}"', text)
    return (join_key(path, key), f"is invalid: {text}")


def quoted(items: Iterable[str]) -> str:
    """``items`` as messages list them: each in double quotes, comma-separated."""
    return ", ".join(f'"{item}"' for item in items)


# --- field validators ---------------------------------------------------------------
#
# attrs validators for config classes. Each raises the class's ``config_error``
# (a ``PluginConfigError`` subclass naming its package; ``PluginConfigError`` when
# the class names none) keyed by the field's config key, so direct construction and
# YAML loading report a bad value alike.

Check = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def field_error(inst: object, field: str, detail: str) -> PluginConfigError:
    """The error for ``inst``'s field ``field`` (attribute name or config key)."""
    error: type[PluginConfigError] = getattr(
        type(inst), "config_error", PluginConfigError
    )
    return error(config_key(type(inst), field), detail)


def check_non_empty_str(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    """A non-empty string."""
    if not isinstance(value, str) or value == "":
        raise field_error(inst, attribute.name, "must be a non-empty string")


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


def _timeout_detail(value: Any) -> str | None:
    try:
        check_timeout_ms("", value)
    except ValueError as exc:
        return str(exc).strip()
    return None


def check_timeout(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A timeout in ms: a finite number in (0, 2147483647]."""
    detail = _timeout_detail(value)
    if detail is not None:
        raise field_error(inst, attribute.name, detail)


def check_optional_timeout(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    """``None`` (unbounded) or a timeout as ``check_timeout`` wants it."""
    if value is not None:
        check_timeout(inst, attribute, value)


def check_one_of(*choices: object) -> Check:
    """One of ``choices`` (compared by type and value: ``1`` is not ``True``)."""
    shown = ", ".join(_show(choice) for choice in choices)

    def check(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not any(type(value) is type(c) and value == c for c in choices):
            raise field_error(inst, attribute.name, f"must be one of {shown}")

    return check
