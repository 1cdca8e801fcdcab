"""Plugins and YAML compositions: how adapters get into an ``LlmRuntime`` from config.

- ``loader``: ``load_composition`` and ``resolve_plugin`` (entry points, files);
- ``config``: the one strict mechanism that structures YAML into config classes;
- ``context``: what a plugin's ``apply`` receives (a scoped runtime, the signal);
- ``builtin``: the built-in plugins, one per row of
  ``dsh_llm.adapters.BUILTIN_FAMILIES`` (entry points ``llm-deepseek``,
  ``llm-anthropic``, ``llm-gemini``, ``llm-ollama``, ``llm-bedrock``,
  ``llm-openai-compatible``, ``llm-openai-responses``).

``docs/plugins.md`` documents the composition file and the plugin contract.
"""

from __future__ import annotations

from dsh_llm.config import KEY_METADATA
from dsh_llm.config import PluginConfigError
from dsh_llm.plugins.context import Plugin
from dsh_llm.plugins.context import PluginContext
from dsh_llm.plugins.context import ScopedLlmRuntime
from dsh_llm.plugins.loader import PLUGIN_GROUP
from dsh_llm.plugins.loader import Composition
from dsh_llm.plugins.loader import LoadedPlugin
from dsh_llm.plugins.loader import PluginLoadError
from dsh_llm.plugins.loader import load_composition
from dsh_llm.plugins.loader import resolve_plugin

__all__ = [
    "KEY_METADATA",
    "PLUGIN_GROUP",
    "Composition",
    "LoadedPlugin",
    "Plugin",
    "PluginConfigError",
    "PluginContext",
    "PluginLoadError",
    "ScopedLlmRuntime",
    "load_composition",
    "resolve_plugin",
]
