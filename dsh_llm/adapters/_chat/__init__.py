"""The chat-completions wire family, shared by ``DeepSeekAdapter`` and
``OpenAICompatAdapter``.

- ``request``: the server profile and the pure request body builder;
- ``translate``: the pure translator (chat-completion chunks in, protocol chunks out);
- ``finish``: finish reasons and usage mapping;
- ``base``: the adapter base class over the shared transport.
"""
