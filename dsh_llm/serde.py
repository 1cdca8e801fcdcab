"""JSON for the protocol values, identical to what the TypeScript harness writes.

One cattrs converter (``converter``) owns the mapping. Contracts callers may rely on:

- Keys are the TypeScript camelCase names (``blockType``, ``argumentsDelta``,
  ``inputTokens``, ``providerRetryAfterMs``); chunks and blocks carry a ``type``
  tag first, sources and finish reasons a ``kind`` tag.
- Absent optional fields are omitted, never ``null``. The one exception is token
  counts: ``inputTokens``/``outputTokens`` are always present and ``null`` when the
  provider did not report them (rule 7 of ``docs/protocol.md``).
- ``*_to_dict`` returns fresh plain dicts and lists (JSON-ready); ``*_from_dict``
  is strict: an unknown tag, a wrong type, a missing field or an unknown key raises
  ``LlmError`` with code ``INVALID_CHUNK`` (``INVALID_MESSAGE`` for messages) whose
  message names the offending key path, e.g. ``$.block.text``. Nothing else leaks
  out (no ``KeyError``, no cattrs exception).
- JSON text is compact and keeps non-ASCII characters, like ``JSON.stringify``.
- JSON given as bytes is UTF-8, decoded strictly: bytes that are not UTF-8
  (UTF-16 and UTF-32 included, which ``json.loads`` would guess) raise
  ``INVALID_CHUNK`` saying so. A UTF-8 byte order mark is skipped at the start of
  ``chunk_from_json``'s bytes and of a JSON Lines file's first line only.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Final, TypeVar, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import (
    BLOCK_TYPES,
    CHUNK_TYPES,
    SOURCE_TYPES,
    ContentBlock,
    FinishReason,
    GenerateOptions,
    ImageDimensions,
    ImageRef,
    LlmFailure,
    Message,
    MessageSource,
    ReplayEnvelope,
    ResponseFormat,
    StreamChunk,
    TokenUsage,
    ToolSchema,
)
from dsh_llm.protocol.checks import FieldError

__all__ = [
    "chunk_from_dict",
    "chunk_from_json",
    "chunk_to_dict",
    "chunk_to_json",
    "chunks_from_jsonl",
    "chunks_to_jsonl",
    "compact_json",
    "converter",
    "message_from_dict",
    "message_to_dict",
    "options_from_dict",
    "options_to_dict",
    "read_jsonl",
    "write_jsonl",
]

T = TypeVar("T")

converter: Final = cattrs.Converter(detailed_validation=True, forbid_extra_keys=True)
"""The one converter between protocol values and TypeScript-shaped JSON dicts."""

_CAMEL = re.compile(r"_([a-z])")


def _camel(name: str) -> str:
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


# --- strict leaves: JSON gives exactly these types, nothing is coerced ---------


class _LeafError(TypeError):
    """A JSON value of the wrong type, found while structuring."""


def _strict(expected: type | tuple[type, ...], label: str) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and bool not in _as_tuple(expected):
            raise _LeafError(f"must be {label}, got bool")
        if not isinstance(value, expected):
            raise _LeafError(f"must be {label}, got {_json_kind(value)}")
        return value

    return structure


def _as_tuple(expected: type | tuple[type, ...]) -> tuple[type, ...]:
    return expected if isinstance(expected, tuple) else (expected,)


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


converter.register_structure_hook(str, _strict(str, "a string"))
converter.register_structure_hook(int, _strict(int, "an integer"))
converter.register_structure_hook(bool, _strict(bool, "a boolean"))
converter.register_structure_hook(float, _strict((int, float), "a number"))
converter.register_structure_hook(Any, lambda value, _: value)


def _is_homogeneous_tuple(t: Any) -> bool:
    args = get_args(t)
    return get_origin(t) is tuple and len(args) == 2 and args[1] is Ellipsis


def _tuple_factory(t: Any, conv: Any) -> Callable[[Any, Any], Any]:
    inner = homogenous_tuple_structure_factory(t, conv)

    def structure(value: Any, type_: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise _LeafError(f"must be an array, got {_json_kind(value)}")
        return inner(value, type_)

    return structure


converter.register_structure_hook_factory(_is_homogeneous_tuple, _tuple_factory)
converter.register_unstructure_hook_func(
    lambda t: isinstance(t, type) and issubclass(t, tuple),
    lambda value: [converter.unstructure(item) for item in value],
)


def _optional_of(t: Any) -> Any:
    """``X`` for ``X | None`` (``None`` otherwise)."""
    if get_origin(t) in (Union, types.UnionType):
        args = [a for a in get_args(t) if a is not type(None)]
        if len(args) == 1 and len(get_args(t)) == 2:
            return args[0]
    return None


def _optional_factory(t: Any, conv: Any) -> Callable[[Any, Any], Any]:
    inner_type = _optional_of(t)

    def structure(value: Any, _: Any) -> Any:
        return None if value is None else conv.structure(value, inner_type)

    return structure


converter.register_structure_hook_factory(
    lambda t: _optional_of(t) is not None, _optional_factory
)


# --- classes: camelCase keys, omitted optionals, tags ----------------------------
#
# The hooks of each value class are generated on its first use, not at import:
# generating them compiles code, which every ``import dsh_llm`` would pay.


class _TagError(TypeError):
    """A tagged object without a known tag; ``key`` is the tag's key."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(detail)
        self.key = key


