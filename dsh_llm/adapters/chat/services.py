"""The hosted services that speak chat completions, as named profiles.

A ``HostedService`` is what ``OpenAICompatAdapter(service="groq")`` (or a
composition entry's ``service: groq``) fills in: the API root, the key's
environment variable, the display name, a small advisory catalog, the request
spellings the service takes, and its stream's quirks (``WireProfile`` fields).
Anything the caller gives explicitly wins over the profile.

- ``SERVICES``: every profile by name (``SERVICE_NAMES`` in the docs' order);
  ``service(name)`` looks one up.
- ``HostedService.wire_quirks()``: the ``WireProfile`` keyword arguments of the
  stream's quirks, for the endpoint hook.
- Each quirk, and where it comes from, is in ``docs/hosted-services.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal

import attrs

from dsh_llm.adapters._wire.config import CatalogModel
from dsh_llm.adapters.chat.request import ResponseFormatStyle

_QUIRK: Final = {"quirk": True}
"""The metadata of a field that is one of the stream's quirks."""


@attrs.frozen(kw_only=True)
class HostedService:
    """One hosted service's profile (see the module docstring)."""

    name: str
    """The profile's name, as ``service=`` takes it (``groq``)."""
    display_name: str
    """The provider name in messages and ``provider_info``."""
    base_url: str
    """The API root (``/chat/completions`` is appended)."""
    api_key_env: str
    """The environment variable the key is read from by default."""
    models: tuple[CatalogModel, ...] = ()
    """A small advisory catalog (any model id is sent as is)."""
    model_efforts: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, hash=False)
    """The ``reasoning_effort`` values each listed model takes (unlisted
    models take none unless ``reasoning_efforts`` is configured)."""
    include_usage: bool = True
    """Send ``stream_options: {"include_usage": true}`` (``False`` where the
    service refuses the field; its usage comes unasked)."""
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """The output-cap field the service reads."""
    response_format_style: ResponseFormatStyle = "json_schema"
    """How ``response_format`` is spelled."""
    reasoning_passback_field: Literal["reasoning_content", "reasoning"] | None = None
    """The assistant-message field earlier reasoning goes back in (``None``:
    the service refuses or ignores one)."""
    # The stream's quirks: WireProfile's fields of the same names.
    reasoning_left_out: bool = attrs.field(default=False, metadata=_QUIRK)
    """``WireProfile.reasoning_left_out``."""
    finish_reasons: Mapping[str, str] = attrs.field(
        factory=dict, hash=False, metadata=_QUIRK
    )
    """``WireProfile.finish_reasons``."""
    usage_paths: tuple[tuple[str, ...], ...] = attrs.field(default=(), metadata=_QUIRK)
    """``WireProfile.usage_paths``."""
    error_paths: tuple[tuple[str, ...], ...] = attrs.field(default=(), metadata=_QUIRK)
    """``WireProfile.error_paths``."""
    end_at_eof: bool = attrs.field(default=False, metadata=_QUIRK)
    """``WireProfile.end_at_eof``."""
    reasoning_details: bool = attrs.field(default=False, metadata=_QUIRK)
    """``WireProfile.reasoning_details``."""

    def wire_quirks(self) -> dict[str, Any]:
        """The ``WireProfile`` keyword arguments of the stream's quirks."""
        return {
            field.name: getattr(self, field.name)
            for field in attrs.fields(HostedService)
            if field.metadata.get("quirk")
        }


_Row = tuple[str, str] | tuple[str, str, tuple[str, ...]]
"""A catalog row: ``(id, name)``, or ``(id, name, efforts)`` for a model that
takes ``reasoning_effort``."""


def _service(*, models: tuple[_Row, ...], **profile: Any) -> HostedService:
    """A profile whose catalog rows say each model's efforts (``model_efforts``)."""
    return HostedService(
        models=tuple(CatalogModel(id=row[0], name=row[1]) for row in models),
        model_efforts={row[0]: row[2] for row in models if len(row) == 3},
        **profile,
    )


_GPT_OSS_EFFORTS: Final = ("low", "medium", "high")

GROQ: Final = _service(
    name="groq",
    display_name="Groq",
    base_url="https://api.groq.com/openai/v1",
    api_key_env="GROQ_API_KEY",
    models=(
        ("llama-3.3-70b-versatile", "Llama 3.3 70B Versatile"),
        ("llama-3.1-8b-instant", "Llama 3.1 8B Instant"),
        ("openai/gpt-oss-120b", "GPT-OSS 120B", _GPT_OSS_EFFORTS),
        ("openai/gpt-oss-20b", "GPT-OSS 20B", _GPT_OSS_EFFORTS),
        ("qwen/qwen3-32b", "Qwen3 32B", ("none", "default")),
    ),
    max_tokens_field="max_completion_tokens",
    reasoning_passback_field="reasoning",
    usage_paths=(("x_groq", "usage"),),
    error_paths=(("x_groq", "error"),),
)
"""Groq: usage also (older builds: only) in ``x_groq.usage``, an early stop
reported as the string ``x_groq.error``, reasoning in ``reasoning``."""

MISTRAL: Final = _service(
    name="mistral",
    display_name="Mistral",
    base_url="https://api.mistral.ai/v1",
    api_key_env="MISTRAL_API_KEY",
    models=(
        ("mistral-large-latest", "Mistral Large"),
        ("mistral-medium-latest", "Mistral Medium"),
        ("mistral-small-latest", "Mistral Small"),
        ("magistral-medium-latest", "Magistral Medium"),
        ("codestral-latest", "Codestral"),
    ),
    include_usage=False,
)
"""Mistral: refuses unknown fields (``stream_options``, ``max_completion_tokens``,
a reasoning passback) with 422; ``content`` may be a list of typed parts."""

