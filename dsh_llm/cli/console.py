"""How the command line shows a chunk stream: live text, reasoning, tool calls, and
the one-line summary.

This module owns the rendering rules of ``dsh-llm chat`` and ``dsh-llm demo``
(text to stdout, reasoning to stderr, so either can be redirected alone).
Contracts callers may rely on:

- ``ChunkPrinter`` writes each ``text-delta`` to ``out`` and each
  ``reasoning-delta`` to ``err`` the moment it is given one, flushing after every
  delta. A reasoning block starts with ``[reasoning] `` and ends with a newline;
  on a terminal (``err.isatty()``, ``NO_COLOR`` unset, ``TERM`` not ``dumb``) it is
  dimmed, each write closed by a reset so no styling leaks. A tool call is written
  to ``out`` at its ``block-end`` as one line of JSON, the block as the protocol
  serialises it (``{"type":"tool-call","id":...,"name":...,"arguments":...}``),
  on a line of its own. A text block's citations follow it on ``out``, one
  numbered line each (``[1] Title <https://...>``); a tool the provider ran and
  its result are one bracketed line each on ``err``
  (``[server tool web_search '{"query":"x"}']``). ``end()`` finishes an open
  line, so what follows starts at the left margin.
- ``JsonLinesPrinter`` writes every chunk as one compact JSON line (the
  TypeScript harness's JSON, ``dsh_llm.serde.chunk_to_json``), flushed per chunk.
  On an output whose encoding is not a UTF encoding (an ASCII or cp1252
  console), the JSON of chunks and tool calls escapes every non-ASCII character
  (``\\uXXXX``), so it stays valid JSON there. ``chunk_sink`` picks one of the
  two on ``sys.stdout``/``sys.stderr``, as a command's ``--json`` says.
- ``format_usage`` and ``summary_line`` describe usage and finish in words; a count
  the provider did not report is shown as ``?``, never as 0.
"""

from __future__ import annotations

import codecs
import os
import sys
import threading
from typing import Final
from typing import Protocol
from typing import TextIO

from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Citation
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol.display import citation_label
from dsh_llm.protocol.display import server_tool_label
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import compact_json

REASONING_PREFIX: Final = "[reasoning] "
"""What a reasoning block starts with on stderr."""

_DIM: Final = "\x1b[2m"
_RESET: Final = "\x1b[0m"


class ChunkSink(Protocol):
    """Where a streamed chunk goes: a printer for people or for machines."""

    def write(self, chunk: StreamChunk) -> None:
        """Show ``chunk`` now."""
        ...

    def end(self) -> None:
        """The stream is over (finished, failed or interrupted): tidy up."""
        ...


class SilenceableSink:
    """Passes every chunk to ``inner`` until ``silence()`` is called; from then
    on it shows nothing (for a stream left running after Ctrl-C).

    Args:
        inner: The sink that shows the chunks.
    """

    def __init__(self, inner: ChunkSink) -> None:
        self._inner = inner
        self._silent = False
        self._lock = threading.Lock()

    def write(self, chunk: StreamChunk) -> None:
        """Show ``chunk`` unless silenced."""
        with self._lock:
            if not self._silent:
                self._inner.write(chunk)

    def end(self) -> None:
        """End the inner sink unless silenced."""
        with self._lock:
            if not self._silent:
                self._silent = True
                self._inner.end()

    def silence(self) -> None:
        """End the inner sink (an open line is finished) and show nothing more.

        A write blocked on its output for more than half a second is not waited
        for: the sink is then silenced without ending the line.
        """
        if self._lock.acquire(timeout=0.5):
            try:
                if not self._silent:
                    self._silent = True
                    self._inner.end()
            finally:
                self._lock.release()
        else:
            self._silent = True


