"""Model metadata: checking what an adapter says about its models, and applying it.

``LlmRuntime`` asks an adapter for its catalog and for the facts of one exact
model, then resolves a call config against those facts.
This module owns the checks and the resolution; it does no I/O and calls no
adapter, so the runtime decides when the adapter is asked. Contracts callers may
rely on:

- ``checked_catalog`` and ``checked_model_info`` return detached copies built
  from fields they checked, never the adapter's own objects. Anything else
  raises ``LlmError``: ``INVALID_CATALOG`` for the catalog;
  ``INVALID_MODEL_INFO``, ``INVALID_MODEL_CONTEXT``,
  ``INVALID_MODEL_MAX_TOKENS`` or ``INVALID_MODEL_REASONING`` for one model.
  Their messages name the provider (and model), not the offending value.
- ``resolve_call_config`` fills a missing ``max_tokens`` with the model's
  ``default_max_tokens`` and a missing reasoning effort with the model's default
  effort; an effort the model does not offer exactly (no clamping, no aliases),
  or any effort for a model without reasoning, raises
  ``UNSUPPORTED_REASONING_EFFORT``. A config it does not change is returned by
  identity.
- ``adapter_defaults`` says which fields that resolution filled in.
- ``project_text_only`` replaces every image (nested ones too) with a short
  text when the model's ``input_modalities`` are known and lack ``image``;
  messages without images pass by identity.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from typing import Final
from typing import cast

import attrs

from dsh_llm.adapter import LlmModelContext
from dsh_llm.adapter import LlmModelInfo
from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmReasoningEffortInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import content_has_image
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER

__all__ = [
    "MAX_SAFE_INTEGER",
    "AdapterDefaults",
    "adapter_defaults",
    "checked_catalog",
    "checked_model_info",
    "project_text_only",
    "resolve_call_config",
    "sends_config",
]


_TEXT_ONLY_IMAGE: Final = (
    "[image omitted because this model accepts text only; attachment sha256:{}]"
)


@attrs.frozen(kw_only=True)
class AdapterDefaults:
    """Which call-config fields the adapter filled in rather than the caller."""

    reasoning_effort: bool = False
    """The model's default reasoning effort was written into the config."""
    max_tokens: bool = False
    """The model's ``default_max_tokens`` was written into the config."""


def checked_catalog(provider: str, listed: object) -> tuple[LlmModelInfo, ...]:
    """Check the catalog an adapter's ``list_models(provider)`` returned.

    Args:
        provider: The route the catalog was asked for.
        listed: What the adapter returned (any iterable of entries).

    Returns:
        Detached copies of the entries, in the adapter's order.

    Raises:
        LlmError: ``INVALID_CATALOG`` when ``listed`` is not iterable, or an
            entry is not an ``LlmModelInfo`` of this route with a non-empty id
            and name, a str or ``None`` description and str modalities, or
            repeats an id.
    """
    try:
        # Only iteration is asked of it; what is not iterable is refused below.
        entries = tuple(cast("Iterable[object]", listed))
    except TypeError as exc:
        raise _catalog_error(provider) from exc
    seen: set[str] = set()
    models: list[LlmModelInfo] = []
    for entry in entries:
        if (
            not isinstance(entry, LlmModelInfo)
            or entry.provider != provider
            or not _non_empty_str(entry.id)
            or not _non_empty_str(entry.name)
            or not _optional_str(entry.description)
            or not _modalities_ok(entry.input_modalities)
            or entry.id in seen
        ):
            raise _catalog_error(provider)
        seen.add(entry.id)
        models.append(
            LlmModelInfo(
                provider=provider,
                id=entry.id,
                name=entry.name,
                description=entry.description,
                input_modalities=entry.input_modalities,
            )
        )
    return tuple(models)


