"""Gemini's grounding and its server-side tool parts as protocol values.

Pure functions (no I/O) the translator (``translate``) and the request builder
(``request``) share. Contracts callers may rely on:

- ``GroundingState`` reads ``groundingMetadata`` and ``urlContextMetadata`` as
  they arrive (a chunk may repeat them: Vertex AI sends the metadata on more
  than one chunk): ``new_citations`` gives each ``groundingSupports`` entry's
  citations once (kind ``grounding``, one per support and chunk index: the
  chunk's URL and title, ``cited_text`` the segment's text, ``source_index``
  the chunk index, ``text_start``/``text_end`` the segment converted from UTF-8
  bytes of the answer's text to code points of the block it falls in, checked
  against the segment's text); ``server_blocks`` gives, once the answer ended,
  the search the provider ran (``google_search``, or ``retrieval`` for a
  retrieval tool, input ``{"queries": [...]}``) and its result (the grounding
  chunks as ``Source`` values, the merged metadata as ``data``), and the URL
  context retrieval (``url_context``, input ``{"urls": [...]}``).
- ``code_call`` and ``code_result``: an ``executableCode`` part as a
  ``ServerToolCallBlock`` (``code_execution``, the ``executableCode`` object as
  input) and a ``codeExecutionResult`` part as its ``ServerToolResultBlock``
  (``output`` its output, ``is_error`` unless the outcome is ``OUTCOME_OK``),
  each with the part as received (signature included) as ``data``.
- ``replayed_part``: the part a server block goes back as, only for one a
  Gemini answer made (``data`` holding an ``executableCode`` or
  ``codeExecutionResult``); the search blocks and any other provider's blocks
  are left out of the request (Gemini takes no grounding back).
- A field of the wrong type in the metadata is ``ValueError`` (the translator
  reports it as ``MALFORMED_RESPONSE``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import Final

from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import Source
from dsh_llm.serde import compact_json

CODE_EXECUTION: Final = "code_execution"
"""The name of Gemini's code execution tool on a server block."""
GOOGLE_SEARCH: Final = "google_search"
"""The name of the Google Search grounding tool on a server block."""
RETRIEVAL: Final = "retrieval"
"""The name of a retrieval grounding tool (Vertex AI Search, RAG, file search)."""
URL_CONTEXT: Final = "url_context"
"""The name of the URL context tool on a server block."""
SERVER_PART_KEYS: Final = ("executableCode", "codeExecutionResult")
"""The keys of the parts a server block goes back as."""
_URL_OK: Final = "URL_RETRIEVAL_STATUS_SUCCESS"
_CHUNK_KINDS: Final = ("web", "retrievedContext", "maps")


def _str(value: object, what: str) -> str | None:
    if value is None:
        return None
    if type(value) is not str:
        raise ValueError(f"a {what} that is not a string")
    return value


def _index(value: object, what: str) -> int:
    if value is None:
        return 0  # proto3 JSON leaves a 0 out
    if type(value) is not int or value < 0:
        raise ValueError(f"a {what} that is not a non-negative integer")
    return value


def _list(value: object, what: str) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list:
        raise ValueError(f"a {what} that is not a list")
    return value


