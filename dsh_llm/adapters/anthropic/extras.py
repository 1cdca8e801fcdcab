"""Structured output and images on the Anthropic Messages wire.

Pure functions the request builder calls; every refusal is raised before I/O.

- ``output_format``: ``GenerateOptions.response_format`` as the value of
  ``output_config.format``: ``{"type": "json_schema", "schema": <schema>}``.
  The API takes no name or strict flag there and always enforces the schema
  (constrained decoding), so ``strict=True`` and ``strict=False`` send the same.
- ``image_content``: an ``ImageBlock`` as an ``image`` content block with a
  ``base64`` source, its bytes read from the attachment store
  (``MISSING_ATTACHMENT`` when the store is unset or lacks them).
- Images travel in user messages and inside ``tool_result`` content only
  (``dsh_llm.adapters.refuse_misplaced_images``).
"""

from __future__ import annotations

from typing import Any

from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import image_data
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock


def output_format(options: GenerateOptions) -> dict[str, Any] | None:
    """The ``output_config.format`` value for ``options`` (``None`` when no
    ``response_format`` is set). ``ResponseFormat.name`` is not sent: the API
    has no field for it."""
    wanted = options.response_format
    if wanted is None:
        return None
    return {"type": "json_schema", "schema": wanted.schema}


def image_content(
    block: ImageBlock, store: AttachmentReader | None, *, provider: str
) -> dict[str, Any]:
    """``block`` as ``{"type": "image", "source": {"type": "base64",
    "media_type": ..., "data": ...}}``.

    Raises:
        LlmError: ``MISSING_ATTACHMENT`` naming the attachment id when ``store``
            is ``None`` or lacks it.
    """
    media_type, data = image_data(block, store, provider=provider)
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": data},
    }
