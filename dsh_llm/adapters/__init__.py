"""Provider adapters, one module per wire family.

Import an adapter from its module, e.g.
``from dsh_llm.adapters.deepseek import DeepSeekAdapter``. Modules whose name
starts with ``_`` (``_openai_wire``, ``_openai_translator``, ``_openai_finish``,
``_chat_adapter``) hold code shared by several adapters and are not part of the
public API. Each ``*_plugin`` module is the plugin that
registers its adapter from a composition (entry-point group ``dsh_llm.plugins``).
"""
