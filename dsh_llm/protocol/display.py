"""How the values read to a person: short reprs and Markdown for notebooks.

Pure text helpers the values' ``__repr__``, ``__str__`` and ``_repr_markdown_``
methods share. Contracts callers may rely on:

- ``usage_text``: ``str(usage)`` (``TokenUsage.__str__``), and ``not
  reported`` for a missing usage.
- ``clip``: a text's ``repr`` cut to a length, ending with ``…`` when cut.
- ``blocks_markdown``: the blocks of a message as Markdown: text as it is (a
  model's text is usually Markdown), reasoning folded in ``<details>`` (also
  as it is), tool
  calls with their arguments (indented JSON when they parse) and tool results
  in fenced code blocks, images by name and size; a text block's citations
  as numbered links under it; a tool the provider ran and its result one
  line each (``server_tool_label``).
- Nothing here shows a header value, an ``extra_body`` value or a replay
  envelope: they may hold secrets or opaque provider state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final

from dsh_llm.protocol.chunks import FinishReason
from dsh_llm.protocol.chunks import TokenUsage
from dsh_llm.protocol.citations import Citation
from dsh_llm.protocol.content import ContentBlock
from dsh_llm.protocol.content import ImageBlock
from dsh_llm.protocol.content import ReasoningBlock
from dsh_llm.protocol.content import ServerToolCallBlock
from dsh_llm.protocol.content import ServerToolResultBlock
from dsh_llm.protocol.content import TextBlock
from dsh_llm.protocol.content import ToolCallBlock
from dsh_llm.protocol.content import ToolResultBlock

__all__ = [
    "CLIP",
    "blocks_markdown",
    "citation_label",
    "clip",
    "code",
    "escaped",
    "fenced",
    "finish_text",
    "footer_markdown",
    "image_label",
    "server_tool_label",
    "usage_text",
]

CLIP: Final = 60
"""How many characters of a text a short ``repr`` shows."""

_BACKTICKS: Final = re.compile(r"`+")


def usage_text(usage: TokenUsage | None) -> str:
    """``str(usage)``; ``not reported`` for no usage at all."""
    return "not reported" if usage is None else str(usage)


def clip(text: str, limit: int = CLIP) -> str:
    """``repr(text)``, cut to its first ``limit`` characters plus ``…``."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + "…"


def finish_text(reason: FinishReason) -> str:
    """``stop``, or ``error SERVER: <message>`` for a failure."""
    if reason.failure is None:
        return reason.kind
    return f"{reason.kind} {reason.failure.code}: {reason.failure.message}"


def fenced(text: str, language: str = "") -> str:
    """``text`` in a fenced code block whose fence no line of it can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _arguments(arguments: str) -> tuple[str, str]:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False), "json"
    except ValueError:
        return arguments, ""


_MARKDOWN_SPECIAL: Final = re.compile(r"([\\`*_\[\]<>#|~])")


def escaped(text: str) -> str:
    """``text`` with Markdown and HTML specials escaped, to show as written."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text.replace("&", "&amp;"))


def code(text: str) -> str:
    """``text`` as an inline code span (backticks inside it allowed)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def citation_label(citation: Citation) -> str:
    """A citation in a few words: its title, URL or file, else its kind, with
    the quoted text (clipped) when there is one."""
    name = citation.title or citation.url or citation.filename or citation.file_id or ""
    where = name or citation.kind
    if citation.cited_text:
        return f"{where}: {clip(citation.cited_text)}"
    return where


_UNSAFE_URL: Final = re.compile(r"[<>\s]")


def _citation_markdown(number: int, citation: Citation) -> str:
    label = escaped(citation_label(citation))
    url = citation.url
    if not url:
        return f"{number}. {label}"
    if _UNSAFE_URL.search(url):
        # Not a link a Markdown reader would keep whole: shown as text.
        return f"{number}. {label} ({escaped(url)})"
    return f"{number}. [{label}](<{url}>)"


def _text_markdown(block: TextBlock) -> str:
    if not block.citations:
        return block.text
    lines = [
        _citation_markdown(number, citation)
        for number, citation in enumerate(block.citations, start=1)
    ]
    return f"{block.text}\n\n" + "\n".join(lines)


def server_tool_label(block: ServerToolCallBlock | ServerToolResultBlock) -> str:
    """One line for a tool the provider ran (``server tool web_search
    {"query":"oslo"}``) or its result (``server tool result web_search: 5
    sources``)."""
    if isinstance(block, ServerToolCallBlock):
        return f"server tool {block.name} {clip(block.input)}"
    facts: list[str] = []
    if block.is_error:
        facts.append("error")
    if block.sources:
        count = len(block.sources)
        facts.append(f"{count} source{'' if count == 1 else 's'}")
    if block.output:
        facts.append(clip(block.output))
    shown = ", ".join(facts) if facts else "done"
    return f"server tool result {block.name}: {shown}"


def _block_markdown(block: ContentBlock) -> str:
    if isinstance(block, TextBlock):
        return _text_markdown(block)
    if isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
        return f"*{escaped(server_tool_label(block))}*"
    if isinstance(block, ReasoningBlock):
        return (
            f"<details><summary>Reasoning ({len(block.text)} characters)</summary>"
            f"\n\n{block.text}\n\n</details>"
        )
    if isinstance(block, ToolCallBlock):
        arguments, language = _arguments(block.arguments)
        return f"**Tool call** {code(block.name)} ({code(block.id)})\n\n" + fenced(
            arguments, language
        )
    if isinstance(block, ToolResultBlock):
        label = " (error)" if block.is_error else ""
        inner = blocks_markdown(block.content) or "(empty)"
        return f"**Tool result{label}** for {code(block.tool_call_id)}\n\n" + (
            fenced(inner)
            if all(isinstance(b, TextBlock) for b in block.content)
            else inner
        )
    image = block.attachment
    name = f"{image.name}, " if image.name else ""
    return escaped(f"[image: {name}{image.media_type}, {image.width}x{image.height}]")


def blocks_markdown(blocks: Iterable[ContentBlock]) -> str:
    """The blocks as Markdown, separated by blank lines (see the module
    docstring)."""
    return "\n\n".join(_block_markdown(block) for block in blocks)


def footer_markdown(parts: Iterable[str]) -> str:
    """The closing line of a rich display: ``parts`` joined by `` · ``, each
    escaped."""
    return " · ".join(escaped(part) for part in parts)


def image_label(block: ImageBlock) -> str:
    """``image photo.png 640x480``: an image block in a short ``repr``."""
    image = block.attachment
    name = f" {image.name}" if image.name else ""
    return f"image{name} {image.width}x{image.height}"