XAI: Final = _service(
    name="xai",
    display_name="xAI",
    base_url="https://api.x.ai/v1",
    api_key_env="XAI_API_KEY",
    models=(
        ("grok-4", "Grok 4"),
        ("grok-4-fast-reasoning", "Grok 4 Fast (reasoning)"),
        ("grok-code-fast-1", "Grok Code Fast 1"),
        ("grok-3-mini", "Grok 3 Mini", ("low", "high")),
    ),
    max_tokens_field="max_completion_tokens",
    reasoning_left_out=True,
)
"""xAI: ``completion_tokens`` leaves the reasoning tokens out."""

OPENROUTER: Final = _service(
    name="openrouter",
    display_name="OpenRouter",
    base_url="https://openrouter.ai/api/v1",
    api_key_env="OPENROUTER_API_KEY",
    models=(
        ("openai/gpt-4o-mini", "OpenAI GPT-4o mini"),
        ("anthropic/claude-sonnet-4", "Anthropic Claude Sonnet 4"),
        ("google/gemini-2.5-flash", "Google Gemini 2.5 Flash"),
        ("deepseek/deepseek-chat", "DeepSeek Chat"),
    ),
    reasoning_details=True,
)
"""OpenRouter: ``reasoning_details`` (signatures, encrypted reasoning) kept and
sent back; errors after the first token arrive as an ``error`` chunk."""

TOGETHER: Final = _service(
    name="together",
    display_name="Together AI",
    base_url="https://api.together.xyz/v1",
    api_key_env="TOGETHER_API_KEY",
    models=(
        ("meta-llama/Llama-3.3-70B-Instruct-Turbo", "Llama 3.3 70B Instruct Turbo"),
        ("deepseek-ai/DeepSeek-R1", "DeepSeek R1"),
        ("Qwen/Qwen2.5-72B-Instruct-Turbo", "Qwen2.5 72B Instruct Turbo"),
        ("openai/gpt-oss-120b", "GPT-OSS 120B"),
    ),
    include_usage=False,
    response_format_style="json_object_schema",
    finish_reasons={"eos": "stop"},
)
"""Together: ``finish_reason: "eos"`` for a natural stop; usage comes unasked;
JSON mode takes the schema as ``{type: json_object, schema}``."""

FIREWORKS: Final = _service(
    name="fireworks",
    display_name="Fireworks AI",
    base_url="https://api.fireworks.ai/inference/v1",
    api_key_env="FIREWORKS_API_KEY",
    models=(
        ("accounts/fireworks/models/deepseek-v3p1", "DeepSeek V3.1"),
        ("accounts/fireworks/models/gpt-oss-120b", "GPT-OSS 120B", _GPT_OSS_EFFORTS),
        ("accounts/fireworks/models/llama-v3p1-8b-instruct", "Llama 3.1 8B Instruct"),
    ),
)
"""Fireworks: reasoning in ``reasoning_content``; a small default output cap."""

CEREBRAS: Final = _service(
    name="cerebras",
    display_name="Cerebras",
    base_url="https://api.cerebras.ai/v1",
    api_key_env="CEREBRAS_API_KEY",
    models=(
        ("llama3.1-8b", "Llama 3.1 8B"),
        ("llama-3.3-70b", "Llama 3.3 70B"),
        ("gpt-oss-120b", "GPT-OSS 120B", _GPT_OSS_EFFORTS),
        ("qwen-3-235b-a22b-instruct-2507", "Qwen3 235B Instruct"),
    ),
    max_tokens_field="max_completion_tokens",
    reasoning_passback_field="reasoning",
)
"""Cerebras: reasoning in ``reasoning``, ``time_info`` beside the usage."""

DEEPINFRA: Final = _service(
    name="deepinfra",
    display_name="DeepInfra",
    base_url="https://api.deepinfra.com/v1/openai",
    api_key_env="DEEPINFRA_TOKEN",
    models=(
        ("meta-llama/Llama-3.3-70B-Instruct", "Llama 3.3 70B Instruct"),
        ("deepseek-ai/DeepSeek-R1", "DeepSeek R1"),
        ("Qwen/Qwen3-235B-A22B", "Qwen3 235B"),
    ),
)
"""DeepInfra: reasoning in ``reasoning_content``; usage with ``estimated_cost``."""

PERPLEXITY: Final = _service(
    name="perplexity",
    display_name="Perplexity",
    base_url="https://api.perplexity.ai",
    api_key_env="PERPLEXITY_API_KEY",
    models=(
        ("sonar", "Sonar"),
        ("sonar-pro", "Sonar Pro"),
        ("sonar-reasoning-pro", "Sonar Reasoning Pro"),
        ("sonar-deep-research", "Sonar Deep Research"),
    ),
    include_usage=False,
    end_at_eof=True,
)
"""Perplexity: no ``[DONE]``; ``citations`` and ``search_results`` on every
chunk (passed over); usage as running totals on every chunk."""

SERVICES: Final[Mapping[str, HostedService]] = {
    profile.name: profile
    for profile in (
        GROQ,
        MISTRAL,
        XAI,
        OPENROUTER,
        TOGETHER,
        FIREWORKS,
        CEREBRAS,
        DEEPINFRA,
        PERPLEXITY,
    )
}
"""Every hosted-service profile by name."""

SERVICE_NAMES: Final = tuple(SERVICES)
"""The profile names, in the order ``docs/hosted-services.md`` lists them."""


def service(name: str) -> HostedService:
    """The profile named ``name``.

    Raises:
        KeyError: for a name that is not in ``SERVICES``.
    """
    return SERVICES[name]
