"""What every wire translator shares when it turns provider values into chunks.

Pure, no I/O:

- ``wire_count``: a provider's token count, or ``None`` when it is not one
  (not an ``int``, a ``bool``, negative, or above ``MAX_SAFE_INTEGER``, which
  JSON readers elsewhere cannot hold exactly): a count never invented as 0.
  ``wire_text``: a provider's ``str``, or ``None`` when it is not one.
- ``citation_from``: a ``Citation`` read from a wire object by a table of each
  field's wire key (a value of the wrong type is left out, never guessed).
- ``unchecked_delta`` and ``unchecked_tool_delta``: deltas built without
  re-running the field validators, for the per-token hot path of a writer that
  guarantees what they check (its own non-negative block index, ``str`` values
  it type-checked); frozen attrs classes are filled the same way by their
  generated ``__init__``.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.protocol import CallId
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.protocol.citations import Citation


def wire_count(value: object) -> int | None:
    """``value`` when it is an ``int`` in ``0..MAX_SAFE_INTEGER``, else ``None``."""
    return value if type(value) is int and 0 <= value <= MAX_SAFE_INTEGER else None


def wire_text(value: object) -> str | None:
    """``value`` when it is a ``str`` (``""`` included), else ``None``."""
    return value if type(value) is str else None


_CITATION_COUNTS: Final = frozenset(
    {"source_index", "start", "end", "text_start", "text_end"}
)
"""The ``Citation`` fields that hold a count (the others hold text)."""


def citation_from(
    kind: str, wire: Mapping[str, Any], keys: Mapping[str, str], **known: Any
) -> Citation:
    """A ``Citation`` of ``kind``: each field ``keys`` names read from ``wire`` at
    its key (an index field through ``wire_count``, a text one through
    ``wire_text``), then the fields the caller read itself (``known``)."""
    read: dict[str, Any] = {
        field: (wire_count if field in _CITATION_COUNTS else wire_text)(wire.get(key))
        for field, key in keys.items()
    }
    return Citation(kind=kind, **read, **known)


_new = object.__new__
_set = object.__setattr__


def _setter(cls: type, name: str) -> Callable[[object, object], None]:
    # A slot's own descriptor: setting through it skips the name lookup of
    # ``object.__setattr__`` (the per-token path builds millions of deltas).
    setter: Callable[[object, object], None] = getattr(cls, name).__set__
    return setter


_TEXT_INDEX: Final = _setter(TextDelta, "index")
_TEXT_TEXT: Final = _setter(TextDelta, "text")
_TEXT_CITATIONS: Final = _setter(TextDelta, "citations")
_REASONING_INDEX: Final = _setter(ReasoningDelta, "index")
_REASONING_TEXT: Final = _setter(ReasoningDelta, "text")
_NO_CITATIONS: Final[tuple[Citation, ...]] = ()


def unchecked_delta(
    cls: type[TextDelta] | type[ReasoningDelta], index: int, text: str
) -> TextDelta | ReasoningDelta:
    """``cls(index=index, text=text)`` without the validators (see the module
    docstring: only for an index and a text the caller already guarantees)."""
    if cls is TextDelta:
        return unchecked_text_delta(index, text, _NO_CITATIONS)
    chunk: ReasoningDelta = _new(ReasoningDelta)
    _REASONING_INDEX(chunk, index)
    _REASONING_TEXT(chunk, text)
    return chunk


def unchecked_text_delta(
    index: int, text: str, citations: tuple[Citation, ...] = _NO_CITATIONS
) -> TextDelta:
    """``TextDelta(index=..., text=..., citations=...)`` without the validators
    (only for values the caller already guarantees: a tuple of ``Citation``)."""
    chunk: TextDelta = _new(TextDelta)
    _TEXT_INDEX(chunk, index)
    _TEXT_TEXT(chunk, text)
    _TEXT_CITATIONS(chunk, citations)
    return chunk


def unchecked_tool_delta(
    index: int, call_id: str, name: str, arguments: str
) -> ToolCallDelta:
    """``ToolCallDelta(index=..., id=..., name=..., arguments_delta=...)`` without
    the validators (only for values the caller already guarantees); an empty
    ``name`` (not known yet) is ``None``."""
    chunk: ToolCallDelta = _new(ToolCallDelta)
    _set(chunk, "index", index)
    _set(chunk, "id", CallId(call_id))
    _set(chunk, "name", name or None)
    _set(chunk, "arguments_delta", arguments)
    return chunk
