"""The strict cattrs base of ``dsh_llm.serde`` and ``dsh_llm.config``: one set of
leaf rules, one wording, one key-path flattener.

Each of the two adds its own class factory (key spellings, renames, tags) to a
``strict_converter()``. Contracts callers may rely on:

- Nothing is coerced: a string field takes a string, an integer field an ``int``
  (never a ``bool``), a number field an ``int`` or a ``float`` (never a
  ``bool``), a boolean field ``True`` or ``False``; ``Any`` takes anything as is.
  Lists, tuples (homogeneous or fixed), sets, mappings, unions (``X | None``
  included), ``Literal`` and ``Enum`` fields follow the same rules.
- One vocabulary: ``value_kind`` says what a value is (``null``, ``a boolean``,
  ``a string``, ``an integer``, ``a number``, ``a mapping``, ``a list``),
  ``describe`` what a type takes, ``show`` a choice as written. A refused value
  reads ``must be <describe(type)>, got <value_kind(value)>``; only a choice
  (``Literal``, ``Enum``) is echoed, as ``got "medium"``.
- ``problems(exc, path, key_of=...)`` flattens any structuring failure into
  ``(key path, detail)`` pairs: keys joined by ``.``, list items as ``[0]``, a
  missing key ``is required (expected ...)``, an unknown one ``is not a known
  key (expected one of ...; did you mean ...?)``, a class's own check against
  the field it names. ``key_of(cls, attribute)`` spells the keys.
- The exceptions (``LeafError``, ``KeyProblem``, ``StructureError``) are what
  class factories and validators raise to be reported that way.
"""

from __future__ import annotations

import difflib
import enum
import re
import types
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal
from typing import Union
from typing import get_args
from typing import get_origin

import attrs
import cattrs
from cattrs import BaseConverter
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.cols import is_any_set
from cattrs.cols import is_mapping
from cattrs.cols import is_sequence
from cattrs.cols import list_structure_factory
from cattrs.cols import mapping_structure_factory
from cattrs.errors import AttributeValidationNote
from cattrs.errors import ClassValidationError
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.errors import IterableValidationError
from cattrs.errors import IterableValidationNote

from dsh_llm.credentials import Secret
from dsh_llm.protocol.checks import FieldError

__all__ = [
    "KeyOf",
    "KeyProblem",
    "LeafError",
    "StructureError",
    "describe",
    "join_key",
    "leaf",
    "problems",
    "quoted",
    "show",
    "strict_converter",
    "unknown_key_detail",
    "value_kind",
]

KeyOf = Callable[[Any, str], str]
"""``key_of(cls, attribute)``: the key that spells ``cls``'s field ``attribute``."""


# --- the exceptions a failure is reported from ------------------------------------


class LeafError(TypeError):
    """A value of the wrong type or outside a fixed set: ``must be <expected>,
    got <got>`` (the rest of a sentence after the key)."""

    def __init__(self, expected: str, got: str) -> None:
        super().__init__(f"must be {expected}, got {got}")
        self.expected = expected
        """What the field takes (``describe`` of its type)."""
        self.got = got
        """What was given (``value_kind``, or ``show`` of a refused choice)."""


