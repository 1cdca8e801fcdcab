"""``BedrockAdapter``: models on Amazon Bedrock over the ConverseStream API.

- One route, ``bedrock``, displayed as ``Amazon Bedrock``; any model id or
  inference profile ARN; ``resolve_model`` needs no I/O.
- Built like every family's adapter (``dsh_llm.adapters``): the constructor's
  keywords are ``BedrockConfig``'s fields, ``from_config`` takes one.
- Auth per request: a Bedrock API key (``api_key``, else
  ``AWS_BEARER_TOKEN_BEDROCK``) as a bearer token, else SigV4 signing with the
  AWS credential chain through botocore (``pip install 'dsh-llm[bedrock]'``).
  No credential or signature appears in a message or a ``repr``.
- Beyond every family's parts: ``auth`` (SigV4); ``catalog`` reads Claude ids;
  the binary event stream is decoded by ``dsh_llm.transport.eventstream``.
  User guide: ``docs/bedrock.md``.
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
    docstring); ``WireAdapter``'s arguments, the keywords building a
    ``BedrockConfig``.

    Args:
        api_key: A Bedrock API key, sent as a bearer token; ``None`` reads
            ``api_key_env`` at each request, and signs with the AWS credential
            chain when it is unset (botocore reads the process environment
            itself, not ``environ``).

    Raises:
        AdapterConfigError: for an invalid option, or when no region is found.
    """

    family = FAMILY
