"""``BedrockAdapter``: models on Amazon Bedrock over the ConverseStream API.

- One route, ``bedrock``, displayed as ``Amazon Bedrock``; any model id or
  inference profile ARN; ``resolve_model`` needs no I/O.
- ``BedrockConfig`` is its one validated configuration (the constructor's
  keywords build it; ``from_config`` takes one); a bad value raises
  ``dsh_llm.adapters.AdapterConfigError`` keyed by its config key.
- Auth per request: a Bedrock API key (``api_key``, else
  ``AWS_BEARER_TOKEN_BEDROCK``) as a bearer token, else SigV4 signing with the
  AWS credential chain through botocore (``pip install 'dsh-llm[bedrock]'``).
  No credential or signature appears in a message or a ``repr``.
- The family's parts: ``family`` (config, endpoint, request hook, ``FAMILY``),
  ``request`` (pure builder), ``translate`` (pure translator), ``errors``,
  ``auth`` (SigV4), ``catalog`` (Claude ids). The binary event stream is
  decoded by ``dsh_llm.transport.eventstream``. User guide: ``docs/bedrock.md``.
"""

from __future__ import annotations

from dsh_llm.adapters._wire.adapter import WireAdapter
from dsh_llm.adapters.bedrock.family import DEFAULT_API_KEY_ENV
from dsh_llm.adapters.bedrock.family import FAMILY
from dsh_llm.adapters.bedrock.family import PROVIDER_ROUTE
from dsh_llm.adapters.bedrock.family import BedrockConfig

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "FAMILY",
    "PROVIDER_ROUTE",
    "BedrockAdapter",
    "BedrockConfig",
]


class BedrockAdapter(WireAdapter[BedrockConfig]):
    """Streams models on Amazon Bedrock over ConverseStream (see the module
    docstring).

    The keyword arguments are ``BedrockConfig``'s fields (``region``,
    ``profile``, ``api_key_env``, ``base_url``, ``reasoning_effort``,
    ``max_tokens``, ``default_context_window``, ``models``, the three stream
    timeouts, ``retry_policy``, ``pool_maxsize``, ``empty_response_as_stop``)
    and build one; ``BedrockAdapter.from_config(config)`` takes one built
    elsewhere.

    Args:
        api_key: A Bedrock API key (``str`` or ``Secret``), sent as a bearer
            token; ``None`` reads ``api_key_env`` at each request, and signs
            with the AWS credential chain when it is unset.
        environ: Where variables are read (default ``os.environ``, live).
            botocore reads the process environment itself.
        **options: ``BedrockConfig`` fields.

    Raises:
        AdapterConfigError: for an invalid option, or when no region is found.
    """

    family = FAMILY