def wants_color(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal that should get ANSI styling."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


class ChunkPrinter:
    """Shows a stream to a person as it arrives (see the module docstring).

    Args:
        out: Where text and tool calls go (stdout).
        err: Where reasoning goes (stderr).
        color: Dim the reasoning; ``None`` decides with ``wants_color(err)``.
    """

    def __init__(self, out: TextIO, err: TextIO, *, color: bool | None = None) -> None:
        self._out = out
        self._ascii_json = not holds_unicode(out)
        self._err = err
        self._color = wants_color(err) if color is None else color
        self._out_mid_line = False
        self._err_mid_line = False
        self._reasoning_started: set[int] = set()

    def write(self, chunk: StreamChunk) -> None:
        """Show one chunk (usage and finish are left to ``summary_line``)."""
        if isinstance(chunk, TextDelta):
            self._text(chunk.text)
        elif isinstance(chunk, ReasoningDelta):
            self._reasoning(chunk.index, chunk.text)
        elif isinstance(chunk, BlockStart) and chunk.block_type == "text":
            # Text after reasoning on the same terminal must not run on from it.
            self._finish_err_line()
        elif isinstance(chunk, BlockEnd):
            if chunk.index in self._reasoning_started:
                self._finish_err_line()
            ended = chunk.block
            if isinstance(ended, ToolCallBlock):
                self._finish_out_line()
                block = chunk_to_dict(chunk)["block"]
                self._out.write(
                    compact_json(block, ensure_ascii=self._ascii_json) + "\n"
                )
                self._out.flush()
            elif isinstance(ended, TextBlock) and ended.citations:
                self._finish_out_line()
                for number, citation in enumerate(ended.citations, start=1):
                    self._out.write(f"[{number}] {_citation_line(citation)}\n")
                self._out.flush()
            elif isinstance(ended, ServerToolCallBlock | ServerToolResultBlock):
                # What the provider did on its side: a status line, like reasoning.
                self._finish_out_line()
                self._finish_err_line()
                self._err.write(f"[{server_tool_label(ended)}]\n")
                self._err.flush()

    def end(self) -> None:
        """End any line left open on ``out`` or ``err``."""
        self._finish_err_line()
        self._finish_out_line()

    def _text(self, text: str) -> None:
        if not text:
            return
        self._out.write(text)
        self._out.flush()
        self._out_mid_line = not text.endswith("\n")

    def _reasoning(self, index: int, text: str) -> None:
        if not text:
            return
        piece = text
        if index not in self._reasoning_started:
            self._reasoning_started.add(index)
            self._finish_out_line()
            piece = REASONING_PREFIX + text
        if self._color:
            piece = f"{_DIM}{piece}{_RESET}"
        self._err.write(piece)
        self._err.flush()
        self._err_mid_line = not text.endswith("\n")

    def _finish_out_line(self) -> None:
        if self._out_mid_line:
            self._out.write("\n")
            self._out.flush()
            self._out_mid_line = False

    def _finish_err_line(self) -> None:
        if self._err_mid_line:
            self._err.write("\n")
            self._err.flush()
            self._err_mid_line = False


def _citation_line(citation: Citation) -> str:
    """``Title <https://...>``, or the citation's label when it has no URL."""
    label = citation_label(citation)
    if citation.url and citation.url != label:
        return f"{label} <{citation.url}>"
    return label


class JsonLinesPrinter:
    """Writes every chunk to ``out`` as one JSON line, flushed per chunk.

    Args:
        out: Where the lines go (stdout).
    """

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._ascii = not holds_unicode(out)

    def write(self, chunk: StreamChunk) -> None:
        """Write ``chunk`` as one line."""
        line = compact_json(chunk_to_dict(chunk), ensure_ascii=self._ascii)
        self._out.write(line + "\n")
        self._out.flush()

    def end(self) -> None:
        """Nothing to tidy: every line is complete."""


def chunk_sink(json_lines: bool) -> ChunkSink:
    """Where ``chat``, ``demo`` and ``record`` show the stream: JSON Lines on
    stdout for ``--json``, else text on stdout and reasoning on stderr."""
    if json_lines:
        return JsonLinesPrinter(sys.stdout)
    return ChunkPrinter(sys.stdout, sys.stderr)


def holds_unicode(stream: TextIO) -> bool:
    """Whether ``stream``'s encoding can write every character (a UTF
    encoding); JSON written elsewhere escapes non-ASCII characters instead."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return True  # an in-memory stream (io.StringIO) holds any str
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False


def count_of(number: int, noun: str) -> str:
    """``"1 block"``, ``"3 blocks"``: ``number`` and ``noun``, plural unless 1."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def format_usage(usage: TokenUsage | None) -> str:
    """Usage in words, e.g. ``input 27, cache read 256, output 69 (reasoning 24)``.

    Cache counts appear only when reported; ``not reported`` stands for a missing
    usage or one whose counts are all unknown.
    """
    if usage is None or all(
        count is None
        for count in (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens,
        )
    ):
        return "not reported"
    parts = [f"input {_count(usage.input_tokens)}"]
    if usage.cache_read_tokens is not None:
        parts.append(f"cache read {usage.cache_read_tokens}")
    if usage.cache_write_tokens is not None:
        parts.append(f"cache write {usage.cache_write_tokens}")
    output = f"output {_count(usage.output_tokens)}"
    if usage.reasoning_tokens is not None:
        output += f" (reasoning {usage.reasoning_tokens})"
    parts.append(output)
    return ", ".join(parts)


def summary_line(finish: FinishReason, usage: TokenUsage | None) -> str:
    """``finish <kind>; usage: <format_usage>``: the line ``chat`` ends with."""
    return f"finish {finish.kind}; usage: {format_usage(usage)}"