def _register_union(
    union: Any, tag_key: str, classes: dict[str, type], what: str
) -> None:
    known = ", ".join(repr(t) for t in classes)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise _LeafError(f"must be a {what} object, got {_json_kind(value)}")
        if tag_key not in value:
            raise _TagError(tag_key, f"is missing (expected one of {known})")
        tag = value[tag_key]
        cls = classes.get(tag) if isinstance(tag, str) else None
        if cls is None:
            raise _TagError(
                tag_key, f"{tag!r} is not a known {what} type (one of {known})"
            )
        body = {k: v for k, v in value.items() if k != tag_key}
        return converter.structure(body, cls)

    converter.register_structure_hook_func(lambda t: t == union, structure)
    converter.register_unstructure_hook_func(
        lambda t: t == union, lambda value: converter.unstructure(value, type(value))
    )


_TAGS: Final[dict[type, tuple[str, str] | None]] = dict.fromkeys(
    (
        ImageDimensions,
        ImageRef,
        LlmFailure,
        FinishReason,
        TokenUsage,
        ReplayEnvelope,
        Message,
        ToolSchema,
        ResponseFormat,
        GenerateOptions,
    )
)
"""Every value class, with its ``(tag key, tag)`` when its JSON object is tagged."""

for _union, _tag_key, _classes, _what in (
    (ContentBlock, "type", BLOCK_TYPES, "content block"),
    (MessageSource, "kind", SOURCE_TYPES, "message source"),
    (StreamChunk, "type", CHUNK_TYPES, "chunk"),
):
    _register_union(_union, _tag_key, dict(_classes), _what)
    for _tag, _cls in _classes.items():
        _TAGS[_cls] = (_tag_key, _tag)


def _is_value_class(t: Any) -> bool:
    return isinstance(t, type) and t in _TAGS


def _overrides(cls: type) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for field in attrs.fields(cls):
        camel = _camel(field.name)
        if not field.eq:
            # Not compared, not serialised (GenerateOptions.signal).
            overrides[field.name] = override(omit=True)
            continue
        omit = field.default is None
        if camel != field.name or omit:
            overrides[field.name] = override(
                rename=camel if camel != field.name else None,
                omit_if_default=omit,
            )
    return overrides