def _object(value: object, what: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise ValueError(f"a {what} that is not an object")
    return value


def _chunk_source(chunk: object) -> tuple[dict[str, Any], str]:
    """A grounding chunk's inner object and its kind (``web``...)."""
    chunk = _object(chunk, "grounding chunk")
    for kind in _CHUNK_KINDS:
        inner = chunk.get(kind)
        if inner is not None:
            return _object(inner, f"{kind} grounding chunk"), kind
    return {}, ""


def _source(chunk: object) -> Source:
    inner, _ = _chunk_source(chunk)
    return Source(
        url=_str(inner.get("uri"), "grounding chunk uri"),
        title=_str(inner.get("title"), "grounding chunk title"),
        snippet=_str(inner.get("text"), "grounding chunk text"),
    )


def _code_points(encoded: bytes, at: int) -> int:
    """The code points of ``encoded[:at]`` (a cut inside a character counts the
    character as not reached)."""
    for back in range(4):
        try:
            return len(encoded[: at - back].decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            continue
    return len(encoded[:at].decode("utf-8", "ignore"))


def _text_range(
    text: str, base: int, start: int, end: int, cited: str | None
) -> tuple[int | None, int | None]:
    """A segment's byte range (from the answer's first text byte) as code points
    of ``text`` (a block starting at byte ``base``), checked against the
    segment's ``cited`` text: a range that does not hold it is looked up in the
    block; ``(None, None)`` when neither places it."""
    encoded = text.encode("utf-8", "surrogatepass")
    first, last = start - base, end - base
    if 0 <= first <= last <= len(encoded):
        begin, stop = _code_points(encoded, first), _code_points(encoded, last)
        if cited is None or text[begin:stop] == cited:
            return begin, stop
    if cited:
        found = text.find(cited)
        if found >= 0:
            return found, found + len(cited)
    return None, None


class GroundingState:
    """Grounding and URL-context metadata of one answer (module docstring)."""

    __slots__ = ("_given", "_grounding", "_url_context")

    def __init__(self) -> None:
        self._grounding: dict[str, Any] | None = None
        self._url_context: dict[str, Any] | None = None
        # Each support's citation keys already given (byte range, chunk index).
        self._given: set[tuple[int, int, int]] = set()

    def note(self, candidate: dict[str, Any]) -> bool:
        """Read candidate 0's metadata; whether it brought grounding supports.

        Raises:
            ValueError: for metadata that is not an object.
        """
        grounding = candidate.get("groundingMetadata")
        context = candidate.get("urlContextMetadata")
        if context is not None:
            context = _object(context, "urlContextMetadata")
            # Each report is whole; a later one replaces an earlier one.
            self._url_context = context
        if grounding is None:
            return False
        grounding = _object(grounding, "groundingMetadata")
        merged = self._grounding
        self._grounding = grounding if merged is None else {**merged, **grounding}
        return grounding.get("groundingSupports") is not None

    def new_citations(self, text: str, base: int) -> list[Citation]:
        """The citations of the supports not given yet, for the text block
        ``text`` that starts at byte ``base`` of the answer's text; a support
        that ends before the block is left to the metadata kept on the result.

        Raises:
            ValueError: for a support or chunk of the wrong shape.
        """
        grounding = self._grounding or {}
        chunks = _list(grounding.get("groundingChunks"), "groundingChunks")
        cited: list[Citation] = []
        for support in _list(grounding.get("groundingSupports"), "groundingSupports"):
            support = _object(support, "grounding support")
            segment = _object(support.get("segment") or {}, "grounding segment")
            start = _index(segment.get("startIndex"), "segment startIndex")
            end = _index(segment.get("endIndex"), "segment endIndex")
            segment_text = _str(segment.get("text"), "segment text")
            indices = _list(support.get("groundingChunkIndices"), "chunk indices")
            fresh = []
            for index in indices:
                index = _index(index, "grounding chunk index")
                key = (start, end, index)
                if key not in self._given:
                    fresh.append(index)
            if not fresh or end <= base:
                continue
            text_start, text_end = _text_range(text, base, start, end, segment_text)
            for index in fresh:
                self._given.add((start, end, index))
                inner: dict[str, Any] = {}
                if index < len(chunks):
                    inner, _ = _chunk_source(chunks[index])
                cited.append(
                    Citation(
                        kind="grounding",
                        cited_text=segment_text,
                        url=_str(inner.get("uri"), "grounding chunk uri"),
                        title=_str(inner.get("title"), "grounding chunk title"),
                        source_index=index,
                        text_start=text_start,
                        text_end=text_end,
                    )
                )
        return cited

    def server_blocks(
        self, new_id: Callable[[], str]
    ) -> list[ServerToolCallBlock | ServerToolResultBlock]:
        """The searches and retrievals the provider ran, each a call and its
        result (module docstring); ``[]`` without metadata.

        Raises:
            ValueError: for metadata of the wrong shape.
        """
        blocks: list[ServerToolCallBlock | ServerToolResultBlock] = []
        grounding = self._grounding
        if grounding is not None:
            chunks = _list(grounding.get("groundingChunks"), "groundingChunks")
            web = _list(grounding.get("webSearchQueries"), "webSearchQueries")
            retrieval = _list(grounding.get("retrievalQueries"), "retrievalQueries")
            for query in (*web, *retrieval):
                _str(query, "search query")
            if chunks or web or retrieval:
                kinds = {_chunk_source(chunk)[1] for chunk in chunks}
                name = GOOGLE_SEARCH if web or "web" in kinds else RETRIEVAL
                queries = web if name == GOOGLE_SEARCH else retrieval
                call_id = CallId(new_id())
                blocks.append(
                    ServerToolCallBlock(
                        id=call_id, name=name, input=compact_json({"queries": queries})
                    )
                )
                blocks.append(
                    ServerToolResultBlock(
                        tool_call_id=call_id,
                        name=name,
                        sources=tuple(_source(chunk) for chunk in chunks),
                        data={"groundingMetadata": grounding},
                    )
                )
        context = self._url_context
        if context is not None:
            entries = [
                _object(entry, "urlMetadata entry")
                for entry in _list(context.get("urlMetadata"), "urlMetadata")
            ]
            urls = [_str(e.get("retrievedUrl"), "retrievedUrl") for e in entries]
            statuses = [
                _str(e.get("urlRetrievalStatus"), "urlRetrievalStatus") for e in entries
            ]
            if entries:
                call_id = CallId(new_id())
                blocks.append(
                    ServerToolCallBlock(
                        id=call_id,
                        name=URL_CONTEXT,
                        input=compact_json({"urls": [u for u in urls if u]}),
                    )
                )
                blocks.append(
                    ServerToolResultBlock(
                        tool_call_id=call_id,
                        name=URL_CONTEXT,
                        sources=tuple(Source(url=url) for url in urls if url),
                        is_error=_URL_OK not in statuses,
                        data={"urlContextMetadata": context},
                    )
                )
        return blocks


def code_call(part: dict[str, Any], call_id: str) -> ServerToolCallBlock:
    """An ``executableCode`` part as a server tool call (module docstring).

    Raises:
        ValueError: for an ``executableCode`` of the wrong shape.
    """
    code = _object(part["executableCode"], "executableCode")
    _str(code.get("code"), "executableCode code")
    _str(code.get("language"), "executableCode language")
    return ServerToolCallBlock(
        id=CallId(call_id),
        name=CODE_EXECUTION,
        input=compact_json(code),
        data=part,
    )


def code_result(part: dict[str, Any], call_id: str) -> ServerToolResultBlock:
    """A ``codeExecutionResult`` part as the result of call ``call_id``.

    Raises:
        ValueError: for a ``codeExecutionResult`` of the wrong shape.
    """
    result = _object(part["codeExecutionResult"], "codeExecutionResult")
    outcome = _str(result.get("outcome"), "codeExecutionResult outcome")
    return ServerToolResultBlock(
        tool_call_id=CallId(call_id),
        name=CODE_EXECUTION,
        output=_str(result.get("output"), "codeExecutionResult output"),
        is_error=None if outcome is None else outcome != "OUTCOME_OK",
        data=part,
    )


def server_part_id(part: dict[str, Any], key: str) -> str | None:
    """The id Gemini gave a code part (newer models number them), if any."""
    inner = part.get(key)
    value = inner.get("id") if type(inner) is dict else None
    return value if type(value) is str and value else None


def replayed_part(block: ServerToolCallBlock | ServerToolResultBlock) -> Any:
    """The part ``block`` goes back as (a copy), ``None`` when it goes back as
    nothing (module docstring)."""
    data = block.data
    if type(data) is not dict or not any(key in data for key in SERVER_PART_KEYS):
        return None
    return dict(data)
