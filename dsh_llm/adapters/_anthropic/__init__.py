"""The Anthropic Messages wire family: request builder, translator, errors, catalog.

Each module is pure (no I/O); the adapter class glues them to the transport.

- ``request``: ``GenerateOptions`` to the ``POST /v1/messages`` body and headers;
  its refusals (``UNSUPPORTED_OPTION``, ``UNSUPPORTED_CONTENT``,
  ``MISSING_ATTACHMENT``, ``INVALID_REQUEST``, ``UNSUPPORTED_REASONING_EFFORT``)
  are raised there, before any I/O (whether a model takes images at all is the
  adapter's check, against its catalog); thinking blocks are replayed from this
  family's replay state.
- ``extras``: ``response_format`` as ``output_config.format`` and image blocks
  from the attachment store (used by ``request``).
- ``translate``: ``MessagesTranslator``, SSE events in, strict chunks out, with
  the ``ReplayEnvelope`` the request builder reads back.
- ``errors``: Anthropic ``error.type`` values (HTTP bodies and ``event: error``
  frames) to stable codes.
- ``catalog``: advisory facts about current Claude models (context window,
  output cap, how each one thinks).

User guide: ``docs/anthropic.md``.
"""
