"""``dsh-llm chat``: one prompt, one streamed answer.

This module owns the request ``chat`` sends and how its stream is consumed.
Contracts callers may rely on:

- ``read_prompt`` takes the PROMPT argument, else (no PROMPT, or ``-``) all of
  ``stdin`` (telling a person at a terminal how to end the input); an empty or
  blank prompt, one that is not valid UTF-8, or a closed stdin raises
  ``UsageError``.
- ``ChatRequest`` holds what a ``chat`` command asks every answer with: the
  earlier messages of a continued conversation, the images of the first prompt,
  the optional system prompt, output cap, reasoning effort, temperature,
  response format and provider options (``extra_body``); ``options`` builds one
  call's request from it (those messages, then the prompt with the images, and
  the signal Ctrl-C aborts).
- ``provider_options`` reads ``-o key=value`` pairs (the value as JSON when it
  parses, else as a string); ``read_schema`` reads ``--schema FILE`` (a JSON
  object); both raise ``UsageError`` naming what is wrong.
- ``stream_chat`` streams through ``LlmRuntime.stream`` (so every failure,
  ``MISSING_CREDENTIAL`` and ``NO_ADAPTER`` included, arrives as the terminal
  ``finish``), checks every chunk with ``validate_stream`` (strict; a violation
  raises ``INVARIANT``), hands it to the sink as it arrives, and returns the
  ``AssembledResponse`` (message, usage, finish); the message's source is a
  ``ModelSource`` naming the route and model, with the finish's replay state
  when the call succeeded (so a continued conversation replays it). The stream
  is closed on every path and the sink is ended.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any
from typing import TextIO

import attrs

from dsh_llm.assembler import AssembledResponse
from dsh_llm.assembler import BlockAssembler
from dsh_llm.cli.console import ChunkSink
from dsh_llm.cli.targets import Target
from dsh_llm.cli.targets import require_utf8
from dsh_llm.cli.usage import UsageError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.signal import AbortSignal
from dsh_llm.validator import validate_stream

# The PROMPT that means "read the prompt from stdin", as ``-`` does for files.
_STDIN_PROMPT = "-"


def read_prompt(prompt: str | None, stdin: TextIO | None, stderr: TextIO) -> str:
    """The prompt: ``prompt`` when given, else (``None`` or ``"-"``) everything on
    ``stdin``.

    Raises:
        UsageError: when the prompt is empty or blank, is not valid UTF-8, or
            must be read from a ``stdin`` that is closed (``None``).
    """
    if prompt is None or prompt == _STDIN_PROMPT:
        if stdin is None:
            raise UsageError("there is no standard input: pass PROMPT")
        isatty = getattr(stdin, "isatty", None)
        if isatty is not None and isatty():
            stderr.write("dsh-llm chat: type the prompt, then Ctrl-D\n")
            stderr.flush()
        try:
            prompt = stdin.read()
        except UnicodeDecodeError:
            raise UsageError("the prompt on stdin is not valid UTF-8") from None
    if not prompt.strip():
        raise UsageError("empty prompt: pass PROMPT or pipe it on stdin")
    require_utf8(prompt, "the prompt")
    return prompt


def provider_options(pairs: Sequence[str] | None) -> dict[str, Any] | None:
    """``-o key=value`` pairs as an ``extra_body`` mapping (``None`` without).

    Raises:
        UsageError: for a pair without ``=`` or with an empty key.
    """
    if not pairs:
        return None
    body: dict[str, Any] = {}
    for pair in pairs:
        key, equals, text = pair.partition("=")
        if not equals or not key.strip():
            raise UsageError(f"-o expects key=value, got {pair!r}")
        try:
            body[key.strip()] = json.loads(text)
        except ValueError:
            body[key.strip()] = text
    return body


def read_schema(path: str | None) -> ResponseFormat | None:
    """The ``--schema FILE`` response format (``None`` without).

    Raises:
        UsageError: when the file cannot be read or is not a JSON object.
    """
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            schema = json.load(handle)
    except OSError as exc:
        raise UsageError(f"cannot read --schema {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"--schema {path} is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise UsageError(f"--schema {path} must hold a JSON Schema object")
    return ResponseFormat(schema=schema)


@attrs.frozen(kw_only=True)
class ChatRequest:
    """What one ``chat`` command asks every answer with."""

    history: tuple[Message, ...] = ()
    """The conversation so far (a continued one), oldest first."""
    images: tuple[ImageBlock, ...] = ()
    """The images sent with the first prompt."""
    system: str | None = None
    """The system prompt."""
    max_tokens: int | None = None
    """The output cap."""
    reasoning_effort: str | None = None
    """The reasoning effort."""
    temperature: float | None = None
    """The sampling temperature."""
    response_format: ResponseFormat | None = None
    """The JSON Schema the answer must follow (``--schema``)."""
    extra_body: dict[str, Any] | None = None
    """Provider fields sent as is (``-o``)."""

    def fields(self) -> dict[str, Any]:
        """The ``GenerateOptions`` fields every answer is asked with, by name
        (``system`` to ``extra_body``)."""
        fields = attrs.asdict(self, recurse=False)
        del fields["history"], fields["images"]
        return fields

    def options(
        self, target: Target, prompt: str, signal: AbortSignal | None = None
    ) -> GenerateOptions:
        """The request for one ``chat`` call of ``target``: the history, then
        ``prompt`` with the images."""
        return GenerateOptions(
            provider=target.route,
            model=target.model,
            messages=(
                *self.history,
                create_user_message((TextBlock(text=prompt), *self.images)),
            ),
            signal=signal,
            **self.fields(),
        )


def stream_chat(
    runtime: LlmRuntime, options: GenerateOptions, sink: ChunkSink
) -> AssembledResponse:
    """Stream ``options`` through ``runtime`` into ``sink``, and assemble it.

    Returns:
        The assembled message, usage and finish (``error``/``aborted`` finishes
        carry the failure; check ``ok``).

    Raises:
        LlmError: ``INVARIANT`` when the stream breaks the protocol's rules.
    """
    assembler = BlockAssembler()
    finish: FinishReason | None = None
    stream = runtime.stream(options)
    with contextlib.closing(stream):
        try:
            for chunk in validate_stream(stream, strict=True):
                sink.write(chunk)
                assembler.push(chunk)
                if isinstance(chunk, Finish):
                    finish = chunk.reason
        finally:
            sink.end()
    # A stream that passed validate_stream ended with its finish.
    assert finish is not None
    replay = None if finish.is_failure else assembler.replay_state
    source = ModelSource(
        provider=options.provider, model=options.model, replay_state=replay
    )
    message = assembler.message(source)
    return AssembledResponse(message=message, usage=assembler.usage, finish=finish)
