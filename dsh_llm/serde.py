"""JSON for the protocol values, identical to what the TypeScript harness writes.

One cattrs converter (``converter``) owns the mapping, built on ``dsh_llm.converter``
(the strict leaves, the wording and the key-path flattener shared with
``dsh_llm.config``); this module adds the camelCase keys, the omitted optionals and
the tagged unions. Contracts callers may rely on:

- Keys are the TypeScript camelCase names (``blockType``, ``argumentsDelta``,
  ``inputTokens``, ``providerRetryAfterMs``); chunks and blocks carry a ``type``
  tag first, sources and finish reasons a ``kind`` tag.
- Absent optional fields are omitted, never ``null``; so are empty
  ``citations`` and ``sources`` lists. The one exception is token counts:
  ``inputTokens``/``outputTokens`` are always present and ``null`` when the
  provider did not report them (rule 7 of ``docs/protocol.md``).
- ``*_to_dict`` returns fresh plain dicts and lists (JSON-ready); ``*_from_dict``
  is strict: an unknown tag, a wrong type, a missing field or an unknown key raises
  ``LlmError`` with code ``INVALID_CHUNK`` (``INVALID_MESSAGE`` for messages) whose
  message names the offending key path and what is wrong in the wording of
  ``dsh_llm.converter``, e.g. ``$.block.text: must be a string, got an integer``.
  Nothing else leaks out (no ``KeyError``, no cattrs exception).
- JSON text is compact and keeps non-ASCII characters, like ``JSON.stringify``.
- JSON given as bytes is UTF-8, decoded strictly: bytes that are not UTF-8
  (UTF-16 and UTF-32 included, which ``json.loads`` would guess) raise
  ``INVALID_CHUNK`` saying so. A UTF-8 byte order mark is skipped at the start of
  ``chunk_from_json``'s bytes and of a JSON Lines file's first line only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from typing import IO
from typing import Any
from typing import Final
from typing import TypeVar

import attrs
from cattrs.errors import ClassValidationError
from cattrs.errors import IterableValidationError
from cattrs.gen import make_dict_structure_fn
from cattrs.gen import make_dict_unstructure_fn
from cattrs.gen import override

from dsh_llm.converter import KeyProblem
from dsh_llm.converter import LeafError
from dsh_llm.converter import problems
from dsh_llm.converter import show
from dsh_llm.converter import strict_converter
from dsh_llm.converter import value_kind
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BLOCK_TYPES
from dsh_llm.protocol import CHUNK_TYPES
from dsh_llm.protocol import SOURCE_TYPES
from dsh_llm.protocol import CacheBreakpoint
from dsh_llm.protocol import Citation
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageDimensions
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import MessageSource
from dsh_llm.protocol import RateLimit
from dsh_llm.protocol import RateLimits
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import Source
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol.content import OMIT_EMPTY

__all__ = [
    "InvalidValueError",
    "camel_key",
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

converter: Final = strict_converter()
"""The one converter between protocol values and TypeScript-shaped JSON dicts
(``dsh_llm.converter``'s strict leaves and containers, plus the value classes)."""

_CAMEL = re.compile(r"_([a-z])")


def camel_key(name: str) -> str:
    """The JSON key of the snake_case field ``name``: its camelCase spelling
    (``block_type`` -> ``blockType``), as every protocol value is written."""
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


def _key_of(_: Any, attribute: str) -> str:
    return camel_key(attribute)


converter.register_unstructure_hook_func(
    lambda t: isinstance(t, type) and issubclass(t, tuple),
    lambda value: [converter.unstructure(item) for item in value],
)


# --- classes: camelCase keys, omitted optionals, tags ----------------------------
#
# The hooks of each value class are generated on its first use, not at import:
# generating them compiles code, which every ``import dsh_llm`` would pay.


def _register_union(union: Any, tag_key: str, classes: dict[str, type]) -> None:
    known = "one of " + ", ".join(show(tag) for tag in classes)
    hooks: dict[str, Callable[[Any, Any], Any]] = {}

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise LeafError("a mapping", value_kind(value))
        if tag_key not in value:
            raise KeyProblem(tag_key, f"is required (expected {known})")
        tag = value[tag_key]
        cls = classes.get(tag) if isinstance(tag, str) else None
        if cls is None:
            shown = show(tag) if isinstance(tag, str | int | float) else value_kind(tag)
            raise KeyProblem(tag_key, f"must be {known}, got {shown}")
        hook = hooks.get(tag)
        if hook is None:
            hook = hooks[tag] = converter.get_structure_hook(cls)
        return hook({k: v for k, v in value.items() if k != tag_key}, cls)

    converter.register_structure_hook_func(lambda t: t == union, structure)
    converter.register_unstructure_hook_func(
        lambda t: t == union, lambda value: converter.unstructure(value, type(value))
    )


_TAGS: Final[dict[type, tuple[str, str] | None]] = dict.fromkeys(
    (
        ImageDimensions,
        ImageRef,
        Citation,
        Source,
        RateLimit,
        RateLimits,
        LlmFailure,
        FinishReason,
        TokenUsage,
        ReplayEnvelope,
        CacheBreakpoint,
        Message,
        ToolSchema,
        ResponseFormat,
        GenerateOptions,
    )
)
"""Every value class, with its ``(tag key, tag)`` when its JSON object is tagged."""

for _union, _tag_key, _classes in (
    (ContentBlock, "type", BLOCK_TYPES),
    (MessageSource, "kind", SOURCE_TYPES),
    (StreamChunk, "type", CHUNK_TYPES),
):
    _register_union(_union, _tag_key, dict(_classes))
    for _tag, _cls in _classes.items():
        _TAGS[_cls] = (_tag_key, _tag)


def _is_value_class(t: Any) -> bool:
    return isinstance(t, type) and t in _TAGS


def _overrides(cls: type) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for field in attrs.fields(cls):
        camel = camel_key(field.name)
        if not field.eq:
            # Not compared, not serialised (GenerateOptions.signal).
            overrides[field.name] = override(omit=True)
            continue
        # None optionals are omitted, and so are the tuples marked to be
        # omitted while empty (TextBlock.citations): older JSON stays identical.
        omit = field.default is None or bool(field.metadata.get(OMIT_EMPTY))
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
        camel_key(field.name) for field in attrs.fields(cls)
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
            raise LeafError("a mapping", value_kind(value))
        return structure(value, type_)

    return structure_object


converter.register_unstructure_hook_factory(_is_value_class, _unstructure_factory)
converter.register_structure_hook_factory(_is_value_class, _structure_factory)


# --- error reporting --------------------------------------------------------------


class InvalidValueError(LlmError):
    """What a ``*_from_dict`` reader raises: an ``LlmError`` (``INVALID_CHUNK``,
    ``INVALID_MESSAGE``, ``INVALID_OPTIONS``) that also carries every problem as
    data, so a caller naming the key in its own words never parses the message.

    Args:
        message: The message (it names the first problem).
        code: The code.
        problems: Each ``(key path from "$", what is wrong)``, at least one.
        cause: The structuring failure.
    """

    def __init__(
        self,
        message: str,
        code: str,
        problems: Iterable[tuple[str, str]],
        *,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, code, cause=cause)
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        """Each problem: its key path (``$.content[0].text``) and what is wrong
        there (``must be a string, got an integer``)."""


def _unstructure(
    value: Any, cls: Any, kinds: type | tuple[type, ...], expects: str
) -> dict[str, Any]:
    """``value``'s dict as ``cls``; a ``TypeError`` saying what the caller
    ``expects`` for a value that is not one of ``kinds``."""
    if not isinstance(value, kinds):
        raise TypeError(f"{expects}, got {type(value).__name__}")
    result: dict[str, Any] = converter.unstructure(value, cls)
    return result


def _structure(value: Any, cls: Any, code: ErrorCode, what: str) -> Any:
    if not isinstance(value, dict):
        detail = f"must be a mapping, got {value_kind(value)}"
        raise InvalidValueError(f"invalid {what}: $ {detail}", code, [("$", detail)])
    try:
        return converter.structure(value, cls)
    except (
        ClassValidationError,
        IterableValidationError,
        KeyProblem,
        TypeError,
        ValueError,
    ) as exc:
        found = problems(exc, "$", key_of=_key_of) or [("$", "is invalid")]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        path, detail = found[0]
        raise InvalidValueError(
            f"invalid {what}: {path}: {detail}{more}", code, found, cause=exc
        ) from exc


# --- public API ---------------------------------------------------------------------


_CHUNK_CLASSES: Final = tuple(CHUNK_TYPES.values())


def chunk_to_dict(chunk: StreamChunk) -> dict[str, Any]:
    """The TypeScript-shaped dict for ``chunk`` (fresh plain dicts and lists).

    Raises:
        TypeError: when ``chunk`` is not one of the seven chunk classes.
    """
    return _unstructure(
        chunk, StreamChunk, _CHUNK_CLASSES, "chunk_to_dict expects a StreamChunk"
    )


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
    return _unstructure(message, Message, Message, "message_to_dict expects a Message")


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
    return _unstructure(
        options,
        GenerateOptions,
        GenerateOptions,
        "options_to_dict expects GenerateOptions",
    )


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
