"""Anthropic's citations and server tools, both ways: wire objects to the
protocol's values (for the translator) and back (for the request builder).

Pure functions, no I/O:

- ``citation_of(wire)``: a ``citations_delta``'s citation (or one of a text
  block's ``citations``) as a ``Citation``, ``None`` for a type it does not
  know: ``char_location``, ``page_location``, ``content_block_location`` (the
  document's index and title, the source range), ``search_result_location``
  (the search result's index, ``source`` as the URL), and
  ``web_search_result_location`` (URL, title, ``encrypted_index``).
- ``call_name(content)``: the protocol name of a ``server_tool_use`` (its
  ``name``) or an ``mcp_tool_use`` (``mcp:<server_name>/<name>``).
- ``result_block(content, name)``: a whole result block (``*_tool_result``,
  ``mcp_tool_result``) as a ``ServerToolResultBlock``: search results as
  sources, code output (stdout, then stderr) and MCP text as ``output``, an
  ``*_error`` content as ``is_error`` with its ``error_code`` as ``output``.
- ``wire_citation(citation)`` and ``replayable(data)``: what a replay sends.
"""

from __future__ import annotations

from typing import Any
from typing import Final

from dsh_llm.adapters._wire.values import citation_from
from dsh_llm.adapters._wire.values import wire_text
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import Source

__all__ = [
    "CALL_TYPES",
    "call_name",
    "citation_of",
    "is_result_type",
    "replayable",
    "result_block",
    "wire_citation",
]

CALL_TYPES: Final = frozenset({"server_tool_use", "mcp_tool_use"})
"""The wire blocks of a tool the provider runs itself."""


def _document(start: str, end: str) -> dict[str, str]:
    return {
        "source_index": "document_index",
        "title": "document_title",
        "file_id": "file_id",
        "start": start,
        "end": end,
    }


_FIELDS: Final[dict[str, dict[str, str]]] = {
    "char_location": _document("start_char_index", "end_char_index"),
    "page_location": _document("start_page_number", "end_page_number"),
    "content_block_location": _document("start_block_index", "end_block_index"),
    "search_result_location": {
        "source_index": "search_result_index",
        "url": "source",
        "title": "title",
        "start": "start_block_index",
        "end": "end_block_index",
    },
    "web_search_result_location": {
        "url": "url",
        "title": "title",
        "encrypted_index": "encrypted_index",
    },
}
"""Each citation type's wire field of each ``Citation`` field it has."""


def is_result_type(wire_type: object) -> bool:
    """Whether a content block type is a server tool's result
    (``web_search_tool_result``, ``mcp_tool_result``...)."""
    return isinstance(wire_type, str) and (
        wire_type.endswith("_tool_result") or wire_type == "mcp_tool_result"
    )


def citation_of(wire: object) -> Citation | None:
    """The ``Citation`` of one wire citation (see the module docstring)."""
    if not isinstance(wire, dict):
        return None
    kind = wire.get("type")
    if not isinstance(kind, str) or kind not in _FIELDS:
        return None
    return citation_from(
        kind, wire, _FIELDS[kind], cited_text=wire_text(wire.get("cited_text"))
    )


def wire_citation(citation: Citation) -> dict[str, Any] | None:
    """The wire citation a replay sends for ``citation``, ``None`` when it is
    not one of Anthropic's (or lacks what the API requires back)."""
    kind = citation.kind
    fields = _FIELDS.get(kind)
    if fields is None:
        return None
    wire: dict[str, Any] = {"type": kind, "cited_text": citation.cited_text or ""}
    if "encrypted_index" in fields:  # a web search result
        if not citation.encrypted_index or not citation.url:
            return None
        wire["url"] = citation.url
        wire["title"] = citation.title
        wire["encrypted_index"] = citation.encrypted_index
        return wire
    if citation.source_index is None or citation.start is None:
        return None
    wire[fields["source_index"]] = citation.source_index
    if "url" in fields:
        wire[fields["url"]] = citation.url or ""
    wire[fields["title"]] = citation.title
    wire[fields["start"]] = citation.start
    wire[fields["end"]] = citation.end if citation.end is not None else citation.start
    return wire


def call_name(content: dict[str, Any]) -> str:
    """The protocol name of a server tool call (see the module docstring)."""
    name = wire_text(content.get("name")) or ""
    if content.get("type") == "mcp_tool_use":
        server = wire_text(content.get("server_name")) or ""
        return f"mcp:{server}/{name}"
    return name


def _error_code(content: dict[str, Any]) -> str:
    code = wire_text(content.get("error_code")) or "error"
    message = wire_text(content.get("error_message"))
    return f"{code}: {message}" if message else code


def _code_output(content: dict[str, Any]) -> str | None:
    stdout = wire_text(content.get("stdout")) or ""
    stderr = wire_text(content.get("stderr")) or ""
    if stdout and stderr and not stdout.endswith("\n"):
        stdout += "\n"
    return (stdout + stderr) or None


def _mcp_output(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        return "".join(texts) if texts else None
    return None


def _search_sources(content: list[Any]) -> tuple[Source, ...]:
    return tuple(
        Source(
            url=wire_text(item.get("url")),
            title=wire_text(item.get("title")),
            page_age=wire_text(item.get("page_age")),
        )
        for item in content
        if isinstance(item, dict)
    )


def result_block(content: dict[str, Any], name: str) -> ServerToolResultBlock:
    """The ``ServerToolResultBlock`` of a whole result block (see the module
    docstring); ``data`` is the block as received."""
    wire_type = content.get("type")
    call_id = CallId(wire_text(content.get("tool_use_id")) or "")
    inner = content.get("content")
    output: str | None = None
    sources: tuple[Source, ...] = ()
    is_error: bool | None = None
    if wire_type == "mcp_tool_result":
        output = _mcp_output(inner)
        flag = content.get("is_error")
        is_error = flag if isinstance(flag, bool) else None
    elif isinstance(inner, list):
        sources = _search_sources(inner)
    elif isinstance(inner, dict):
        inner_type = wire_text(inner.get("type")) or ""
        if inner_type.endswith("_error"):
            is_error = True
            output = _error_code(inner)
        elif inner_type == "web_fetch_result":
            document = inner.get("content")
            title = document.get("title") if isinstance(document, dict) else None
            sources = (Source(url=wire_text(inner.get("url")), title=wire_text(title)),)
        elif "stdout" in inner or "stderr" in inner:
            output = _code_output(inner)
        elif isinstance(inner.get("content"), str):
            output = inner["content"]  # a text editor's view of a file
    return ServerToolResultBlock(
        tool_call_id=call_id,
        name=name,
        output=output,
        sources=sources,
        is_error=is_error,
        data=content,
    )


def replayable(data: object) -> bool:
    """Whether a server block's ``data`` is one of Anthropic's blocks, which a
    replay sends back as it is."""
    if not isinstance(data, dict):
        return False
    wire_type = data.get("type")
    return wire_type in CALL_TYPES or is_result_type(wire_type)
