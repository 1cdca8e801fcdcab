"""The Ollama native ``/api/chat`` wire family (private; ``OllamaAdapter`` glues
it to the transport).

Who owns what, each module pure:

- ``request``: the ``/api/chat`` body (``stream: true``, messages with tool
  results as ``tool`` messages naming the tool, ``think`` from the effort,
  ``options``, ``keep_alive``).
- ``translate``: ``OllamaTranslator``, one decoded NDJSON line in (the
  transport's ``dsh_llm.transport.ndjson.NdjsonDecoder`` frames the body),
  protocol chunks out; usage and finish mapping.
- ``errors``: ``{"error": "..."}`` reports, as an HTTP body or a stream line,
  to stable codes.

User guide: ``docs/ollama.md``.
"""