class KeyProblem(Exception):
    """A problem with one key of a mapping (unknown, given twice, a bad tag)."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{key} {detail}")
        self.key = key
        """The key as written."""
        self.detail = detail
        """What is wrong, as the rest of a sentence after the key."""


class StructureError(ValueError):
    """Problems found reading a value, as data: ``problems`` lists each
    ``(key path, what is wrong)``; ``""`` is the value as a whole."""

    def __init__(self, problems: Iterable[tuple[str, str]]) -> None:
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        """Each problem: its key path and what is wrong there."""
        super().__init__(self._render())

    def _render(self) -> str:
        return "; ".join(
            f"{key}: {detail}" if key else detail for key, detail in self.problems
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.problems,))


# --- the wording ------------------------------------------------------------------


_VALUE_KINDS: Final[tuple[tuple[Any, str], ...]] = (
    (type(None), "null"),
    (bool, "a boolean"),  # before int: a bool is an int
    (str, "a string"),
    (int, "an integer"),
    (float, "a number"),
    (Mapping, "a mapping"),
    (list | tuple, "a list"),
    (bytes | bytearray, "bytes"),
)


def value_kind(value: object) -> str:
    """What ``value`` is: ``null``, ``a boolean``, ``a string``, ``an integer``,
    ``a number``, ``a mapping``, ``a list`` (a tuple too), ``bytes``, or ``a``/``an``
    and its class name. Never the value itself."""
    for kind, name in _VALUE_KINDS:
        if isinstance(value, kind):
            return name
    return _a(type(value).__name__)


def _a(name: str) -> str:
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


_LEAVES: Final[dict[Any, tuple[str, str]]] = {
    str: ("a string", "strings"),
    Secret: ("a string", "strings"),
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    bool: ("a boolean", "booleans"),
}
"""How a leaf type reads, alone and in the plural (``a list of strings``)."""


def describe(t: Any) -> str:
    """What a value of type ``t`` looks like: ``a string``, ``a list of
    mappings``, ``one of "off", "low"``, ``an integer or null``..."""
    t = _unwrap(t)
    leaf_label = _LEAVES.get(t)
    if leaf_label is not None:
        return leaf_label[0]
    if t is None or t is type(None):
        return "null"
    if t is Any or t is object:
        return "any value"
    origin = get_origin(t)
    args = get_args(t)
    if origin in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(describe(arg) for arg in args))
    if origin is Literal:
        return "one of " + ", ".join(show(arg) for arg in args)
    if _is_enum(t):
        return "one of " + ", ".join(show(member.value) for member in t)
    if (isinstance(t, type) and attrs.has(t)) or is_mapping(t):
        return "a mapping"
    if origin is tuple and args and args[-1] is not Ellipsis:
        return f"a list of {len(args)} items"
    if is_sequence(t) or is_any_set(t) or origin is tuple:
        item = args[0] if args else Any
        return "a list" if item is Any else f"a list of {_plural(item)}"
    return _a(getattr(t, "__name__", str(t)))


def _unwrap(t: Any) -> Any:
    """The type a ``NewType`` stands for (``t`` itself otherwise)."""
    while hasattr(t, "__supertype__"):
        t = t.__supertype__
    return t


def _plural(t: Any) -> str:
    """``t`` in ``a list of ...``: ``strings``, ``mappings``, ``strings or null``."""
    t = _unwrap(t)
    leaf_label = _LEAVES.get(t)
    if leaf_label is not None:
        return leaf_label[1]
    if get_origin(t) in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(_plural(arg) for arg in get_args(t)))
    if t is None or t is type(None):
        return "null"
    if (isinstance(t, type) and attrs.has(t)) or is_mapping(t):
        return "mappings"
    if is_sequence(t) or is_any_set(t) or get_origin(t) is tuple:
        return "lists"
    return describe(t)


def show(value: object) -> str:
    """A choice as written in JSON or YAML: ``"off"``, ``true``, ``null``, ``3``."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def quoted(items: Iterable[str]) -> str:
    """``items`` as messages list them: each in double quotes, comma-separated."""
    return ", ".join(f'"{item}"' for item in items)


def join_key(path: str, key: str) -> str:
    """``key`` under ``path`` (``path.key``; either alone when the other is empty)."""
    if not path:
        return key
    return f"{path}.{key}" if key else path


def _squash(key: str) -> str:
    return re.sub(r"[_\-]", "", key).lower()


def unknown_key_detail(key: str, known: Iterable[str]) -> str:
    """What is wrong with the unknown ``key`` of a mapping whose keys are
    ``known``: ``is not a known key (expected one of "a", "b"; did you mean
    "a"?)``."""
    known = list(known)
    expected = f"expected one of {quoted(known)}" if known else "no keys are expected"
    guess = next((k for k in known if _squash(k) == _squash(key)), None)
    if guess is None:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
        guess = close[0] if close else None
    hint = f'; did you mean "{guess}"?' if guess else ""
    return f"is not a known key ({expected}{hint})"