def _unstructure_factory(cls: type, _: Any) -> Callable[[Any], dict[str, Any]]:
    unstructure: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(
        cls, converter, **_overrides(cls)
    )
    tagged = _TAGS[cls]
    # cattrs moves omittable keys to the end; the TypeScript objects keep
    # declaration order, so restore it (tag first).
    keys = ([] if tagged is None else [tagged[0]]) + [
        _camel(field.name) for field in attrs.fields(cls)
    ]

    def ordered(value: Any) -> dict[str, Any]:
        raw = unstructure(value)
        if tagged is not None:
            raw[tagged[0]] = tagged[1]
        return {key: raw[key] for key in keys if key in raw}

    return ordered


def _structure_factory(cls: type, _: Any) -> Callable[[Any, Any], Any]:
    structure: Callable[[Any, Any], Any] = make_dict_structure_fn(
        cls, converter, _cattrs_forbid_extra_keys=True, **_overrides(cls)
    )

    def structure_object(value: Any, type_: Any) -> Any:
        # The generated function assumes a mapping; anything else would surface
        # as an AttributeError about ``keys`` instead of naming the JSON type.
        if not isinstance(value, dict):
            raise _LeafError(f"must be an object, got {_json_kind(value)}")
        return structure(value, type_)

    return structure_object


converter.register_unstructure_hook_factory(_is_value_class, _unstructure_factory)
converter.register_structure_hook_factory(_is_value_class, _structure_factory)


# --- error reporting --------------------------------------------------------------


def _problems(exc: BaseException, path: str) -> list[str]:
    """Flatten a cattrs validation tree into ``"<path>: <what>"`` lines."""
    if isinstance(exc, ClassValidationError | IterableValidationError):
        found: list[str] = []
        for sub in exc.exceptions:
            notes = getattr(sub, "__notes__", [])
            note = next(
                (
                    n
                    for n in notes
                    if isinstance(n, AttributeValidationNote | IterableValidationNote)
                ),
                None,
            )
            if isinstance(note, AttributeValidationNote):
                found.extend(_problems(sub, f"{path}.{_camel(note.name)}"))
            elif isinstance(note, IterableValidationNote):
                found.extend(_problems(sub, f"{path}[{note.index}]"))
            else:
                found.extend(_problems(sub, path))
        return found
    if isinstance(exc, KeyError):
        return [f"{path}: required key is missing"]
    if isinstance(exc, _TagError):
        return [f"{path}.{exc.key}: {exc}"]
    if isinstance(exc, FieldError):
        return [f"{path}.{_camel(exc.field)}: {exc.detail}"]
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        keys = ", ".join(sorted(exc.extra_fields))
        return [f"{path}: unknown key(s) {keys}"]
    if isinstance(exc, _LeafError | TypeError | ValueError):
        return [f"{path}: {exc}"]
    return [f"{path}: {type(exc).__name__}: {exc}"]


def _structure(value: Any, cls: Any, code: ErrorCode, what: str) -> Any:
    if not isinstance(value, dict):
        raise LlmError(
            f"invalid {what}: $ must be an object, got {_json_kind(value)}", code
        )
    try:
        return converter.structure(value, cls)
    except (
        ClassValidationError,
        IterableValidationError,
        TypeError,
        ValueError,
    ) as exc:
        problems = _problems(exc, "$") or ["$: invalid value"]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise LlmError(f"invalid {what}: {problems[0]}{more}", code, cause=exc) from exc


# --- public API ---------------------------------------------------------------------


_CHUNK_CLASSES: Final = tuple(CHUNK_TYPES.values())


def chunk_to_dict(chunk: StreamChunk) -> dict[str, Any]:
    """The TypeScript-shaped dict for ``chunk`` (fresh plain dicts and lists).

    Raises:
        TypeError: when ``chunk`` is not one of the seven chunk classes.
    """
    if not isinstance(chunk, _CHUNK_CLASSES):
        raise TypeError(
            f"chunk_to_dict expects a StreamChunk, got {type(chunk).__name__}"
        )
    result: dict[str, Any] = converter.unstructure(chunk, StreamChunk)
    return result


