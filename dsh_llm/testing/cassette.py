"""Cassettes: one recorded HTTP exchange, with the arrival time of every body read.

A cassette is what ``dsh_llm.testing.recorder`` writes and
``dsh_llm.testing.replay`` plays back (``docs/cassettes.md`` documents the file).
Contracts callers may rely on:

- The file is UTF-8 JSON Lines, one object per line, so a diff shows one read per
  line: a header ``{"dshCassette": 1, ...}``, then ``request``, ``response``, one
  ``read`` per body read as it arrived, and a final ``end``. ``FORMAT_VERSION``
  is the only version read; a file of another version is refused, never guessed.
- Bodies are stored as ``{"text": ...}`` when they are valid UTF-8 (``café``
  stays ``café``) and as ``{"base64": ...}`` otherwise (a read that splits a
  multi-byte character, a binary body), so every byte round-trips exactly.
- ``Cassette.load``/``loads`` are strict: an unknown key, a missing or mistyped
  field, a line out of order or a second header raises ``LlmError`` with code
  ``INVALID_CASSETTE`` naming the file, the line and the key path
  (``line 4: $.read.atMs: must be a number >= 0``). Nothing else escapes, however
  hostile the file (a number of thousands of digits, nesting 100,000 deep), and
  a message quotes at most ``_SHOWN`` characters of a value.
- ``redact_exchange`` (applied by the recorder before anything is written)
  replaces the values of secret-named headers (``authorization``, ``x-api-key``,
  ``x-goog-api-key``, ``api-key``, ``cookie``, ``set-cookie``...), secret query
  parameters and URL credentials with ``***``, and every other occurrence of a
  secret (the key echoed in a response header or body) wherever it appears, even
  across two reads (which are then merged into one).
- Values are frozen ``attrs`` classes; ``dumps(loads(text)) == text`` for any
  file this module wrote.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import urllib.parse
from collections.abc import Iterable
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import Final
from typing import Literal
from typing import TypeAlias

import attrs

from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.redaction import REDACTED
from dsh_llm.transport.redaction import Redactor
from dsh_llm.transport.redaction import is_secret_name

__all__ = [
    "FORMAT_VERSION",
    "BodyRead",
    "Cassette",
    "CassetteRequest",
    "CassetteResponse",
    "Ended",
    "Framing",
    "redact_exchange",
]

FORMAT_VERSION: Final = 1
"""The cassette format version this module reads and writes."""

Framing: TypeAlias = Literal["chunked", "length", "close"]
"""How the recorded response body was delimited (as ``LoopbackServer`` names it)."""
Ended: TypeAlias = Literal["complete", "cut", "client-closed"]
"""How the body ended: the upstream finished it, the upstream connection broke
mid-body, or the client stopped reading (an abort) before the end."""

_FRAMINGS: Final = ("chunked", "length", "close")
_ENDINGS: Final = ("complete", "cut", "client-closed")

Headers: TypeAlias = tuple[tuple[str, str], ...]


def _headers(value: Mapping[str, str] | Iterable[tuple[str, str]]) -> Headers:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple((str(k), str(v)) for k, v in items)


def _reads(value: Iterable[BodyRead]) -> tuple[BodyRead, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class BodyRead:
    """One read of the response body, as it arrived."""

    at_ms: float
    """Milliseconds from sending the request to this read's arrival."""
    data: bytes
    """The bytes the read returned (never empty in a recorded file)."""


