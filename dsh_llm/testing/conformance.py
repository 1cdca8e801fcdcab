"""``assert_adapter_conforms``: one cassette, replayed straight and hostile.

A cassette is replayed through a ``LoopbackServer`` into the adapter, then in
variants a real network or server produces; ``docs/writing-an-adapter.md``
tabulates them. Contracts callers may rely on:

- ``adapter_factory(base_url, *, stream_idle_timeout_ms)`` builds the adapter
  for ``base_url`` (server URL plus ``base_path``) with that idle timeout; it is
  called once per variant and the adapter is closed afterwards.
- Every outcome (the chunks, and the code of a raised ``LlmError`` or of an
  ``error``/``aborted`` finish) must pass ``validate_stream(strict=True)``.
- ``resplit`` (1-byte writes, random splits, one HTTP chunk per event,
  close-delimited, content-length) and ``sse-noise`` (BOM, CRLF, keep-alive
  comments between events) must give exactly the recorded outcome.
- ``truncation``: a complete 2xx body cut after and inside every event, chunked
  (abrupt close) and close-delimited (clean EOF), never ends with a clean
  finish, always with a documented ``ErrorCode``, the same for both framings.
  ``end-marker``: a non-JSON sentinel (``data: [DONE]``) before the finish
  reason never ends with a clean finish either (rule 12).
- ``stall`` ends as ``TIMEOUT``; ``abort`` as ``ABORTED`` with the connection
  closed; ``http-errors``: 401 ``AUTH``, 429 ``RATE_LIMIT`` with the
  ``Retry-After`` delay, 500 ``SERVER``.
- A failure raises ``AssertionError`` naming the variant and showing the first
  diverging chunk or the codes (also for an adapter raising a non-``LlmError``).
  ``groups`` chooses the groups; ``max_cuts`` and ``guard_s`` keep a run to a
  few seconds.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import Final
from typing import Literal

import attrs

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import compact_json
from dsh_llm.signal import AbortController
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.loopback import BodyStep
from dsh_llm.testing.loopback import Cut
from dsh_llm.testing.loopback import LoopbackServer
from dsh_llm.testing.loopback import Reply
from dsh_llm.testing.loopback import Stall
from dsh_llm.testing.replay import AdapterFactory
from dsh_llm.testing.replay import close_adapter
from dsh_llm.testing.replay import replay_base_url
from dsh_llm.testing.replay import replay_options
from dsh_llm.testing.replay import replay_reply
from dsh_llm.validator import validate_stream

__all__ = ["GROUPS", "ConformanceReport", "assert_adapter_conforms"]

GROUPS: Final = (
    "resplit",
    "sse-noise",
    "truncation",
    "end-marker",
    "stall",
    "abort",
    "http-errors",
)
"""The variant groups, in the order they run."""

_KNOWN_CODES: Final = frozenset(code.value for code in ErrorCode)
_BLANK_LINE: Final = re.compile(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)")
_LONE_LF: Final = re.compile(rb"(?<!\r)\n")
_BOM: Final = b"\xef\xbb\xbf"
_KEEPALIVE: Final = b": keep-alive\n\n"
_FRAMINGS: Final[tuple[Literal["chunked"], Literal["close"]]] = ("chunked", "close")


@attrs.frozen(kw_only=True)
class ConformanceReport:
    """What ``assert_adapter_conforms`` checked."""

    variants: tuple[str, ...]
    """The name of every variant run, in order."""


@attrs.frozen(kw_only=True)
class _Outcome:
    chunks: tuple[dict[str, Any], ...]
    code: str | None
    """The code of the raised error or of the error/aborted finish."""
    raised: bool
    retry_after_ms: float | None
    elapsed_s: float

    @property
    def clean(self) -> bool:
        return self.code is None

    def describe(self) -> str:
        how = "raised" if self.raised else "finished with"
        end = "a clean finish" if self.code is None else f"{how} {self.code}"
        return f"{len(self.chunks)} chunks, {end}"


def _segments(body: bytes, event_stream: bool) -> list[bytes]:
    """The body cut after each event (SSE: each blank line; else each line)."""
    pieces: list[bytes] = []
    start = 0
    pattern = _BLANK_LINE if event_stream else re.compile(rb"\n")
    for match in pattern.finditer(body):
        pieces.append(body[start : match.end()])
        start = match.end()
    if start < len(body):
        pieces.append(body[start:])
    return pieces


def _is_data(segment: bytes, event_stream: bool) -> bool:
    lines = [line for line in re.split(rb"\r\n|\r|\n", segment) if line.strip()]
    if not event_stream:
        return bool(lines)
    return any(not line.startswith(b":") for line in lines)


@attrs.define
class _Runner:
    server: LoopbackServer
    factory: AdapterFactory
    cassette: Cassette
    options: GenerateOptions
    guard_s: float
    names: list[str] = attrs.field(init=False, factory=list)

    def run(
        self,
        name: str,
        reply: Reply,
        *,
        idle_ms: float | None = None,
        during: Callable[[AbortController], None] | None = None,
    ) -> _Outcome:
        self.names.append(name)
        self.server.enqueue(reply)
        idle = self.guard_s * 1000 if idle_ms is None else idle_ms
        adapter = self.factory(
            replay_base_url(self.server, self.cassette), stream_idle_timeout_ms=idle
        )
        controller = AbortController()
        options = attrs.evolve(self.options, signal=controller.signal)
        if during is not None:
            threading.Thread(target=during, args=(controller,), daemon=True).start()
        chunks: list[dict[str, Any]] = []
        code: str | None = None
        raised = False
        retry_after: float | None = None
        started = time.monotonic()
        try:
            stream = adapter.stream(options)
            try:
                for chunk in validate_stream(stream, strict=True):
                    chunks.append(chunk_to_dict(chunk))
                    if isinstance(chunk, Finish) and chunk.reason.failure is not None:
                        code = chunk.reason.failure.code
                        retry_after = chunk.reason.failure.provider_retry_after_ms
            finally:
                close = getattr(stream, "close", None)
                if callable(close):
                    close()
        except LlmError as exc:
            if exc.code == ErrorCode.INVARIANT:
                raise AssertionError(
                    f"variant {name!r}: not strictly valid: {exc.message}"
                    f"{_after(chunks)}"
                ) from None
            code, raised = exc.code, True
            retry_after = exc.failure.provider_retry_after_ms
        except Exception as exc:
            raise AssertionError(
                f"variant {name!r}: the adapter raised {exc!r}, not an LlmError"
            ) from exc
        finally:
            close_adapter(adapter)
        return _Outcome(
            chunks=tuple(chunks),
            code=code,
            raised=raised,
            retry_after_ms=retry_after,
            elapsed_s=time.monotonic() - started,
        )


def _after(chunks: Sequence[dict[str, Any]]) -> str:
    if not chunks:
        return " (before any chunk)"
    return f" (after chunk #{len(chunks)} {compact_json(chunks[-1])})"


def _same(name: str, expected: _Outcome, actual: _Outcome) -> None:
    for index, (want, got) in enumerate(
        zip(expected.chunks, actual.chunks, strict=False), 1
    ):
        if want != got:
            raise AssertionError(
                f"variant {name!r}: chunk #{index} differs from the recording's\n"
                f"  expected: {compact_json(want)}\n  actual:   {compact_json(got)}"
            )
    if len(expected.chunks) != len(actual.chunks):
        index = min(len(expected.chunks), len(actual.chunks)) + 1
        longer = expected if len(expected.chunks) > len(actual.chunks) else actual
        which = "missing" if longer is expected else "extra"
        raise AssertionError(
            f"variant {name!r}: chunk #{index} is {which}: "
            f"{compact_json(longer.chunks[index - 1])} (expected "
            f"{expected.describe()}, got {actual.describe()})"
        )
    if (expected.code, expected.raised) != (actual.code, actual.raised):
        raise AssertionError(
            f"variant {name!r}: expected {expected.describe()}, got {actual.describe()}"
        )


def _expect_code(name: str, outcome: _Outcome, code: str) -> None:
    if outcome.code != code:
        raise AssertionError(
            f"variant {name!r}: expected {code}, got {outcome.describe()}"
            f"{_after(outcome.chunks)}"
        )


def _cuts(
    segments: list[bytes], event_stream: bool, max_cuts: int
) -> list[tuple[str, int]]:
    last_data = max(
        (i for i, seg in enumerate(segments) if _is_data(seg, event_stream)),
        default=-1,
    )
    cuts: list[tuple[str, int]] = []
    offset = 0
    for index, segment in enumerate(segments[: last_data + 1]):
        if len(segment) > 1:
            cuts.append((f"inside event {index + 1}", offset + len(segment) // 2))
        offset += len(segment)
        if index < last_data:
            cuts.append((f"after event {index + 1}", offset))
    if len(cuts) > max_cuts:
        step = len(cuts) / max_cuts
        cuts = [cuts[int(i * step)] for i in range(max_cuts)]
    return cuts


def _random_pieces(body: bytes, rng: random.Random) -> tuple[bytes, ...]:
    pieces: list[bytes] = []
    start = 0
    top = max(2, len(body) // 8)
    while start < len(body):
        size = rng.randint(1, top)
        pieces.append(body[start : start + size])
        start += size
    return tuple(pieces)


def _http_error_replies() -> list[tuple[str, Reply, str, float | None]]:
    def reply(status: int, reason: str, body: dict[str, Any], **headers: str) -> Reply:
        return Reply(
            status=status,
            reason=reason,
            headers={"content-type": "application/json", **headers},
            body=compact_json(body).encode(),
            framing="length",
        )

    return [
        (
            "http 401",
            reply(
                401,
                "Unauthorized",
                {
                    "error": {
                        "message": "Incorrect API key provided",
                        "type": "authentication_error",
                        "code": "invalid_api_key",
                    }
                },
            ),
            ErrorCode.AUTH.value,
            None,
        ),
        (
            "http 429 with Retry-After",
            reply(
                429,
                "Too Many Requests",
                {
                    "error": {
                        "message": "Rate limit reached",
                        "type": "rate_limit_error",
                    }
                },
                **{"retry-after": "7"},
            ),
            ErrorCode.RATE_LIMIT.value,
            7000.0,
        ),
        (
            "http 500",
            reply(
                500,
                "Internal Server Error",
                {"error": {"message": "internal error", "type": "server_error"}},
            ),
            ErrorCode.SERVER.value,
            None,
        ),
    ]


def assert_adapter_conforms(
    adapter_factory: AdapterFactory,
    cassette: Cassette | str | Path,
    *,
    options: GenerateOptions | None = None,
    groups: Iterable[str] = GROUPS,
    seed: int = 0,
    random_splits: int = 3,
    max_cuts: int = 40,
    stall_idle_ms: float = 250.0,
    abort_after_s: float = 0.1,
    guard_s: float = 5.0,
) -> ConformanceReport:
    """Replay ``cassette`` and its hostile variants into ``adapter_factory``'s
    adapter and check each outcome (see the module docstring).

    Args:
        adapter_factory: ``factory(base_url, *, stream_idle_timeout_ms)``.
        cassette: A ``Cassette`` or the path of a cassette file.
        options: The request (default ``replay_options(cassette)``).
        groups: The variant groups to run (``GROUPS`` by default).
        seed: Seeds the random splits.
        random_splits: How many random re-splittings to try.
        max_cuts: Upper bound on the cut points tried per framing.
        stall_idle_ms: The idle timeout of the ``stall`` variant.
        abort_after_s: How long after the request arrives the ``abort`` variant
            aborts.
        guard_s: The idle timeout of every other variant, and how long a stall
            lasts before the server gives up: a variant that hangs fails after it.

    Raises:
        AssertionError: at the first variant that does not conform.
        ValueError: for an unknown group name.
        LlmError: ``INVALID_CASSETTE`` for a path that is not a cassette.
    """
    loaded = cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)
    chosen = tuple(groups)
    unknown = [g for g in chosen if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown conformance groups {unknown}; known: {GROUPS}")
    response = loaded.response
    base = replay_reply(loaded, 0.0)
    body = response.body
    event_stream = "event-stream" in (response.header("content-type") or "")
    segments = _segments(body, event_stream)
    streaming = 200 <= response.status < 300 and response.ended == "complete"

    with LoopbackServer() as server:
        runner = _Runner(
            server, adapter_factory, loaded, options or replay_options(loaded), guard_s
        )
        recorded = runner.run("recorded", base)

        if "resplit" in chosen and response.ended == "complete":
            rng = random.Random(seed)
            plain = attrs.evolve(base, body=(body,) if body else ())
            variants: list[tuple[str, Reply]] = [
                ("1-byte writes", attrs.evolve(plain, split=1)),
                ("one HTTP chunk per event", attrs.evolve(base, body=tuple(segments))),
                ("close-delimited", attrs.evolve(plain, framing="close")),
                (
                    "close-delimited, 1-byte writes",
                    attrs.evolve(plain, framing="close", split=1),
                ),
                ("content-length", attrs.evolve(plain, framing="length")),
            ]
            variants.extend(
                (
                    f"random splits #{n + 1}",
                    attrs.evolve(base, body=_random_pieces(body, rng)),
                )
                for n in range(random_splits)
            )
            for name, reply in variants:
                _same(name, recorded, runner.run(name, reply))

        if "sse-noise" in chosen and event_stream and streaming:
            noisy_segments = [_KEEPALIVE + segment for segment in segments]
            noises = [
                ("UTF-8 BOM", _BOM + body),
                ("CRLF line ends", _LONE_LF.sub(b"\r\n", body)),
                ("keep-alive comment between events", b"".join(noisy_segments)),
                (
                    "BOM, CRLF and keep-alive comments",
                    _BOM + _LONE_LF.sub(b"\r\n", b"".join(noisy_segments)),
                ),
            ]
            for name, noisy in noises:
                for framing in _FRAMINGS:
                    label = f"{name} ({framing})"
                    reply = attrs.evolve(base, body=(noisy,), framing=framing)
                    _same(label, recorded, runner.run(label, reply))

        if "truncation" in chosen and streaming:
            for where, offset in _cuts(segments, event_stream, max_cuts):
                codes: dict[str, str] = {}
                for framing in _FRAMINGS:
                    label = f"cut {where} (byte {offset}, {framing})"
                    steps: tuple[BodyStep, ...] = (body[:offset],) if offset else ()
                    if framing == "chunked":
                        steps = (*steps, Cut())
                    outcome = runner.run(
                        label, attrs.evolve(base, body=steps, framing=framing)
                    )
                    codes[framing] = _expect_failure(label, outcome, "a cut body")
                if codes["chunked"] != codes["close"]:
                    raise AssertionError(
                        f"variant 'cut {where} (byte {offset})': the code depends on "
                        f"the framing: {codes['chunked']} when chunked, "
                        f"{codes['close']} when close-delimited"
                    )

        marker = _end_marker(segments, event_stream)
        if "end-marker" in chosen and streaming and marker is not None:
            index, sentinel = marker
            for cut in _marker_cuts(segments, event_stream, index, max_cuts):
                label = (
                    f"end marker right after event {cut}" if cut else "end marker alone"
                )
                kept = b"".join(segments[:cut])
                outcome = runner.run(label, attrs.evolve(base, body=(kept + sentinel,)))
                _expect_failure(
                    label,
                    outcome,
                    "a stream whose end marker came before its finish reason",
                )

        half = _half(segments, event_stream)
        if "stall" in chosen and streaming:
            name = "stall after half the events"
            reply = attrs.evolve(
                base, body=(body[:half], Stall(seconds=guard_s), Cut())
            )
            outcome = runner.run(name, reply, idle_ms=stall_idle_ms)
            _expect_code(name, outcome, ErrorCode.TIMEOUT.value)

        if "abort" in chosen and streaming:
            name = "abort while waiting"
            count = len(server.requests) + 1

            def abort_later(controller: AbortController) -> None:
                server.wait_for_requests(count, timeout=guard_s)
                time.sleep(abort_after_s)
                controller.abort()

            reply = attrs.evolve(
                base, body=(body[:half], Stall(seconds=guard_s), Cut())
            )
            outcome = runner.run(name, reply, during=abort_later)
            _expect_code(name, outcome, ErrorCode.ABORTED.value)
            if not server.wait_until_idle(timeout=min(guard_s, 2.0)):
                raise AssertionError(
                    f"variant {name!r}: the connection was still open after the abort"
                )

        if "http-errors" in chosen:
            for name, reply, code, retry_after in _http_error_replies():
                outcome = runner.run(name, reply)
                _expect_code(name, outcome, code)
                if retry_after is not None and outcome.retry_after_ms != retry_after:
                    raise AssertionError(
                        f"variant {name!r}: provider_retry_after_ms is "
                        f"{outcome.retry_after_ms}, expected {retry_after}"
                    )
        names = tuple(runner.names)
    return ConformanceReport(variants=names)


def _expect_failure(name: str, outcome: _Outcome, what: str) -> str:
    """The code of ``outcome``, which must be a failure with a documented code."""
    if outcome.code is None:
        last = compact_json(outcome.chunks[-1]) if outcome.chunks else "nothing"
        raise AssertionError(
            f"variant {name!r}: {what} ended with a clean finish: {last}"
        )
    if outcome.code not in _KNOWN_CODES:
        raise AssertionError(
            f"variant {name!r}: ended with {outcome.code}, which is not a "
            "documented ErrorCode"
        )
    return outcome.code


def _end_marker(segments: list[bytes], event_stream: bool) -> tuple[int, bytes] | None:
    """The index and bytes of the stream's end marker: its last data event when
    that is an SSE event whose data is not JSON (``data: [DONE]``)."""
    if not event_stream:
        return None
    data = [i for i, seg in enumerate(segments) if _is_data(seg, event_stream)]
    if not data:
        return None
    last = segments[data[-1]]
    payload = b"\n".join(
        line[5:].strip()
        for line in re.split(rb"\r\n|\r|\n", last)
        if line.startswith(b"data:")
    )
    try:
        json.loads(payload)
    except ValueError:
        return data[-1], last
    return None


def _marker_cuts(
    segments: list[bytes], event_stream: bool, marker: int, max_cuts: int
) -> list[int]:
    """How many leading segments to keep before an early end marker: none, and
    every count that stops before the last two data events ahead of the marker
    (they may carry the finish reason and trailing usage, after which an early
    marker is legitimate)."""
    data = [i for i, seg in enumerate(segments) if _is_data(seg, event_stream)]
    before = [i for i in data if i < marker]
    if len(before) < 2:
        return []
    cuts = list(range(before[-2] + 1))
    if len(cuts) > max_cuts:
        step = len(cuts) / max_cuts
        cuts = [cuts[int(i * step)] for i in range(max_cuts)]
    return cuts


def _half(segments: list[bytes], event_stream: bool) -> int:
    """The offset after the first half of the data events; 0 (before any event)
    for a stream of one data event."""
    data = [i for i, seg in enumerate(segments) if _is_data(seg, event_stream)]
    if len(data) < 2:
        return 0
    keep = data[len(data) // 2 - 1]
    return sum(len(seg) for seg in segments[: keep + 1])
