"""The chat-completions wire, shared by its two families: ``DeepSeekAdapter``
(``dsh_llm.adapters.deepseek``) and ``OpenAICompatAdapter``
(``dsh_llm.adapters.openai_compat``), each a ``WireFamily`` over these parts.

- ``request``: the ``WireProfile`` (how servers differ), the pure body builder,
  and the one ``POST <base_url>/chat/completions`` request of a call;
- ``translate``: the pure translator and the family hooks that build it;
- ``finish``: usage and finish-reason mapping; ``images``: ``image_url`` parts;
- ``services``: the hosted services' named profiles (``OpenAICompatAdapter``'s
  ``service=``).
"""
