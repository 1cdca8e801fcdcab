"""The Responses API's annotations and hosted tools, as the protocol's values.

Pure functions, no I/O:

- ``annotation_citation(annotation, offset)``: an ``output_text`` annotation as
  a ``Citation`` (``None`` for a type it does not know): ``url_citation`` (URL,
  title, range), ``file_citation`` and ``file_path`` (file id, name, the one
  ``index`` as an empty range), ``container_file_citation`` (file, range).
  The API's ``start_index``/``end_index``/``index`` count characters of the
  whole part; ``offset`` is where the block starts in it, so ``text_start`` and
  ``text_end`` index the block's own text (clamped at 0).
- ``HOSTED_TYPES`` and ``hosted_blocks(item)``: a finished hosted-tool item
  (``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
  ``mcp_call``, ``mcp_list_tools``) as its ``ServerToolCallBlock`` (``data``
  the item as received, what a replay sends back in ``input``) and its
  ``ServerToolResultBlock`` (sources, text output, ``is_error``; no ``data``:
  the one item is replayed once, from the call).
"""

from __future__ import annotations

import json
from typing import Any
from typing import Final

from dsh_llm.adapters._wire.values import citation_from
from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.adapters._wire.values import wire_text
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import Source

__all__ = ["HOSTED_TYPES", "annotation_citation", "hosted_blocks"]

HOSTED_TYPES: Final = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "mcp_call",
        "mcp_list_tools",
    }
)
"""The output item types of a tool the server runs itself."""

_NAMES: Final = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
}


_ANNOTATION_FIELDS: Final = {
    "url": "url",
    "title": "title",
    "file_id": "file_id",
    "filename": "filename",
}
"""The ``Citation`` fields an annotation carries, each at the key of its name
(each kind carries only its own: the URL and title, or the file)."""


def _shifted(value: object, offset: int) -> int | None:
    index = wire_count(value)
    return None if index is None else max(index - offset, 0)


def annotation_citation(annotation: object, offset: int = 0) -> Citation | None:
    """The ``Citation`` of one annotation (see the module docstring)."""
    if not isinstance(annotation, dict):
        return None
    kind = annotation.get("type")
    if kind in ("file_citation", "file_path"):
        start = end = _shifted(annotation.get("index"), offset)
    elif kind in ("url_citation", "container_file_citation"):
        start = _shifted(annotation.get("start_index"), offset)
        end = _shifted(annotation.get("end_index"), offset)
    else:
        return None
    return citation_from(
        kind, annotation, _ANNOTATION_FIELDS, text_start=start, text_end=end
    )


def _json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return "{}"


def _web_search(item: dict[str, Any]) -> tuple[str, tuple[Source, ...], str | None]:
    action = item.get("action")
    if not isinstance(action, dict):
        return "{}", (), None
    given = {key: value for key, value in action.items() if key != "sources"}
    found = action.get("sources")
    sources = tuple(
        Source(url=wire_text(source.get("url")), title=wire_text(source.get("title")))
        for source in (found if isinstance(found, list) else ())
        if isinstance(source, dict)
    )
    return _json(given), sources, None


def _file_search(item: dict[str, Any]) -> tuple[str, tuple[Source, ...], str | None]:
    queries = item.get("queries")
    results = item.get("results")
    sources = tuple(
        Source(
            file_id=wire_text(result.get("file_id")),
            filename=wire_text(result.get("filename")),
            snippet=wire_text(result.get("text")),
            score=score
            if isinstance(score := result.get("score"), int | float)
            and not isinstance(score, bool)
            else None,
        )
        for result in (results if isinstance(results, list) else ())
        if isinstance(result, dict)
    )
    return (
        _json({"queries": queries if isinstance(queries, list) else []}),
        (sources),
        None,
    )


def _code_interpreter(
    item: dict[str, Any],
) -> tuple[str, tuple[Source, ...], str | None]:
    given: dict[str, Any] = {"code": wire_text(item.get("code")) or ""}
    container = wire_text(item.get("container_id"))
    if container:
        given["container_id"] = container
    outputs = item.get("outputs")
    logs = [
        output["logs"]
        for output in (outputs if isinstance(outputs, list) else ())
        if isinstance(output, dict) and isinstance(output.get("logs"), str)
    ]
    images = tuple(
        Source(url=output["url"])
        for output in (outputs if isinstance(outputs, list) else ())
        if isinstance(output, dict)
        and output.get("type") == "image"
        and isinstance(output.get("url"), str)
    )
    return _json(given), images, "".join(logs) if logs else None


def hosted_blocks(
    item: dict[str, Any],
) -> tuple[ServerToolCallBlock, ServerToolResultBlock]:
    """The call and result blocks of a finished hosted-tool item (see the
    module docstring)."""
    item_type = wire_text(item.get("type")) or ""
    call_id = CallId(wire_text(item.get("id")) or "")
    status = item.get("status")
    is_error: bool | None = True if status in ("failed", "incomplete") else None
    output: str | None
    if item_type in ("mcp_call", "mcp_list_tools"):
        label = wire_text(item.get("server_label")) or ""
        tool = wire_text(item.get("name")) or "list_tools"
        name = f"mcp:{label}/{tool}"
        given = wire_text(item.get("arguments")) or "{}"
        sources: tuple[Source, ...] = ()
        error = item.get("error")
        if item_type == "mcp_list_tools":
            tools = item.get("tools")
            listed = [
                tool["name"]
                for tool in (tools if isinstance(tools, list) else ())
                if isinstance(tool, dict) and isinstance(tool.get("name"), str)
            ]
            output = "\n".join(listed) if listed else None
        else:
            output = wire_text(item.get("output"))
        if error is not None:
            is_error = True
            output = error if isinstance(error, str) else _json(error)
    else:
        name = _NAMES.get(item_type, item_type)
        if item_type == "web_search_call":
            given, sources, output = _web_search(item)
        elif item_type == "file_search_call":
            given, sources, output = _file_search(item)
        else:
            given, sources, output = _code_interpreter(item)
    call = ServerToolCallBlock(id=call_id, name=name, input=given, data=item)
    result = ServerToolResultBlock(
        tool_call_id=call_id,
        name=name,
        output=output,
        sources=sources,
        is_error=is_error,
    )
    return call, result