# --- the strict leaves and containers ---------------------------------------------


Hook = Callable[[Any, Any], Any]


def leaf(expected: type | tuple[type, ...], label: str) -> Hook:
    """A structure hook taking exactly instances of ``expected`` (a ``bool`` only
    when ``bool`` is one of them), as they are; anything else raises
    ``LeafError(label, value_kind(value))``."""
    allowed = expected if isinstance(expected, tuple) else (expected,)
    takes_bool = bool in allowed

    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, allowed) and (takes_bool or value.__class__ is not bool):
            return value
        raise LeafError(label, value_kind(value))

    return structure


def _is_union(t: Any) -> bool:
    return get_origin(t) in (Union, types.UnionType)


def _union_factory(t: Any, conv: BaseConverter) -> Hook:
    members = [arg for arg in get_args(t) if arg is not type(None)]
    nullable = len(members) != len(get_args(t))
    label = describe(t)
    if len(members) == 1:
        return _optional(members[0], conv, label)

    def structure(value: Any, _: Any) -> Any:
        if value is None:
            if nullable:
                return None
            raise LeafError(label, "null")
        for member in members:
            try:
                return conv.structure(value, member)
            except Exception:  # the next member may take it
                pass
        raise LeafError(label, value_kind(value))

    return structure


def _optional(member: Any, conv: BaseConverter, label: str) -> Hook:
    """``X | None``: ``None``, or what ``X``'s hook makes of the value. ``X``'s
    hook is looked up on first use, when every hook it may need exists."""
    hook: Hook | None = None

    def structure(value: Any, _: Any) -> Any:
        nonlocal hook
        if value is None:
            return None
        if hook is None:
            hook = conv.get_structure_hook(member)
        try:
            return hook(value, member)
        except LeafError as exc:
            raise LeafError(label, exc.got) from None

    return structure


def _is_enum(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, enum.Enum)


def _is_choices(t: Any) -> bool:
    return get_origin(t) is Literal or _is_enum(t)


def _choices_factory(t: Any, _: BaseConverter) -> Hook:
    if get_origin(t) is Literal:
        choices: list[tuple[Any, Any]] = [(arg, arg) for arg in get_args(t)]
    else:
        choices = [(member.value, member) for member in t]
    label = describe(t)

    def structure(value: Any, _: Any) -> Any:
        for raw, result in choices:
            if type(raw) is type(value) and raw == value:
                return result
        shown = (
            show(value) if isinstance(value, str | int | float) else value_kind(value)
        )
        raise LeafError(label, shown)

    return structure


def _is_sequence_type(t: Any) -> bool:
    origin: Any = get_origin(t)
    return is_sequence(t) or is_any_set(t) or origin is tuple


def _sequence_factory(t: Any, conv: BaseConverter) -> Hook:
    origin = get_origin(t) or t
    args = get_args(t)
    label = describe(t)
    if origin is tuple and args and args[-1] is not Ellipsis:
        return _fixed_tuple(t, conv, label)
    inner: Hook
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
            raise LeafError(label, value_kind(value))
        return inner(value, type_)

    return structure


def _fixed_tuple(t: Any, conv: BaseConverter, label: str) -> Hook:
    items = get_args(t)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, list | tuple) or len(value) != len(items):
            raise LeafError(label, value_kind(value))
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


def _mapping_factory(t: Any, conv: BaseConverter) -> Hook:
    inner = mapping_structure_factory(t, conv)
    label = describe(t)

    def structure(value: Any, type_: Any) -> Any:
        if not isinstance(value, Mapping):
            raise LeafError(label, value_kind(value))
        return inner(value, type_)

    return structure


def _any(value: Any, _: Any) -> Any:
    return value