def checked_model_info(
    provider: str, model: str, resolved: object
) -> LlmResolvedModelInfo:
    """Check an adapter's answer about one exact model.

    Args:
        provider: The route that was asked.
        model: The model id that was asked about.
        resolved: What the adapter answered.

    Returns:
        A detached copy of the answer (modalities kept).

    Raises:
        LlmError: ``INVALID_MODEL_INFO`` when it is not an
            ``LlmResolvedModelInfo`` for exactly ``provider`` and ``model`` with
            a non-empty name; ``INVALID_MODEL_CONTEXT`` for a context window that
            is not a positive int; ``INVALID_MODEL_MAX_TOKENS`` for a default cap
            that is not an int in ``1..MAX_SAFE_INTEGER``;
            ``INVALID_MODEL_REASONING`` for empty, unnamed or repeated efforts or
            a default effort that is not listed.
    """
    where = f'for provider "{provider}" model "{model}"'
    if (
        not isinstance(resolved, LlmResolvedModelInfo)
        or resolved.provider != provider
        or resolved.id != model
        or not _non_empty_str(resolved.name)
        or not _optional_str(resolved.description)
        or not _modalities_ok(resolved.input_modalities)
    ):
        raise LlmError(
            f"adapter returned invalid exact model metadata {where}",
            ErrorCode.INVALID_MODEL_INFO,
        )
    context = resolved.context
    if context is not None and (
        not isinstance(context, LlmModelContext)
        or type(context.context_window) is not int
        or context.context_window <= 0
    ):
        raise LlmError(
            f"adapter returned invalid context metadata {where}",
            ErrorCode.INVALID_MODEL_CONTEXT,
        )
    cap = resolved.default_max_tokens
    if cap is not None and (type(cap) is not int or not 0 < cap <= MAX_SAFE_INTEGER):
        raise LlmError(
            f"adapter returned invalid default max_tokens {where}",
            ErrorCode.INVALID_MODEL_MAX_TOKENS,
        )
    return LlmResolvedModelInfo(
        provider=provider,
        id=model,
        name=resolved.name,
        description=resolved.description,
        input_modalities=resolved.input_modalities,
        context=None
        if context is None
        else LlmModelContext(context_window=context.context_window),
        default_max_tokens=cap,
        reasoning=_checked_reasoning(resolved.reasoning, where),
    )


def sends_config(options: GenerateOptions, config: LlmCallConfig) -> bool:
    """Whether ``options``' six call-config fields equal ``config``'s
    (``options.call_config() == config``, without building a config)."""
    return (
        options.provider == config.provider
        and options.model == config.model
        and options.reasoning_effort == config.reasoning_effort
        and options.temperature == config.temperature
        and options.max_tokens == config.max_tokens
        and options.stop == config.stop
    )


def resolve_call_config(
    config: LlmCallConfig, model: LlmResolvedModelInfo
) -> LlmCallConfig:
    """Apply ``model``'s defaults to ``config`` and check its reasoning effort.

    This is ``LlmRuntime.resolve_call_config`` once the model's facts are known
    (and checked by ``checked_model_info``).

    Returns:
        ``config`` itself when nothing changed, else a new config.

    Raises:
        LlmError: ``UNSUPPORTED_REASONING_EFFORT`` for an effort the model does
            not offer, including any effort for a model without reasoning.
    """
    changes: dict[str, Any] = {}
    if config.max_tokens is None and model.default_max_tokens is not None:
        changes["max_tokens"] = model.default_max_tokens
    requested = config.reasoning_effort
    reasoning = model.reasoning
    if reasoning is None:
        if requested is not None:
            raise _unsupported_effort(config, requested)
    else:
        effective = requested if requested is not None else reasoning.default_effort
        if effective is not None:
            if all(effort.id != effective for effort in reasoning.efforts):
                raise _unsupported_effort(config, effective)
            if effective != requested:
                changes["reasoning_effort"] = effective
    return attrs.evolve(config, **changes) if changes else config


def adapter_defaults(
    original: LlmCallConfig, resolved: LlmCallConfig
) -> AdapterDefaults:
    """Which fields ``resolve_call_config`` filled in going from ``original`` to
    ``resolved``."""
    return AdapterDefaults(
        reasoning_effort=original.reasoning_effort is None
        and resolved.reasoning_effort is not None,
        max_tokens=original.max_tokens is None and resolved.max_tokens is not None,
    )