@attrs.frozen(kw_only=True)
class CassetteRequest:
    """The request as the client sent it (secrets redacted)."""

    method: str
    """``POST``, ``GET``..."""
    url: str
    """The upstream URL the request went to."""
    headers: Headers = attrs.field(default=(), converter=_headers)
    """Header names lower-cased, in the order sent."""
    body: bytes = b""
    """The request body."""

    def json(self) -> Any:
        """The body parsed as JSON, or ``None`` when it is not JSON (or cannot
        be read: nested too deeply, a number too long)."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None


@attrs.frozen(kw_only=True)
class CassetteResponse:
    """The response: its head, every body read and how the body ended."""

    status: int
    """The HTTP status."""
    reason: str = "OK"
    """The reason phrase."""
    headers: Headers = attrs.field(default=(), converter=_headers)
    """Header names lower-cased; framing headers (``transfer-encoding``,
    ``content-length``, ``connection``, ``content-encoding``) are left out,
    ``framing`` says how the body was delimited."""
    at_ms: float = 0.0
    """Milliseconds from sending the request to the response head's arrival."""
    framing: Framing = "chunked"
    """How the body was delimited."""
    reads: tuple[BodyRead, ...] = attrs.field(default=(), converter=_reads)
    """Every body read, in arrival order."""
    ended: Ended = "complete"
    """How the body ended."""
    end_ms: float | None = None
    """Milliseconds from sending the request to the end of the body, if known."""

    @property
    def body(self) -> bytes:
        """All the body bytes, joined."""
        return b"".join(read.data for read in self.reads)

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None


@attrs.frozen(kw_only=True)
class Cassette:
    """One recorded HTTP exchange (see the module docstring)."""

    request: CassetteRequest
    """What was sent."""
    response: CassetteResponse
    """What came back."""
    base_path: str = ""
    """The path of the API root the adapter was given (``/v1`` for
    ``http://host/v1``); replay points the adapter at the server's URL plus it."""
    adapter: str | None = None
    """The adapter that made the call, as ``module:Class``, when known."""

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """Read the cassette file at ``path``.

        Raises:
            LlmError: ``INVALID_CASSETTE`` when the file cannot be read or is not
                a valid cassette (the message names the path, line and key).
        """
        name = str(path)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise LlmError(
                f"cannot read cassette {name}: {exc.strerror or exc}",
                ErrorCode.INVALID_CASSETTE,
            ) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid(name, None, "$", "the file is not UTF-8") from None
        return cls.loads(text, name=name)

    @classmethod
    def loads(cls, text: str, *, name: str = "<cassette>") -> Cassette:
        """Parse cassette ``text``; ``name`` is how messages name the source.

        Raises:
            LlmError: ``INVALID_CASSETTE`` (see ``load``).
        """
        return _parse(text, name)

    def dumps(self) -> str:
        """The cassette as file text (UTF-8 JSON Lines, ending in a newline)."""
        header: dict[str, Any] = {"dshCassette": FORMAT_VERSION}
        if self.base_path:
            header["basePath"] = self.base_path
        if self.adapter is not None:
            header["adapter"] = self.adapter
        req, resp = self.request, self.response
        lines: list[dict[str, Any]] = [
            header,
            {
                "request": {
                    "method": req.method,
                    "url": req.url,
                    "headers": [list(pair) for pair in req.headers],
                    "body": _encode_body(req.body),
                }
            },
            {
                "response": {
                    "atMs": resp.at_ms,
                    "status": resp.status,
                    "reason": resp.reason,
                    "framing": resp.framing,
                    "headers": [list(pair) for pair in resp.headers],
                }
            },
        ]
        lines.extend(
            {"read": {"atMs": read.at_ms, **_encode_body(read.data)}}
            for read in resp.reads
        )
        end: dict[str, Any] = {"ended": resp.ended}
        if resp.end_ms is not None:
            end["atMs"] = resp.end_ms
        lines.append({"end": end})
        return "".join(
            json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
            for line in lines
        )

    def dump(self, path: str | Path) -> None:
        """Write the cassette to ``path`` (UTF-8, ``\\n`` line ends)."""
        Path(path).write_text(self.dumps(), encoding="utf-8", newline="\n")


# --- writing -------------------------------------------------------------------------


def _encode_body(data: bytes) -> dict[str, str]:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


# --- reading -------------------------------------------------------------------------


class _Invalid(Exception):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem


def _invalid(name: str, line: int | None, path: str, problem: str) -> LlmError:
    where = f"{name}: " if line is None else f"{name}: line {line}: "
    return LlmError(
        f"invalid cassette {where}{path}: {problem}", ErrorCode.INVALID_CASSETTE
    )


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _object(
    value: Any, path: str, keys: Iterable[str], required: Iterable[str]
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(path, f"must be an object, got {_kind(value)}")
    allowed = set(keys)
    for key in value:
        if key not in allowed:
            raise _Invalid(f"{path}.{key}", "unknown key")
    for key in required:
        if key not in value:
            raise _Invalid(f"{path}.{key}", "missing")
    return value


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _Invalid(path, f"must be a string, got {_kind(value)}")
    return value


_SHOWN: Final = 40
"""The most characters of a value a message quotes."""


def _shown(value: Any) -> str:
    """``value`` as JSON for a message, cut to ``_SHOWN`` characters."""
    if isinstance(value, int) and not isinstance(value, bool):
        text = str(value) if value.bit_length() < 128 else "a very long number"
    elif isinstance(value, dict | list):
        text = _kind(value)  # containers are named, never dumped
    else:
        text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _ms(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Invalid(path, f"must be a number >= 0, got {_shown(value)}")
    try:
        ms = float(value)
    except OverflowError:  # an integer beyond the float range
        ms = math.inf
    if not math.isfinite(ms) or ms < 0:
        raise _Invalid(path, f"must be a number >= 0, got {_shown(value)}")
    return ms


def _choice(value: Any, path: str, choices: tuple[str, ...]) -> Any:
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(choices)
        raise _Invalid(path, f"must be one of {listed}, got {_shown(value)}")
    return value


def _header_list(value: Any, path: str) -> Headers:
    if not isinstance(value, list):
        raise _Invalid(path, f"must be an array, got {_kind(value)}")
    pairs: list[tuple[str, str]] = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not all(isinstance(part, str) for part in item)
        ):
            raise _Invalid(where, "must be a [name, value] pair of strings")
        pairs.append((item[0], item[1]))
    return tuple(pairs)


def _body(value: dict[str, Any], path: str) -> bytes:
    has_text, has_b64 = "text" in value, "base64" in value
    if has_text == has_b64:
        raise _Invalid(path, 'needs exactly one of "text" and "base64"')
    if has_text:
        text = _str(value["text"], f"{path}.text")
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            raise _Invalid(
                f"{path}.text",
                "holds a lone surrogate; bytes that are not UTF-8 go in base64",
            ) from None
    encoded = _str(value["base64"], f"{path}.base64")
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise _Invalid(f"{path}.base64", "is not valid base64") from None


def _parse(text: str, name: str) -> Cassette:
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if not lines:
        raise _invalid(name, None, "$", "the file is empty")
    values: list[tuple[int, Any]] = []
    for number, line in lines:
        try:
            values.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise _invalid(name, number, "$", f"not JSON ({exc.msg})") from None
        except ValueError:  # a number beyond the interpreter's digit limit
            raise _invalid(
                name, number, "$", "holds a number too long to read"
            ) from None
        except RecursionError:
            raise _invalid(name, number, "$", "is nested too deeply") from None
    cursor = _Cursor(values[0][0])
    try:
        return _build(values, cursor)
    except _Invalid as exc:
        raise _invalid(name, cursor.line, exc.path, exc.problem) from None
    except RecursionError:
        raise _invalid(name, cursor.line, "$", "is nested too deeply") from None
    except Exception as exc:  # whatever else a hostile value makes a check raise
        raise _invalid(
            name, cursor.line, "$", f"cannot be read ({type(exc).__name__})"
        ) from None


class _Cursor:
    """The line being read, for messages."""

    __slots__ = ("line",)

    def __init__(self, line: int) -> None:
        self.line = line

    def __call__(self, line: int) -> None:
        self.line = line


# The keys of a request and of a response line, all required.
_REQUEST_KEYS: Final = ("method", "url", "headers", "body")
_RESPONSE_KEYS: Final = ("atMs", "status", "reason", "framing", "headers")


def _line(
    entry: tuple[int, Any],
    at: _Cursor,
    key: str,
    keys: tuple[str, ...],
    required: tuple[str, ...],
    *,
    expected: str | None = None,
) -> dict[str, Any]:
    # The object of the line ``{key: {...}}`` (numbered ``entry[0]``), its keys
    # checked; ``expected`` tells a line that is not such an object (by
    # default ``_object`` says what is wrong with it).
    number, line = entry
    at(number)
    if expected is not None and (not isinstance(line, dict) or key not in line):
        raise _Invalid("$", expected)
    line = _object(line, "$", (key,), (key,))
    return _object(line[key], f"$.{key}", keys, required)


def _build(values: list[tuple[int, Any]], at: _Cursor) -> Cassette:
    number, header = values[0]
    at(number)
    if not isinstance(header, dict) or "dshCassette" not in header:
        raise _Invalid("$", 'the first line must be the header {"dshCassette": 1}')
    header = _object(
        header, "$", ("dshCassette", "basePath", "adapter"), ("dshCassette",)
    )
    version = header["dshCassette"]
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise _Invalid(
            "$.dshCassette",
            f"unsupported version {_shown(version)} (this library reads "
            f"{FORMAT_VERSION})",
        )
    base_path = _str(header.get("basePath", ""), "$.basePath")
    adapter = header.get("adapter")
    if adapter is not None:
        adapter = _str(adapter, "$.adapter")
    if len(values) < 4:
        at(values[-1][0])
        raise _Invalid("$", "a cassette needs request, response and end lines")

    raw = _line(values[1], at, "request", _REQUEST_KEYS, _REQUEST_KEYS)
    request = CassetteRequest(
        method=_str(raw["method"], "$.request.method"),
        url=_str(raw["url"], "$.request.url"),
        headers=_header_list(raw["headers"], "$.request.headers"),
        body=_body(
            _object(raw["body"], "$.request.body", ("text", "base64"), ()),
            "$.request.body",
        ),
    )

    raw = _line(values[2], at, "response", _RESPONSE_KEYS, _RESPONSE_KEYS)
    status = raw["status"]
    if (
        isinstance(status, bool)
        or not isinstance(status, int)
        or not 100 <= status <= 599
    ):
        raise _Invalid(
            "$.response.status", f"must be an integer 100..599, got {_shown(status)}"
        )
    head = {
        "at_ms": _ms(raw["atMs"], "$.response.atMs"),
        "status": status,
        "reason": _str(raw["reason"], "$.response.reason"),
        "framing": _choice(raw["framing"], "$.response.framing", _FRAMINGS),
        "headers": _header_list(raw["headers"], "$.response.headers"),
    }

    reads: list[BodyRead] = []
    last_ms = head["at_ms"]
    for entry in values[3:-1]:
        raw = _line(
            entry,
            at,
            "read",
            ("atMs", "text", "base64"),
            ("atMs",),
            expected='expected a "read" line (only the last line is "end")',
        )
        at_ms = _ms(raw["atMs"], "$.read.atMs")
        if at_ms < last_ms:
            raise _Invalid("$.read.atMs", f"goes back in time ({at_ms} < {last_ms})")
        data = _body(raw, "$.read")
        if not data:
            raise _Invalid("$.read", "an empty read")
        reads.append(BodyRead(at_ms=at_ms, data=data))
        last_ms = at_ms

    raw = _line(
        values[-1],
        at,
        "end",
        ("ended", "atMs"),
        ("ended",),
        expected='the last line must be "end"',
    )
    end_ms = None if "atMs" not in raw else _ms(raw["atMs"], "$.end.atMs")
    response = CassetteResponse(
        **head,
        reads=tuple(reads),
        ended=_choice(raw["ended"], "$.end.ended", _ENDINGS),
        end_ms=end_ms,
    )
    return Cassette(
        request=request, response=response, base_path=base_path, adapter=adapter
    )


# --- redaction -----------------------------------------------------------------------

# Headers always treated as secret, beyond ``is_secret_name``'s rule.
_ALWAYS_SECRET: Final = frozenset({"x-goog-api-key", "cookie", "set-cookie"})
# How far around a read boundary a secret split across two reads is looked for.
_SEAM: Final = 512


def _secret_header(name: str) -> bool:
    return name.lower() in _ALWAYS_SECRET or is_secret_name(name)


def _request_secrets(
    url: str, headers: Headers, secrets: Iterable[str | Secret]
) -> list[str]:
    found = [s.reveal() if isinstance(s, Secret) else s for s in secrets]
    for name, value in headers:
        if _secret_header(name):
            found.append(value)
            found.extend(value.split())
    try:
        parts = urllib.parse.urlsplit(url)
        found.extend(v for v in (parts.username, parts.password) if v)
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        query = []
    found.extend(value for key, value in query if is_secret_name(key))
    # A key in a URL (or echoed from one) is percent-encoded: look for that too.
    encoded = [
        spelling
        for secret in found
        for spelling in (
            urllib.parse.quote(secret, safe=""),
            urllib.parse.quote_plus(secret, safe=""),
        )
    ]
    return [s for s in (*found, *encoded) if s]


def _redact_url(url: str, redact: Redactor) -> str:
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return redact(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    # Each value decoded, so a secret is found under any parameter name.
    query = urllib.parse.urlencode(
        [
            (key, REDACTED if is_secret_name(key) else redact(value))
            for key, value in urllib.parse.parse_qsl(
                parts.query, keep_blank_values=True
            )
        ],
        safe="*",
    )
    rebuilt = urllib.parse.urlunsplit(
        (parts.scheme, netloc, parts.path, query if parts.query else "", parts.fragment)
    )
    return redact(rebuilt)


def _redact_headers(headers: Headers, redact: Redactor) -> Headers:
    return tuple(
        (name, REDACTED if _secret_header(name) else redact(value))
        for name, value in headers
    )


def _redact_bytes(data: bytes, redact: Redactor) -> bytes:
    # latin-1 maps every byte to one character, so offsets and non-secret bytes
    # survive; the secrets were given to the redactor in the same spelling.
    return redact(data.decode("latin-1")).encode("latin-1")


def _redact_reads(
    reads: tuple[BodyRead, ...], redact: Redactor
) -> tuple[BodyRead, ...]:
    body = b"".join(read.data for read in reads).decode("latin-1")
    merged: list[BodyRead] = []
    seam = 0
    for read in reads:
        if merged:
            left, right = body[max(0, seam - _SEAM) : seam], body[seam : seam + _SEAM]
            if redact(left + right) != redact(left) + redact(right):
                # A secret spans the seam: keep it in one read, at the later time.
                merged[-1] = BodyRead(
                    at_ms=read.at_ms, data=merged[-1].data + read.data
                )
                seam += len(read.data)
                continue
        merged.append(read)
        seam += len(read.data)
    return tuple(
        BodyRead(at_ms=read.at_ms, data=_redact_bytes(read.data, redact))
        for read in merged
    )


def redact_exchange(
    cassette: Cassette, secrets: Iterable[str | Secret] = ()
) -> Cassette:
    """``cassette`` with every secret of its request replaced by ``***`` (see the
    module docstring): ``secrets`` (the API key) plus what the request's headers
    and URL show. Secrets shorter than ``redaction.MIN_SECRET_LENGTH`` characters
    are not searched for in free text."""
    req, resp = cassette.request, cassette.response
    found = _request_secrets(req.url, req.headers, secrets)
    text_redact = Redactor(found)
    byte_redact = Redactor(s.encode("utf-8").decode("latin-1") for s in found)
    request = CassetteRequest(
        method=req.method,
        url=_redact_url(req.url, text_redact),
        headers=_redact_headers(req.headers, text_redact),
        body=_redact_bytes(req.body, byte_redact),
    )
    response = attrs.evolve(
        resp,
        reason=text_redact(resp.reason),
        headers=_redact_headers(resp.headers, text_redact),
        reads=_redact_reads(resp.reads, byte_redact),
    )
    return attrs.evolve(cassette, request=request, response=response)