def strict_converter() -> cattrs.Converter:
    """A new converter with the strict leaves and containers registered (detailed
    validation on, extra keys forbidden). Classes are the caller's to register:
    a class factory registered later takes precedence over these."""
    conv = cattrs.Converter(detailed_validation=True, forbid_extra_keys=True)
    conv.register_structure_hook(str, leaf(str, "a string"))
    conv.register_structure_hook(int, leaf(int, "an integer"))
    conv.register_structure_hook(float, leaf((int, float), "a number"))
    conv.register_structure_hook(bool, leaf(bool, "a boolean"))
    conv.register_structure_hook(Any, _any)
    conv.register_structure_hook_factory(is_mapping, _mapping_factory)
    conv.register_structure_hook_factory(_is_sequence_type, _sequence_factory)
    conv.register_structure_hook_factory(_is_choices, _choices_factory)
    conv.register_structure_hook_factory(_is_union, _union_factory)
    return conv


# --- the key-path flattener -------------------------------------------------------


def _note(exc: BaseException) -> object:
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, AttributeValidationNote | IterableValidationNote):
            return note
    return None


def problems(exc: BaseException, path: str, *, key_of: KeyOf) -> list[tuple[str, str]]:
    """Flatten a structuring failure under ``path`` into ``(key path, what is
    wrong)`` pairs, in the order found; ``key_of`` spells each field's key."""
    if isinstance(exc, StructureError):
        return [(join_key(path, key), detail) for key, detail in exc.problems]
    if isinstance(exc, ClassValidationError):
        found: list[tuple[str, str]] = []
        for sub in exc.exceptions:
            note = _note(sub)
            if isinstance(note, AttributeValidationNote):
                sub_path = join_key(path, key_of(exc.cl, note.name))
                if isinstance(sub, KeyError):
                    found.append(
                        (sub_path, f"is required (expected {describe(note.type)})")
                    )
                else:
                    found.extend(problems(sub, sub_path, key_of=key_of))
            elif isinstance(sub, ForbiddenExtraKeysError):
                found.extend(_unknown_keys(sub, path, key_of))
            elif isinstance(sub, KeyProblem | LeafError):
                found.extend(problems(sub, path, key_of=key_of))
            else:
                found.extend(_construction_problems(sub, exc.cl, path, key_of))
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
                found.extend(problems(sub, sub_path, key_of=key_of))
            else:
                found.extend(problems(sub, path, key_of=key_of))
        return found
    if isinstance(exc, KeyProblem):
        return [(join_key(path, exc.key), exc.detail)]
    if isinstance(exc, LeafError):
        return [(path, str(exc))]
    if isinstance(exc, TypeError | ValueError):
        return [(path, f"is invalid: {exc}")]
    return [(path, f"could not be read: {type(exc).__name__}: {exc}")]


def _unknown_keys(
    exc: ForbiddenExtraKeysError, path: str, key_of: KeyOf
) -> list[tuple[str, str]]:
    cls = exc.cl
    known = (
        [key_of(cls, field.name) for field in attrs.fields(cls) if field.init]
        if isinstance(cls, type) and attrs.has(cls)
        else []
    )
    return [
        (join_key(path, key), unknown_key_detail(key, known))
        for key in sorted(exc.extra_fields)
    ]


def _construction_problems(
    exc: BaseException, cls: Any, path: str, key_of: KeyOf
) -> list[tuple[str, str]]:
    """Attribute an exception raised by ``cls(...)`` (a validator or
    ``__attrs_post_init__``) to the field it is about, when it says which."""
    if isinstance(exc, StructureError):
        return [
            (join_key(path, key_of(cls, key)), detail) for key, detail in exc.problems
        ]
    if isinstance(exc, FieldError):
        return [(join_key(path, key_of(cls, exc.field)), exc.detail)]
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
        return [(path, f"is invalid: {text}")]
    key = key_of(cls, attribute)
    text = re.sub(rf"""['"`]{re.escape(attribute)}['"`]""", f'"{key}"', text)
    return [(join_key(path, key), f"is invalid: {text}")]
