"""``AzureOpenAIAdapter``: models deployed on Azure OpenAI, over chat
completions or the Responses API.

- One route, ``azure``, displayed as ``Azure OpenAI``; a call's model id is its
  deployment's name (or a catalog id mapped to one); ``resolve_model`` needs no
  I/O.
- Built like every family's adapter (``dsh_llm.adapters``): the constructor's
  keywords are ``AzureOpenAIConfig``'s fields, ``from_config`` takes one.
- The v1 API (``https://<resource>.openai.azure.com/openai/v1``) by default;
  the deployment paths with ``api_version``.
- Auth per request: the API key (``api_key``, else ``AZURE_OPENAI_API_KEY``) in
  the ``api-key`` header, else a Microsoft Entra ID token through azure-identity
  (``pip install 'dsh-llm[azure]'``), refreshed before it expires. No key or
  token appears in a message or a ``repr``.
- The family's parts: ``family`` (config, endpoint, request hook, ``FAMILY``),
  ``request`` (URLs and the body, pure), ``auth`` (Entra ID tokens),
  ``errors``; the translators are the chat-completions and Responses wires'
  own. User guide: ``docs/azure.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from typing import Self

import attrs

from dsh_llm.adapters._wire.adapter import WireAdapter
from dsh_llm.adapters._wire.config import AdapterConfigError
from dsh_llm.adapters.azure.auth import EntraIdTokens
from dsh_llm.adapters.azure.family import DEFAULT_API_KEY_ENV
from dsh_llm.adapters.azure.family import ENDPOINT_ENV
from dsh_llm.adapters.azure.family import FAMILY
from dsh_llm.adapters.azure.family import PACKAGE
from dsh_llm.adapters.azure.family import PROVIDER_ROUTE
from dsh_llm.adapters.azure.family import AzureModel
from dsh_llm.adapters.azure.family import AzureOpenAIConfig
from dsh_llm.adapters.azure.family import AzureProfile
from dsh_llm.credentials import Secret

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "ENDPOINT_ENV",
    "FAMILY",
    "PROVIDER_ROUTE",
    "AzureModel",
    "AzureOpenAIAdapter",
    "AzureOpenAIConfig",
]


class AzureOpenAIAdapter(WireAdapter[AzureOpenAIConfig]):
    """Streams models deployed on Azure OpenAI (see the module docstring);
    ``WireAdapter``'s arguments, the keywords building an ``AzureOpenAIConfig``.

    Args:
        api_key: The API key; ``None`` reads ``api_key_env`` at each request,
            and uses an Entra ID token when it is unset (``auth: auto``).
        credential: An azure-core ``TokenCredential`` (``ClientSecretCredential``,
            ``ManagedIdentityCredential``...) to get Entra ID tokens from, instead
            of a ``DefaultAzureCredential``; requests then carry its tokens. The
            caller closes it.
        environ: Where variables are read; azure-identity reads the process
            environment itself.

    Raises:
        AdapterConfigError: also for no endpoint, or a credential given two ways.
    """

    family = FAMILY

    def __init__(
        self,
        api_key: str | Secret | None = None,
        *,
        credential: Any = None,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(api_key, environ=environ, **options)
        if credential is not None:
            self._use_credential(credential, api_key)

    @classmethod
    def from_config(
        cls,
        config: AzureOpenAIConfig,
        *,
        api_key: str | Secret | None = None,
        credential: Any = None,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """An adapter over ``config`` (built and checked beforehand, e.g. by the
        ``llm-azure`` plugin from YAML); ``credential`` as in the constructor.

        Raises:
            TypeError: for a ``config`` of another class.
            AdapterConfigError: for what only the adapter can check (no
                endpoint, a credential given two ways).
        """
        adapter = super().from_config(config, api_key=api_key, environ=environ)
        if credential is not None:
            adapter._use_credential(credential, api_key)
        return adapter

    def _use_credential(self, credential: Any, api_key: str | Secret | None) -> None:
        config = self._config
        if api_key is not None:
            raise AdapterConfigError(
                "apiKey", "and credential cannot both be given", package=PACKAGE
            )
        if config.auth == "api-key":
            raise AdapterConfigError(
                "auth",
                "is api-key, which sends no Entra ID token: drop the credential "
                "or set auth to entra-id",
                package=PACKAGE,
            )
        if not callable(getattr(credential, "get_token", None)):
            raise TypeError(
                "credential must be an azure-core TokenCredential (with get_token), "
                f"got {type(credential).__name__}"
            )
        profile: AzureProfile = self._endpoint.profile
        tokens = EntraIdTokens(credential, scope=config.token_scope, package=PACKAGE)
        self._endpoint = attrs.evolve(
            self._endpoint,
            profile=attrs.evolve(profile, auth="entra-id", tokens=tokens),
        )

    def close(self) -> None:
        """Close the connection pool and an Entra ID credential the adapter made
        (not one it was given); the adapter stays usable (see
        ``WireAdapter.close``)."""
        super().close()
        profile: AzureProfile = self._endpoint.profile
        if profile.tokens is not None:
            profile.tokens.close()
