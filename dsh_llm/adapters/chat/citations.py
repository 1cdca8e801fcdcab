"""The citations chat-completions services send beside the text, as ``Citation``
values for the translator (``dsh_llm.adapters.chat.translate``).

Pure (no I/O). What each service sends (``docs/citations-and-server-tools.md``):

- Perplexity (and xAI's Live Search): top-level ``citations`` (a list of URLs)
  and ``search_results`` (objects with ``url``, ``title``...), repeated on every
  chunk: kind ``url``, ``source_index`` the place in the list (the answer's
  ``[1]`` is index 0), the title from the search result of that place when
  both name the same URL.
- OpenAI's search models, OpenRouter's web plugin, xAI, Groq: ``annotations`` on
  the delta, each ``{"type": "url_citation", "url_citation": {url, title,
  content, start_index, end_index}}``: kind ``url_citation``, ``cited_text`` the
  page text OpenRouter quotes (``content``), ``text_start``/``text_end`` the
  indices into the message's text, made relative to the block they land on.
- Azure OpenAI "On Your Data": ``context.citations`` on the delta (``content``,
  ``title``, ``url``, ``filepath``): kind ``url``, ``filename`` the file path,
  ``cited_text`` the retrieved chunk; the answer's ``[doc1]`` is index 0.

``CitationLog`` keeps them deduplicated (a service repeats them on every chunk)
until a text block ends; the translator gives them to the writer once, at the
end of that block. Fields of another shape are passed over, never an error:
the names are common words a server may use for something else, and they were
ignored before.
"""

from __future__ import annotations

from typing import Any

import attrs

from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.protocol import Citation

_Key = tuple[object, ...]


def _text(value: object) -> str | None:
    return value if type(value) is str and value else None


def listed_citations(urls: object, results: object) -> list[Citation]:
    """Perplexity's ``citations`` and ``search_results`` as citations, by place."""
    url_list = urls if type(urls) is list else []
    result_list = results if type(results) is list else []
    cited: list[Citation] = []
    for index in range(max(len(url_list), len(result_list))):
        url = _text(url_list[index]) if index < len(url_list) else None
        result = result_list[index] if index < len(result_list) else None
        title = None
        if type(result) is dict:
            result_url = _text(result.get("url"))
            if url is None or result_url == url:
                url = url or result_url
                title = _text(result.get("title"))
        if url is not None or title is not None:
            cited.append(Citation(kind="url", url=url, title=title, source_index=index))
    return cited


def annotation_citations(annotations: object) -> list[Citation]:
    """A delta's ``url_citation`` annotations as citations (``text_start`` and
    ``text_end`` still indices into the message's text)."""
    if type(annotations) is not list:
        return []
    cited: list[Citation] = []
    for annotation in annotations:
        if type(annotation) is not dict or annotation.get("type") != "url_citation":
            continue
        inner = annotation.get("url_citation")
        if type(inner) is not dict:
            continue
        start = wire_count(inner.get("start_index"))
        end = wire_count(inner.get("end_index"))
        if start is not None and end is not None and end < start:
            start = end = None
        cited.append(
            Citation(
                kind="url_citation",
                url=_text(inner.get("url")),
                title=_text(inner.get("title")),
                cited_text=_text(inner.get("content")),
                text_start=start,
                text_end=end,
            )
        )
    return cited


def context_citations(context: object) -> list[Citation]:
    """Azure On Your Data's ``context.citations`` as citations, by place."""
    if type(context) is not dict:
        return []
    citations = context.get("citations")
    if type(citations) is not list:
        return []
    cited: list[Citation] = []
    for index, item in enumerate(citations):
        if type(item) is not dict:
            continue
        cited.append(
            Citation(
                kind="url",
                url=_text(item.get("url")),
                title=_text(item.get("title")),
                filename=_text(item.get("filepath")),
                cited_text=_text(item.get("content")),
                source_index=index,
            )
        )
    return cited


def _key(citation: Citation) -> _Key:
    return (
        citation.kind,
        citation.url,
        citation.title,
        citation.filename,
        citation.cited_text,
        citation.source_index,
        citation.text_start,
        citation.text_end,
    )


class CitationLog:
    """Citations waiting for the end of their text block, each kept once.

    ``add`` keeps the ones not seen before in this answer (a service repeats
    them on every chunk); ``take(start, length)`` returns the waiting ones for a
    text block whose first character is character ``start`` of the message's
    text and which holds ``length`` characters, a message-relative range moved
    into the block (a range outside it is left out: ``None``).
    """

    __slots__ = ("_seen", "_waiting")

    def __init__(self) -> None:
        self._seen: set[_Key] = set()
        self._waiting: list[Citation] = []

    def __bool__(self) -> bool:
        """Whether citations are waiting."""
        return bool(self._waiting)

    def add(self, citations: list[Citation]) -> None:
        """Keep the citations not seen before."""
        for citation in citations:
            key = _key(citation)
            if key not in self._seen:
                self._seen.add(key)
                self._waiting.append(citation)

    def take(self, start: int, length: int) -> list[Citation]:
        """The waiting citations, ranges relative to the block (class docstring)."""
        taken, self._waiting = self._waiting, []
        return [_moved(citation, start, length) for citation in taken]


def _moved(citation: Citation, start: int, length: int) -> Citation:
    first, last = citation.text_start, citation.text_end
    if first is None or last is None:
        return citation
    first, last = first - start, last - start
    if 0 <= first <= last <= length:
        return attrs.evolve(citation, text_start=first, text_end=last)
    return attrs.evolve(citation, text_start=None, text_end=None)


def payload_citations(payload: dict[str, Any]) -> list[Citation]:
    """The top-level citations of one chunk (Perplexity, xAI), ``[]`` without."""
    urls = payload.get("citations")
    results = payload.get("search_results")
    if urls is None and results is None:
        return []
    return listed_citations(urls, results)
