"""The Gemini ``generateContent`` request body.

Pure: ``GenerateOptions`` in, a JSON-ready body out; nothing here does I/O, and
nothing knows where the body goes or how it is authorised (the family's request
hook adds the URL and the credential), so another front door to the same models
(Vertex AI) builds its bodies here too.

- ``build_generate_request``: a fixed key order, optional fields omitted;
  ``systemInstruction`` holds every system text; roles ``user``/``model``,
  consecutive messages of one role merged; calls and results as
  ``functionCall``/``functionResponse`` parts; thought signatures put back on the
  parts they came on; images as ``inlineData`` parts (``images``), an image a
  Gemini answer returned as the part it came in; a Gemini code execution call
  and result as the ``executableCode``/``codeExecutionResult`` parts they came
  in, any other server tool block (grounding searches, another provider's)
  left out (``grounding.replayed_part``); citations are not sent (Gemini takes
  none back); messages name the ``provider`` given (default ``PROVIDER``).
- Tools as ``functionDeclarations``; ``tool_choice`` as ``functionCallingConfig``;
  ``response_format`` as ``responseMimeType``/``responseJsonSchema``
  (``response_format_config``); ``cached_content`` as ``cachedContent``;
  ``extra_body`` merged last.
- Refused before any I/O: images the model or the wire cannot take (or without
  their bytes), too many stop sequences, an effort the model does not offer, a
  result for an unknown call, a cache breakpoint or ``cache_key`` (the API has
  neither: its caching is implicit or through ``cachedContent``).
- Point by point: ``docs/gemini.md``.
"""

from __future__ import annotations

from typing import Any
from typing import Final

from dsh_llm.adapters._wire.config import catalog_entry
from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import check_image_input
from dsh_llm.adapters._wire.extras import merge_extra_body
from dsh_llm.adapters._wire.extras import refuse_cache_controls
from dsh_llm.adapters._wire.extras import sampling_fields
from dsh_llm.adapters._wire.history import answered_call
from dsh_llm.adapters._wire.history import arguments_object
from dsh_llm.adapters._wire.history import record_calls
from dsh_llm.adapters.gemini.catalog import DEFAULT_MODELS
from dsh_llm.adapters.gemini.catalog import GeminiModel
from dsh_llm.adapters.gemini.catalog import model_for
from dsh_llm.adapters.gemini.catalog import thinking_config
from dsh_llm.adapters.gemini.grounding import replayed_part
from dsh_llm.adapters.gemini.images import answer_image_part
from dsh_llm.adapters.gemini.images import function_response_parts
from dsh_llm.adapters.gemini.images import inline_part
from dsh_llm.adapters.gemini.images import without_answer_images
from dsh_llm.adapters.gemini.replay import replay_entries
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import text_of

PROVIDER: Final = "Gemini"
"""The display name messages use by default."""
MAX_STOP_SEQUENCES: Final = 5
"""The most ``stopSequences`` Gemini takes."""


def _refuse(
    options: GenerateOptions,
    models: tuple[GeminiModel, ...],
    attachments: AttachmentReader | None,
    provider: str,
) -> None:
    if options.stop is not None and len(options.stop) > MAX_STOP_SEQUENCES:
        raise LlmError(
            f"{provider} takes at most {MAX_STOP_SEQUENCES} stop sequences, got "
            f"{len(options.stop)}",
            ErrorCode.UNSUPPORTED_OPTION,
        )
    refuse_cache_controls(
        options, provider=provider, wire="the Gemini API", cached_content=True
    )
    entry = catalog_entry(models, options.model)
    check_image_input(
        without_answer_images(options),
        provider=provider,
        modalities=None if entry is None else entry.input_modalities,
        store=attachments,
    )


def _system_parts(options: GenerateOptions) -> list[dict[str, Any]]:
    texts = [] if options.system is None else [options.system]
    texts.extend(
        text_of(message.content)
        for message in options.messages
        if message.role == "system"
    )
    return [{"text": text} for text in texts if text]


def _model_parts(message: Message, provider: str) -> list[dict[str, Any]]:
    entries, before = replay_entries(message)
    parts: list[dict[str, Any]] = list(before)
    for block, entry in zip(message.content, entries, strict=True):
        signature = entry.get("thoughtSignature") if entry else None
        part: dict[str, Any] | None = None
        if isinstance(block, TextBlock):
            if block.text:
                part = {"text": block.text}
        elif isinstance(block, ReasoningBlock):
            if isinstance(signature, str) and block.text:
                part = {"text": block.text, "thought": True}
        elif isinstance(block, ImageBlock):
            part = answer_image_part(entry)
        elif isinstance(block, ToolCallBlock):
            call: dict[str, Any] = {
                "name": block.name,
                "args": arguments_object(block, provider=provider),
            }
            wire_id = entry.get("id") if entry else None
            if isinstance(wire_id, str) and wire_id:
                call["id"] = wire_id
            part = {"functionCall": call}
        elif isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
            # Code execution goes back as the parts it came in; the searches
            # (grounding) and another provider's server tools go back as nothing.
            part = replayed_part(block)
        if part is not None:
            if isinstance(signature, str) and signature:
                part.setdefault("thoughtSignature", signature)
            parts.append(part)
        after = entry.get("after") if entry else None
        if isinstance(after, list):
            parts.extend(p for p in after if isinstance(p, dict))
    return parts


