"""The Gemini ``streamGenerateContent`` wire family (private; ``GeminiAdapter``
glues it to the transport).

Who owns what, each module pure:

- ``catalog``: the advertised models and the effort table (``thinkingLevel``
  for Gemini 3, ``thinkingBudget`` for Gemini 2.5).
- ``request``: the URL (``{base}/v1beta/models/{model}:streamGenerateContent
  ?alt=sse``), the key header (``x-goog-api-key``, never the URL) and the body
  (``response_format`` as ``responseJsonSchema``, ``extra_body`` last).
- ``images``: image blocks as ``inlineData`` parts (user turns, and Gemini 3
  function responses), bytes from the attachment store.
- ``translate``: ``GeminiTranslator``, SSE events in, protocol chunks out;
  usage and finish mapping.
- ``replay``: the replay envelope (thought signatures, Gemini's call ids,
  server-side parts) and how a request reads it back, only from Gemini answers.
- ``errors``: Google RPC error reports (HTTP or in-stream) to stable codes,
  ``retryDelay`` as the retry-after.

User guide: ``docs/gemini.md``.
"""
