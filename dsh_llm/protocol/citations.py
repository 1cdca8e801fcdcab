"""Citations and sources: where a piece of an answer's text comes from.

- ``Citation``: one location a provider says supports a piece of a text block
  (``TextDelta.citations``, ``TextBlock.citations``): a document's character,
  page or block range, a search result, a URL, a file, a grounding chunk.
- ``Source``: one result a server-side tool found (a web page, a file chunk),
  listed on a ``ServerToolResultBlock``.

Both are frozen, slotted, keyword-only attrs values; every field but
``Citation.kind`` is optional and left out of the JSON when ``None``. Ranges
are the provider's own (``start``/``end`` inside the source), except
``text_start``/``text_end``, which are Python string indices (code points) into
the text block, whatever unit the wire used.
"""

from __future__ import annotations

from typing import Final

import attrs

from dsh_llm.protocol import checks as c

__all__ = ["CITATION_KINDS", "Citation", "Source"]

CITATION_KINDS: Final = (
    "char_location",
    "page_location",
    "content_block_location",
    "search_result_location",
    "web_search_result_location",
    "url_citation",
    "file_citation",
    "container_file_citation",
    "file_path",
    "grounding",
    "url",
)
"""The location kinds a ``Citation`` may have: Anthropic's five (document
``char_location``, ``page_location``, ``content_block_location``,
``search_result_location``, ``web_search_result_location``), the Responses
API's annotations (``url_citation``, ``file_citation``,
``container_file_citation``, ``file_path``), Gemini's ``grounding`` and ``url``
(a chat service's plain URL list, e.g. Perplexity's ``citations``)."""

_text = c.optional(c.is_str)
_count = c.optional(c.non_negative_int)


@attrs.frozen(kw_only=True)
class Citation:
    """One location that supports a piece of a text block's text.

    Example::

        Citation(kind="url_citation", url="https://example.com/", title="Example",
                 text_start=0, text_end=11)
    """

    kind: str = attrs.field(validator=c.one_of(*CITATION_KINDS))
    """The provider's location kind, one of ``CITATION_KINDS``."""
    cited_text: str | None = attrs.field(default=None, validator=_text)
    """The quoted text of the source, when the provider gives it."""
    url: str | None = attrs.field(default=None, validator=_text)
    """The cited page's URL."""
    title: str | None = attrs.field(default=None, validator=_text)
    """The cited document's or page's title."""
    source_index: int | None = attrs.field(default=None, validator=_count)
    """The document, search-result or chunk index the provider gives."""
    file_id: str | None = attrs.field(default=None, validator=_text)
    """The cited file's id (a Responses file, an Anthropic Files API file)."""
    filename: str | None = attrs.field(default=None, validator=_text)
    """The cited file's name."""
    start: int | None = attrs.field(default=None, validator=_count)
    """Where the location starts inside the source (a char, page or block
    index, as the provider counts it)."""
    end: int | None = attrs.field(default=None, validator=_count)
    """Where the location ends inside the source (as the provider counts it)."""
    text_start: int | None = attrs.field(default=None, validator=_count)
    """Where the supported range of the block's own text starts (code points)."""
    text_end: int | None = attrs.field(default=None, validator=_count)
    """Where the supported range of the block's own text ends (code points,
    exclusive)."""
    encrypted_index: str | None = attrs.field(default=None, validator=_text)
    """Anthropic web search's opaque reference, needed to send the citation back."""


@attrs.frozen(kw_only=True)
class Source:
    """One result a server-side tool found: a web page, a file chunk."""

    url: str | None = attrs.field(default=None, validator=_text)
    """The page's URL."""
    title: str | None = attrs.field(default=None, validator=_text)
    """The page's or document's title."""
    file_id: str | None = attrs.field(default=None, validator=_text)
    """A file result's id."""
    filename: str | None = attrs.field(default=None, validator=_text)
    """A file result's name."""
    snippet: str | None = attrs.field(default=None, validator=_text)
    """A piece of the result's text, when the provider gives one."""
    page_age: str | None = attrs.field(default=None, validator=_text)
    """How old the page is, as the provider words it (``"2 days ago"``)."""
    score: float | None = attrs.field(
        default=None, validator=c.optional(c.finite_number)
    )
    """The provider's relevance score."""