def chunk_from_dict(data: Any) -> StreamChunk:
    """Read one chunk from its TypeScript-shaped dict.

    Raises:
        LlmError: code ``INVALID_CHUNK`` naming the offending key path.
    """
    chunk: StreamChunk = _structure(data, StreamChunk, ErrorCode.INVALID_CHUNK, "chunk")
    return chunk


def message_to_dict(message: Message) -> dict[str, Any]:
    """The TypeScript-shaped dict for ``message``.

    Raises:
        TypeError: when ``message`` is not a ``Message``.
    """
    if not isinstance(message, Message):
        raise TypeError(
            f"message_to_dict expects a Message, got {type(message).__name__}"
        )
    result: dict[str, Any] = converter.unstructure(message, Message)
    return result


def message_from_dict(data: Any) -> Message:
    """Read one message from its TypeScript-shaped dict.

    Raises:
        LlmError: code ``INVALID_MESSAGE`` naming the offending key path.
    """
    message: Message = _structure(data, Message, ErrorCode.INVALID_MESSAGE, "message")
    return message


def options_to_dict(options: GenerateOptions) -> dict[str, Any]:
    """The camelCase dict for a request (``toolChoice``, ``responseFormat``,
    ``extraBody``...); ``signal`` is left out and unset optionals omitted.

    Raises:
        TypeError: when ``options`` is not a ``GenerateOptions``.
    """
    if not isinstance(options, GenerateOptions):
        raise TypeError(
            f"options_to_dict expects GenerateOptions, got {type(options).__name__}"
        )
    result: dict[str, Any] = converter.unstructure(options, GenerateOptions)
    return result


def options_from_dict(data: Any) -> GenerateOptions:
    """Read a request written by ``options_to_dict`` (without a signal).

    Raises:
        LlmError: code ``INVALID_OPTIONS`` naming the offending key path.
    """
    options: GenerateOptions = _structure(
        data, GenerateOptions, ErrorCode.INVALID_OPTIONS, "options"
    )
    return options


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def compact_json(value: Any, *, ensure_ascii: bool = False) -> str:
    """``value`` as compact JSON text, the way ``JSON.stringify`` writes it.

    Non-ASCII characters are kept as they are, unless ``ensure_ascii`` (for an
    output that cannot hold them) escapes them all. A lone surrogate (half of a
    split pair, which a decoded ``\\ud83d`` escape gives) is written as its
    ``\\uXXXX`` escape, so the text always encodes to UTF-8 and reads back to
    the same value; the one exception is JSON's own rule that a high and a low
    half written next to each other read back as the character they encode.

    Raises:
        ValueError: for ``NaN`` or an infinity (JSON has no such numbers).
        TypeError: for a value JSON cannot hold.
    """
    text = json.dumps(
        value, ensure_ascii=ensure_ascii, separators=(",", ":"), allow_nan=False
    )
    if ensure_ascii:
        return text
    # A decoded str holds a surrogate code point only when it was lone.
    return _LONE_SURROGATE.sub(_escape_surrogate, text)


def chunk_to_json(chunk: StreamChunk) -> str:
    """``chunk`` as one line of compact JSON (non-ASCII kept, no newline)."""
    return compact_json(chunk_to_dict(chunk))


_UTF8_BOM: Final = b"\xef\xbb\xbf"

_OTHER_BOMS: Final = (
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\xfe\xff", "UTF-16"),
    (b"\xff\xfe", "UTF-16"),
)


def _utf8_text(data: bytes | bytearray) -> str:
    """``data`` decoded as UTF-8, strictly: ``json.loads`` would guess UTF-16 or
    UTF-32 from the first bytes and report a confusing error in that encoding."""
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        hint = next(
            (
                f"; it starts with a {name} byte order mark"
                for bom, name in _OTHER_BOMS
                if data.startswith(bom)
            ),
            "",
        )
        raise LlmError(
            f"invalid chunk: not UTF-8 text (byte 0x{data[exc.start]:02x} at "
            f"offset {exc.start}: {exc.reason}{hint})",
            ErrorCode.INVALID_CHUNK,
        ) from exc


