"""``ChunkStream``: a call's chunks, with the options that asked for them and
what the response said about itself.

``WireAdapter.stream`` and ``LlmRuntime.stream`` return one, so whoever
assembles the stream (``dsh_llm.collect``) knows which route and model answered
and can keep the reply's replay state for the next turn.

- Iterating it iterates the call's own generator (``iter(stream)`` gives that
  generator: no extra hop per chunk); ``next(stream)`` works too.
- ``close()`` closes the call (its response, its adapter).
- ``options`` are the request as the caller gave it.
- ``response`` is ``None`` until the response headers arrived (at the latest
  before the first chunk), then a ``ResponseInfo`` (request id, rate limits);
  ``rate_limits`` reads it. Any thread may read them while another iterates.
  A runtime stream shows the response of the adapter call that served it
  (the latest one, when a middleware called the next stage again).
"""

from __future__ import annotations

from collections.abc import Generator
from collections.abc import Iterator

import attrs

from dsh_llm.protocol import checks as c
from dsh_llm.protocol.chunks import StreamChunk
from dsh_llm.protocol.ratelimits import RateLimits
from dsh_llm.protocol.request import GenerateOptions


@attrs.frozen(kw_only=True)
class ResponseInfo:
    """What a 2xx response said about itself in its headers."""

    request_id: str | None = attrs.field(
        default=None, validator=c.optional(c.non_empty_str)
    )
    """The provider's request id (secrets of the request redacted), when sent."""
    rate_limits: RateLimits | None = attrs.field(
        default=None, validator=c.optional(c.instance_of(RateLimits))
    )
    """The rate limits the headers reported, when they reported any."""


class StreamMetadata:
    """The cell a stream's producer writes its ``ResponseInfo`` into once the
    headers arrived; readable from any thread (one reference, set once per
    response)."""

    __slots__ = ("_response", "_source")

    def __init__(self) -> None:
        self._response: ResponseInfo | None = None
        self._source: StreamMetadata | None = None

    @property
    def response(self) -> ResponseInfo | None:
        """The response's facts, ``None`` until its headers arrived."""
        source = self._source
        return self._response if source is None else source.response

    def received(self, info: ResponseInfo) -> None:
        """The producer's headers arrived: ``info`` is what they said."""
        self._source = None
        self._response = info

    def follow(self, other: StreamMetadata) -> None:
        """From now on, show what ``other`` shows (a runtime stream served by an
        adapter's stream)."""
        if other is not self:
            self._source = other


class ChunkStream(Iterator[StreamChunk]):
    """A call's chunks, its ``options`` and its response's facts (see the
    module docstring)."""

    __slots__ = ("_chunks", "metadata", "options")

    def __init__(
        self,
        chunks: Generator[StreamChunk, None, None],
        options: GenerateOptions,
        metadata: StreamMetadata | None = None,
    ) -> None:
        self._chunks = chunks
        self.options = options
        """The request the chunks answer."""
        self.metadata = StreamMetadata() if metadata is None else metadata
        """Where the producer writes what the response said (``response``
        reads it)."""

    @property
    def response(self) -> ResponseInfo | None:
        """What the response said about itself, ``None`` until its headers
        arrived (or when the producer reports nothing)."""
        return self.metadata.response

    @property
    def rate_limits(self) -> RateLimits | None:
        """The rate limits the response reported, ``None`` until its headers
        arrived or when it reported none."""
        response = self.metadata.response
        return None if response is None else response.rate_limits

    def __iter__(self) -> Iterator[StreamChunk]:
        return self._chunks

    def __next__(self) -> StreamChunk:
        return next(self._chunks)

    def close(self) -> None:
        """Stop the call: its response and iterators are closed."""
        self._chunks.close()

    def __repr__(self) -> str:
        return (
            f"<ChunkStream provider={self.options.provider!r} "
            f"model={self.options.model!r}>"
        )
