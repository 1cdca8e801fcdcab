"""The OpenAI Responses API wire family (``POST /v1/responses``, streamed).

One family, five servers (OpenAI, vLLM, Ollama, LM Studio, OpenRouter); the
adapter class glues these pure parts to the shared transport:

- ``profiles``: ``ResponsesProfile`` per server and ``guess_server(base_url)``.
- ``request``: ``build_responses_request``, the stateless body, refusals
  before I/O, and the replay of reasoning items from ``ReplayEnvelope``.
- ``translate``: ``ResponsesTranslator``, events in, strict chunks out, keyed
  by ``item_id``; ``finish``: the terminal usage and finish mapping.
- ``errors``: in-stream Responses failures (``response.failed``, ``error``
  events) to stable codes; HTTP bodies are the transport's.

Nothing here does I/O. The read loop decodes the body with
``SseDecoder(terminal_data=None)`` (the wire has no required end marker), feeds
each event to the translator and stops reading once it is ``finished``.
``docs/openai-responses.md`` describes the servers.
"""
