"""Observability middleware: logging, OpenTelemetry spans and cost.

- ``dsh_llm.observe.logging``: one INFO line per call (core, no dependency).
- ``dsh_llm.observe.cost``: a user-supplied price table turning usage into a
  cost; an unknown price is ``None``, never a guess (core, no dependency).
- ``dsh_llm.observe.otel``: OpenTelemetry GenAI spans, for the optional extra
  ``pip install 'dsh-llm[otel]'``. Nothing else imports it, so the core never
  imports OpenTelemetry.
- ``dsh_llm.observe.watch``: what all three are built on, ``watch_stream``,
  which reports one ``CallRecord`` when a stream ends however it ends.

Add them with ``runtime.use(...)`` after ``dsh_llm.routing``'s middleware to
observe every attempt, or before it to observe the consumer's call as one.
"""
