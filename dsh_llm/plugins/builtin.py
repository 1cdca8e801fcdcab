"""The built-in plugins: one per row of ``dsh_llm.adapters.BUILTIN_FAMILIES``.

Each is a ``BuiltinPlugin`` named by its entry point (``llm-anthropic``...), made
from its family's table row. Contracts callers may rely on:

- ``Config`` is the family's config class (camelCase keys, all optional) for a
  provider's own route (``deepseek-official``, ``anthropic``, ``gemini``,
  ``ollama``, ``bedrock``, ``azure``, ``vertex``); for a family any server speaks
  (``llm-openai-compatible``, ``llm-openai-responses``) it adds ``providers``
  (the routes to serve, required) and ``apiKey`` (write ``${VAR}``; or
  ``apiKeyEnv``, not both).
- ``apply`` builds the adapter with ``from_config`` and ``ctx.environ`` before
  registering anything, so a bad value (a bad ``*_BASE_URL`` variable included)
  fails the load keyed by its config key and nothing stays registered. Loading
  needs no key and does no I/O.
- Disposing the plugin unregisters the routes, then closes the adapter's pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import cast

import attrs

from dsh_llm.adapters import BUILTIN_FAMILIES
from dsh_llm.adapters import BuiltinFamily
from dsh_llm.config import PluginConfigError
from dsh_llm.credentials import Secret
from dsh_llm.credentials import normalize_api_key

if TYPE_CHECKING:
    from dsh_llm.plugins.context import PluginContext

__all__ = [
    "ANTHROPIC",
    "AZURE",
    "BEDROCK",
    "DEEPSEEK",
    "GEMINI",
    "OLLAMA",
    "OPENAI_COMPATIBLE",
    "OPENAI_RESPONSES",
    "PLUGINS",
    "VERTEX",
    "BuiltinPlugin",
]


def _routes(_: object, __: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if not value:
        raise PluginConfigError("providers", "must list at least one provider route")
    if any(route == "" for route in value):
        raise PluginConfigError("providers", "must not contain an empty route")
    if len(set(value)) != len(value):
        raise PluginConfigError("providers", "must not list a route twice")


_ROUTED: dict[type[Any], type[Any]] = {}


def _routed_config(base: type[Any]) -> type[Any]:
    """``base`` plus what only a composition entry says: the routes to serve
    (``providers``) and an explicit key (``apiKey``); made once per class."""
    made = _ROUTED.get(base)
    if made is not None:
        return made
    from dsh_llm.adapters import adapter_field_order

    name = base.__name__.removesuffix("Config") + "PluginConfig"
    made = _ROUTED[base] = attrs.make_class(
        name,
        {
            "providers": attrs.field(type=tuple[str, ...], validator=_routes),
            # cattrs reads a field's type to structure it (a string to Secret).
            "api_key": attrs.field(type=cast(type, Secret | None), default=None),
        },
        bases=(base,),
        frozen=True,
        kw_only=True,
        field_transformer=adapter_field_order,
    )
    return made


class BuiltinPlugin:
    """The plugin of one built-in family (see the module docstring)."""

    inject: Final = ("llm",)
    """Services the plugin needs."""

    def __init__(self, family: BuiltinFamily) -> None:
        self.family = family
        """The table row the plugin registers."""
        self.name = family.plugin
        """The plugin's label (its entry-point name)."""

    @property
    def Config(self) -> type[Any]:
        """The config class a composition entry is structured into (importing
        the family on first use)."""
        config = self.family.adapter_class().family.config_class
        return config if self.family.wire is None else _routed_config(config)

    def apply(self, ctx: PluginContext, config: Any) -> None:
        """Build the adapter from ``config`` and register it for its routes.

        Raises:
            PluginConfigError: naming the config key of an invalid value (a
                blank ``apiKey``, or one no header can carry, included).
        """
        cls = self.family.adapter_class()
        if config is None:
            config = self.Config()
        api_key: Secret | None = getattr(config, "api_key", None)
        if api_key is not None:
            checked = normalize_api_key(api_key.reveal())
            if not checked.ok:
                raise PluginConfigError(
                    "apiKey",
                    "is blank"
                    if checked.reason == "empty"
                    else "contains characters no HTTP header can carry",
                )
        adapter = cls.from_config(config, api_key=api_key, environ=ctx.environ)
        ctx.effect(adapter.close)
        routes = getattr(config, "providers", (self.family.route,))
        ctx.llm.register_adapter(list(routes), adapter)

    def __repr__(self) -> str:
        return f"BuiltinPlugin({self.name!r})"


PLUGINS: Final = {
    row.plugin: BuiltinPlugin(row) for row in BUILTIN_FAMILIES if row.service is None
}
"""Every built-in plugin by entry-point name."""
DEEPSEEK: Final = PLUGINS["llm-deepseek"]
"""``llm-deepseek``: ``DeepSeekAdapter`` on ``deepseek-official``."""
ANTHROPIC: Final = PLUGINS["llm-anthropic"]
"""``llm-anthropic``: ``AnthropicAdapter`` on ``anthropic``."""
GEMINI: Final = PLUGINS["llm-gemini"]
"""``llm-gemini``: ``GeminiAdapter`` on ``gemini``."""
OLLAMA: Final = PLUGINS["llm-ollama"]
"""``llm-ollama``: ``OllamaAdapter`` on ``ollama``."""
AZURE: Final = PLUGINS["llm-azure"]
"""``llm-azure``: ``AzureOpenAIAdapter`` on ``azure``."""
VERTEX: Final = PLUGINS["llm-vertex"]
"""``llm-vertex``: ``VertexAdapter`` on ``vertex``."""
BEDROCK: Final = PLUGINS["llm-bedrock"]
"""``llm-bedrock``: ``BedrockAdapter`` on ``bedrock``."""
OPENAI_COMPATIBLE: Final = PLUGINS["llm-openai-compatible"]
"""``llm-openai-compatible``: ``OpenAICompatAdapter`` on the entry's routes."""
OPENAI_RESPONSES: Final = PLUGINS["llm-openai-responses"]
"""``llm-openai-responses``: ``OpenAIResponsesAdapter`` on the entry's routes."""
