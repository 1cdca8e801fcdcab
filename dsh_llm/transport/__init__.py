"""The HTTP transport every remote adapter shares.

Modules, each owning one concept:

- ``session``: the pooled ``requests.Session`` factory, request headers
  (attribution, ``accept-encoding: identity``), ``BearerAuth``/``ApiKeyAuth``,
  and socket capture for cancellation.
- ``call``: ``StreamingCall``, one streaming request from send to close (status
  check, reads as bytes arrive, watchdog, cancellation, failure classification).
- ``fetch``: one bounded request whose answer is a document (a model list):
  one deadline for the whole request, the abort signal, a size cap.
- ``chunked``: HTTP/1.1 chunked bodies decoded many chunks per read.
- ``watchdog``: the idle / keep-alive / total deadlines (pure).
- ``sse``: server-sent events (sseclient-py plus a conformance shim).
- ``ndjson``: newline-delimited JSON bodies.
- ``http_errors``: provider error reports (HTTP or in-stream) to ``LlmError``.
- ``errors_map``: the one table from HTTP-stack exceptions to error codes.
- ``redaction``: a request's secrets (key, secret-named headers, URL
  credentials) kept out of the errors built from a server's answer.

Adapters import from these modules directly; this package re-exports nothing, so
the wire helpers stay off the library's top level.
"""