def _wire_ids(messages: tuple[Message, ...]) -> dict[str, str]:
    """Call id to the id Gemini gave that call, from replay state."""
    ids: dict[str, str] = {}
    for message in messages:
        if message.role != "assistant":
            continue
        entries, _ = replay_entries(message)
        for block, entry in zip(message.content, entries, strict=True):
            if isinstance(block, ToolCallBlock) and entry:
                wire_id = entry.get("id")
                if isinstance(wire_id, str) and wire_id:
                    ids[block.id] = wire_id
    return ids


def _user_parts(
    message: Message,
    calls: dict[str, ToolCallBlock],
    wire_ids: dict[str, str],
    *,
    model_id: str,
    attachments: AttachmentReader | None,
    provider: str,
) -> list[dict[str, Any]]:
    responses: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:
                texts.append({"text": block.text})
        elif isinstance(block, ImageBlock):
            texts.append(inline_part(block, attachments, provider=provider))
        elif isinstance(block, ToolResultBlock):
            call = answered_call(calls, block, provider=provider)
            key = "error" if block.is_error else "output"
            response: dict[str, Any] = {
                "name": call.name,
                "response": {key: text_of(block.content)},
            }
            parts = function_response_parts(
                block, model_id=model_id, store=attachments, provider=provider
            )
            if parts:
                response["parts"] = parts
            wire_id = wire_ids.get(block.tool_call_id)
            if wire_id is not None:
                response["id"] = wire_id
            responses.append({"functionResponse": response})
    return responses + texts


def build_contents(
    options: GenerateOptions,
    *,
    attachments: AttachmentReader | None = None,
    provider: str = PROVIDER,
) -> list[dict[str, Any]]:
    """The ``contents`` array for ``options`` (see the module docstring).

    Args:
        options: The request.
        attachments: Where image bytes are read (``None``: none can be).
        provider: The display name messages use.

    Raises:
        LlmError: ``INVALID_REQUEST`` for a result of an unknown call or call
            arguments that are not a JSON object; ``MISSING_ATTACHMENT`` for an
            image whose bytes ``attachments`` lacks; ``UNSUPPORTED_CONTENT`` for
            an image in a tool result the model cannot take (``images``).
    """
    calls: dict[str, ToolCallBlock] = {}
    wire_ids = _wire_ids(options.messages)
    contents: list[dict[str, Any]] = []
    for message in options.messages:
        record_calls(calls, message)
        if message.role == "system":
            continue
        if message.role == "assistant":
            role, parts = "model", _model_parts(message, provider)
        else:
            role = "user"
            parts = _user_parts(
                message,
                calls,
                wire_ids,
                model_id=options.model,
                attachments=attachments,
                provider=provider,
            )
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return contents


def tool_config(options: GenerateOptions) -> dict[str, Any] | None:
    """The ``toolConfig`` for ``options.tool_choice`` (``None``: omitted)."""
    choice = options.tool_choice
    if not options.tools or choice is None:
        return None
    if choice == "auto":
        config: dict[str, Any] = {"mode": "AUTO"}
    elif choice == "none":
        config = {"mode": "NONE"}
    elif choice == "required":
        config = {"mode": "ANY"}
    else:
        config = {"mode": "ANY", "allowedFunctionNames": [choice]}
    return {"functionCallingConfig": config}


def build_generate_request(
    options: GenerateOptions,
    *,
    models: tuple[GeminiModel, ...] = DEFAULT_MODELS,
    max_output_tokens: int | None = None,
    attachments: AttachmentReader | None = None,
    provider: str = PROVIDER,
) -> dict[str, Any]:
    """The request body for ``options`` (see the module docstring), with
    ``options.extra_body`` merged in last.

    Args:
        options: The request.
        models: The catalog whose entry gives the model's thinking style,
            efforts and input modalities (``catalog.model_for``; images go only
            to a listed model whose entry has ``image``).
        max_output_tokens: The cap to send when ``options.max_tokens`` is
            ``None`` (e.g. the model's); ``None`` omits it.
        attachments: Where image bytes are read (``adapter.attachments``).
        provider: The display name messages use.

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT``, ``MISSING_ATTACHMENT``,
            ``UNSUPPORTED_OPTION``, ``UNSUPPORTED_REASONING_EFFORT`` or
            ``INVALID_REQUEST`` (see the module docstring).
    """
    _refuse(options, models, attachments, provider)
    model = model_for(options.model, models)
    thinking = thinking_config(model, options.reasoning_effort)
    body: dict[str, Any] = {
        "contents": build_contents(options, attachments=attachments, provider=provider)
    }
    system = _system_parts(options)
    if system:
        body["systemInstruction"] = {"parts": system}
    if options.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }
                    for tool in options.tools
                ]
            }
        ]
        config = tool_config(options)
        if config is not None:
            body["toolConfig"] = config
    cap = options.max_tokens if options.max_tokens is not None else max_output_tokens
    generation = sampling_fields(
        options, cap=cap, cap_key="maxOutputTokens", stop_key="stopSequences"
    )
    generation.update(response_format_config(options))
    generation["thinkingConfig"] = thinking
    body["generationConfig"] = generation
    if options.cached_content is not None:
        body["cachedContent"] = options.cached_content
    return merge_extra_body(body, options)


def response_format_config(options: GenerateOptions) -> dict[str, Any]:
    """The ``generationConfig`` fields for ``options.response_format``: JSON
    output constrained to the schema, sent as a plain JSON Schema
    (``responseJsonSchema``, not the OpenAPI subset ``responseSchema``);
    ``{}`` when unset.

    Gemini enforces the schema by constrained decoding, so a strict and a
    non-strict format are sent alike (the name has no Gemini field).
    """
    wanted = options.response_format
    if wanted is None:
        return {}
    return {
        "responseMimeType": "application/json",
        "responseJsonSchema": wanted.schema,
    }