def project_text_only(
    options: GenerateOptions, modalities: tuple[str, ...] | None
) -> GenerateOptions:
    """Replace every image (nested ones too) with a short text when the model is
    known to take text only.

    The text is ``[image omitted because this model accepts text only;
    attachment sha256:<first 8 hex digits of the attachment id>]``.

    Args:
        options: The request the adapter is about to receive.
        modalities: The model's ``input_modalities``; ``None`` (unknown) or a
            tuple with ``"image"`` leaves the request as it is.

    Returns:
        ``options`` itself when nothing is replaced; otherwise a copy in which
        the messages without images are the same objects.
    """
    if modalities is None or "image" in modalities:
        return options
    if not any(content_has_image(message.content) for message in options.messages):
        return options
    return options.evolve(
        messages=tuple(
            attrs.evolve(message, content=_text_only(message.content))
            if content_has_image(message.content)
            else message
            for message in options.messages
        )
    )


# --- helpers ----------------------------------------------------------------------


def _non_empty_str(value: object) -> bool:
    return isinstance(value, str) and value != ""


def _optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def _modalities_ok(value: object) -> bool:
    return value is None or (
        isinstance(value, tuple) and all(isinstance(item, str) for item in value)
    )


def _catalog_error(provider: str) -> LlmError:
    return LlmError(
        "adapter returned invalid or duplicate model metadata for provider "
        f'"{provider}"',
        ErrorCode.INVALID_CATALOG,
    )


def _checked_reasoning(value: object, where: str) -> LlmModelReasoningInfo | None:
    if value is None:
        return None
    if (
        not isinstance(value, LlmModelReasoningInfo)
        or not isinstance(value.efforts, tuple)
        or not value.efforts
    ):
        raise LlmError(
            f"adapter returned invalid reasoning metadata {where}",
            ErrorCode.INVALID_MODEL_REASONING,
        )
    seen: set[str] = set()
    efforts: list[LlmReasoningEffortInfo] = []
    for effort in value.efforts:
        if (
            not isinstance(effort, LlmReasoningEffortInfo)
            or not _non_empty_str(effort.id)
            or not _non_empty_str(effort.name)
            or not _optional_str(effort.description)
            or effort.id in seen
        ):
            raise LlmError(
                f"adapter returned invalid or duplicate reasoning effort metadata "
                f"{where}",
                ErrorCode.INVALID_MODEL_REASONING,
            )
        seen.add(effort.id)
        efforts.append(
            LlmReasoningEffortInfo(
                id=effort.id, name=effort.name, description=effort.description
            )
        )
    default = value.default_effort
    if default is not None and (not isinstance(default, str) or default not in seen):
        raise LlmError(
            f"adapter returned an unknown default reasoning effort {where}",
            ErrorCode.INVALID_MODEL_REASONING,
        )
    return LlmModelReasoningInfo(efforts=tuple(efforts), default_effort=default)


def _unsupported_effort(config: LlmCallConfig, effort: str) -> LlmError:
    return LlmError(
        f'provider "{config.provider}" model "{config.model}" does not support '
        f'reasoning effort "{effort}"',
        ErrorCode.UNSUPPORTED_REASONING_EFFORT,
    )


def _text_only(blocks: tuple[ContentBlock, ...]) -> tuple[ContentBlock, ...]:
    projected: list[ContentBlock] = []
    for block in blocks:
        if isinstance(block, ImageBlock):
            digest = block.attachment.attachment_id.removeprefix("sha256:")[:8]
            projected.append(TextBlock(text=_TEXT_ONLY_IMAGE.format(digest)))
        elif isinstance(block, ToolResultBlock) and content_has_image(block.content):
            projected.append(attrs.evolve(block, content=_text_only(block.content)))
        else:
            projected.append(block)
    return tuple(projected)