def chunk_from_json(text: str | bytes) -> StreamChunk:
    """Read one chunk from JSON text.

    Bytes are decoded as UTF-8, strictly (a leading UTF-8 byte order mark is
    skipped); UTF-16 and UTF-32 are refused, never guessed.

    Raises:
        LlmError: code ``INVALID_CHUNK`` when the text is not UTF-8, not JSON or
            not a chunk.
    """
    if isinstance(text, bytes | bytearray):
        text = _utf8_text(text.removeprefix(_UTF8_BOM))
    try:
        data = json.loads(text)
    except ValueError as exc:
        # Raw NULs never occur in JSON text; UTF-16/32 without a byte order mark
        # is valid UTF-8 full of them, so say what the bytes most likely are.
        hint = (
            "; it holds NUL characters, as UTF-16 or UTF-32 text does, not UTF-8"
            if "\x00" in text
            else ""
        )
        raise LlmError(
            f"invalid chunk: not JSON ({exc}{hint})", ErrorCode.INVALID_CHUNK
        ) from exc
    except RecursionError as exc:
        raise LlmError(
            "invalid chunk: JSON nested too deeply", ErrorCode.INVALID_CHUNK
        ) from exc
    return chunk_from_dict(data)


def chunks_to_jsonl(chunks: Iterable[StreamChunk]) -> Iterator[str]:
    """Yield each chunk as one JSON Lines line, newline included (lazy)."""
    for chunk in chunks:
        yield chunk_to_json(chunk) + "\n"


def write_jsonl(chunks: Iterable[StreamChunk], out: IO[str]) -> int:
    """Write ``chunks`` to ``out`` as JSON Lines, one per line, as they come.

    Returns the number of chunks written. Flushes after each line so a reader
    tailing the file sees chunks live.
    """
    count = 0
    for line in chunks_to_jsonl(chunks):
        out.write(line)
        out.flush()
        count += 1
    return count


def chunks_from_jsonl(lines: Iterable[str | bytes]) -> Iterator[StreamChunk]:
    """Lazily read chunks from JSON Lines (any iterable of lines, e.g. a file).

    Byte lines are decoded as UTF-8, strictly; a UTF-8 byte order mark is skipped
    at the start of the first line only. Blank lines are skipped. A bad line
    (not UTF-8, not JSON, not a chunk) raises ``LlmError`` (``INVALID_CHUNK``)
    whose message starts with ``line <n>:`` (1-based).
    """
    for number, line in enumerate(lines, start=1):
        try:
            chunk = _line_chunk(line, first=number == 1)
        except LlmError as exc:
            raise LlmError(
                f"line {number}: {exc.message}", exc.code, cause=exc.__cause__
            ) from exc.__cause__
        if chunk is not None:
            yield chunk


def _line_chunk(line: str | bytes, *, first: bool) -> StreamChunk | None:
    """The chunk on one JSON Lines line, ``None`` for a blank line."""
    if isinstance(line, bytes | bytearray):
        line = _utf8_text(line.removeprefix(_UTF8_BOM) if first else line)
    elif first:
        line = line.removeprefix("\ufeff")
    if not line.strip():
        return None
    return chunk_from_json(line)


def read_jsonl(path: str) -> Iterator[StreamChunk]:
    """Lazily read the chunks of a JSON Lines file at ``path`` (UTF-8; a byte
    order mark at the start is skipped).

    Raises:
        LlmError: ``INVALID_CHUNK`` for a bad line or bytes that are not UTF-8.
        OSError: when the file cannot be opened.
    """
    with open(path, "rb") as handle:
        yield from chunks_from_jsonl(handle)
