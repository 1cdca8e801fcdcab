"""Benchmark: peak memory over one long answer, every wire family, against the
final block string.

Run ``python benchmarks/bench_memory.py`` (options: ``--events N ...``, default
100,000 and 1,000,000; ``--families NAME ...``; ``--floor``; ``--clients NAME
...``). It prints one table and is not a test (``tests/test_memory_bound.py``
asserts the bound).

Each family streams one text block of ``--events`` fragments, the same text for
all: mostly ASCII words with an accented word every 7th fragment and an emoji
(outside the BMP) every 20th, so CPython stores the final string at 4 bytes a
character while its UTF-8 is about 1.05 bytes a character. The wire shapes:

- ``chat``: Chat Completions SSE (``OpenAICompatAdapter``; DeepSeek and every
  OpenAI-compatible server share it), finish, usage, ``[DONE]``;
- ``anthropic``: Messages SSE, a ``ping`` every 100 events;
- ``gemini``: ``streamGenerateContent`` SSE, CRLF framing, running usage;
- ``ollama``: ``/api/chat`` NDJSON;
- ``responses``: Responses API SSE with what OpenAI sends after the deltas:
  ``output_text.done``, ``content_part.done``, ``output_item.done`` and
  ``response.completed``, each repeating the whole text;
- ``bedrock``: ConverseStream in the binary AWS event stream.

``dsh_llm.testing.LoopbackServer`` serves the bodies from a child process,
chunked, 16 events per HTTP chunk, as UTF-8 JSON. Each row runs in a fresh
``spawn``ed process: it streams a short warm-up answer, resets the kernel's
peak-RSS mark (``/proc/self/clear_refs``), streams the long answer through
``adapter.stream(options)``, checking the deltas and the block-end text by
length and CRC only (it keeps neither, nor the last chunk while the next is
read), and reports ``VmHWM`` minus the RSS at the reset. ``string`` is
``sys.getsizeof`` of the block-end text; the target (issue 27) is a peak of at
most 1.5x that plus 2 MiB.

``--clients`` adds rows that read the adapter's stream another way:
``runtime`` (``LlmRuntime.stream``), ``validator`` (``validate_stream`` over
the runtime's stream) and ``assembler`` (each chunk pushed to a
``BlockAssembler``, then ``message()``: it keeps the answer it assembles).

A ``floor`` row (Responses' always, every family's with ``--floor``) is a plain
socket, chunk framing stripped, each event's payload given to ``json.loads`` as
soon as it is complete, nothing kept: for Responses, what parsing the events
that repeat the whole text costs a client that parses every event whole.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import resource
import struct
import sys
import zlib
from collections.abc import Callable
from collections.abc import Iterable
from multiprocessing.connection import Connection
from typing import Any
from typing import Final
from typing import NamedTuple

from _harness import server_process
from _wires import ollama_done
from bench_bedrock import _frame as bedrock_frame

from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event

CYCLE: Final = 1_000
"""Distinct events, repeated: the server holds one cycle, not the stream."""
EVENTS_PER_CHUNK: Final = 16
WARM_UP_EVENTS: Final = 2_000
MIB: Final = 1024 * 1024
TARGET_RATIO: Final = 1.5
TARGET_CONSTANT: Final = 2 * MIB
MODEL: Final = "bench-model"
ITEM: Final = "msg_0c1b7e5a2f0d4e8b9a6c3d2e1f0a9b8c"
FAMILIES: Final = ("chat", "anthropic", "gemini", "ollama", "responses", "bedrock")
CLIENTS: Final = ("adapter", "runtime", "validator", "assembler")


def fragment(i: int) -> str:
    """The ``i``-th text fragment: an emoji every 20th, an accented word every
    7th, else an ASCII word (each cycle of ``CYCLE`` is the same)."""
    i %= CYCLE
    if i % 20 == 0:
        return " \U0001f680"
    if i % 7 == 0:
        return f" café{i % 100}"
    return f" token{i:03d}"


def full_text(count: int) -> str:
    """The whole text of a ``count``-fragment answer."""
    repeats, rest = divmod(count, CYCLE)
    cycle = "".join(map(fragment, range(CYCLE)))
    return cycle * repeats + "".join(map(fragment, range(rest)))


# --- the bodies (built in the server process) ----------------------------------------


def _repeated(event: Callable[[int], bytes], count: int) -> list[bytes]:
    """``count`` events, 16 to an HTTP chunk, built from one cycle repeated."""
    cycle = [event(i) for i in range(min(count, CYCLE))]
    chunks = [
        b"".join(cycle[at : at + EVENTS_PER_CHUNK])
        for at in range(0, len(cycle), EVENTS_PER_CHUNK)
    ]
    repeats, rest = divmod(count, CYCLE)
    tail = [
        b"".join(cycle[at : min(at + EVENTS_PER_CHUNK, rest)])
        for at in range(0, rest, EVENTS_PER_CHUNK)
    ]
    return chunks * repeats + tail


def _named(name: str, payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"event: {name}\ndata: {data}\n\n".encode()


def _chat(count: int) -> list[bytes]:
    def payload(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1767225600,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def event(i: int) -> bytes:
        return sse_event(payload({"content": fragment(i)}))

    usage = {"prompt_tokens": 20, "completion_tokens": count, "total_tokens": count}
    return [
        sse_event(payload({"role": "assistant", "content": ""})),
        *_repeated(event, count),
        sse_event(payload({}, "stop"))
        + sse_event(dict(payload({}), choices=[], usage=usage))
        + b"data: [DONE]\n\n",
    ]


def _anthropic(count: int) -> list[bytes]:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_01Bench",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 1},
        },
    }
    block = {"type": "text", "text": ""}

    def event(i: int) -> bytes:
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": fragment(i)},
        }
        ping = b'event: ping\ndata: {"type": "ping"}\n\n' if i % 100 == 99 else b""
        return ping + _named("content_block_delta", delta)

    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": count},
    }
    return [
        _named("message_start", start)
        + _named(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        *_repeated(event, count),
        _named("content_block_stop", {"type": "content_block_stop", "index": 0})
        + _named("message_delta", end)
        + _named("message_stop", {"type": "message_stop"}),
    ]


def _gemini(count: int) -> list[bytes]:
    def payload(text: str, finish: str | None, tokens: int) -> bytes:
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": text}], "role": "model"},
            "index": 0,
        }
        if finish:
            candidate["finishReason"] = finish
        body = {
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": 20,
                "candidatesTokenCount": tokens,
                "totalTokenCount": 20 + tokens,
            },
            "modelVersion": MODEL,
        }
        data = json.dumps(body, separators=(",", ": "), ensure_ascii=False)
        return b"data: " + data.encode() + b"\r\n\r\n"

    return [
        *_repeated(lambda i: payload(fragment(i), None, i % CYCLE + 1), count),
        payload("", "STOP", count),
    ]


def _ollama(count: int) -> list[bytes]:
    def line(value: dict[str, Any]) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    def event(i: int) -> bytes:
        message = {"role": "assistant", "content": fragment(i)}
        created = "2026-01-01T10:00:00Z"
        value = {"model": MODEL, "created_at": created, "message": message}
        return line({**value, "done": False}) + b"\n"

    return [*_repeated(event, count), line(ollama_done(count, MODEL)) + b"\n"]


def _responses(count: int) -> list[bytes]:
    text = full_text(count)
    item = {"type": "message", "id": ITEM, "status": "in_progress", "role": "assistant"}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    where = {"item_id": ITEM, "output_index": 0, "content_index": 0}

    def response(status: str, output: list[Any], usage: Any) -> dict[str, Any]:
        return {
            "id": "resp_0c1b7e5a2f0d4e8b",
            "object": "response",
            "created_at": 1767225600,
            "status": status,
            "model": MODEL,
            "output": output,
            "usage": usage,
        }

    def event(i: int) -> bytes:
        return _named(
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": i % CYCLE + 3,
                **where,
                "delta": fragment(i),
                "logprobs": [],
            },
        )

    done_part = {**part, "text": text}
    done_item = {**item, "status": "completed", "content": [done_part]}
    usage = {"input_tokens": 20, "output_tokens": count, "total_tokens": 20 + count}
    head = [
        ("response.created", {"response": response("in_progress", [], None)}),
        ("response.output_item.added", {"output_index": 0, "item": item}),
        ("response.content_part.added", {**where, "part": part}),
    ]
    tail = [
        ("response.output_text.done", {**where, "text": text, "logprobs": []}),
        ("response.content_part.done", {**where, "part": done_part}),
        ("response.output_item.done", {"output_index": 0, "item": done_item}),
        (
            "response.completed",
            {"response": response("completed", [done_item], usage)},
        ),
    ]
    return [
        b"".join(_named(name, {"type": name, **body}) for name, body in head),
        *_repeated(event, count),
        *(_named(name, {"type": name, **body}) for name, body in tail),
    ]


def _bedrock(count: int) -> list[bytes]:
    def event(i: int) -> bytes:
        return bedrock_frame(
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"text": fragment(i)}},
        )

    usage = {"inputTokens": 20, "outputTokens": count, "totalTokens": 20 + count}
    return [
        bedrock_frame("messageStart", {"role": "assistant"}),
        *_repeated(event, count),
        bedrock_frame("contentBlockStop", {"contentBlockIndex": 0})
        + bedrock_frame("messageStop", {"stopReason": "end_turn"})
        + bedrock_frame("metadata", {"usage": usage, "metrics": {"latencyMs": 9}}),
    ]


class Wire(NamedTuple):
    """A family's body builder and the path its adapter posts to."""

    body: Callable[[int], list[bytes]]
    path: str
    headers: dict[str, str]


_SSE = {"content-type": "text/event-stream"}
WIRES: Final[dict[str, Wire]] = {
    "chat": Wire(_chat, "/chat/completions", _SSE),
    "anthropic": Wire(_anthropic, "/v1/messages", _SSE),
    "gemini": Wire(
        _gemini, f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse", _SSE
    ),
    "ollama": Wire(_ollama, "/api/chat", {"content-type": "application/x-ndjson"}),
    "responses": Wire(_responses, "/responses", _SSE),
    "bedrock": Wire(
        _bedrock,
        f"/model/{MODEL}/converse-stream",
        {"content-type": "application/vnd.amazon.eventstream"},
    ),
}


def _prefix(family: str, count: int) -> str:
    return f"/{family}{count}"


def replies(families: list[str], counts: list[int]) -> dict[str, Reply]:
    """Every family's body for each count and for the warm-up, by request path."""
    out = {}
    for family in families:
        wire = WIRES[family]
        for count in {*counts, WARM_UP_EVENTS}:
            out[_prefix(family, count) + wire.path] = Reply(
                body=tuple(wire.body(count)), framing="chunked", headers=wire.headers
            )
    return out


# --- the client (in its own process) -------------------------------------------------


class Seen(NamedTuple):
    """What a client saw: its deltas' and its block-end's code points and CRCs,
    and the block-end string's size (``sys.getsizeof``)."""

    delta_chars: int
    delta_crc: int
    end_chars: int
    end_crc: int
    string_bytes: int


def _crc(text: str, crc: int) -> int:
    # In slices: encoding the whole text at once would add a copy to the peak.
    for at in range(0, len(text), 65536):
        crc = zlib.crc32(text[at : at + 65536].encode("utf-8"), crc)
    return crc


def consume(chunks: Iterable[Any]) -> Seen:
    """Run a stream to its end, keeping nothing but lengths and CRCs (not even
    the last chunk while the next one is read)."""
    from dsh_llm.protocol import BlockEnd
    from dsh_llm.protocol import TextBlock
    from dsh_llm.protocol import TextDelta

    chars = crc = end_chars = end_crc = size = 0
    stream = iter(chunks)
    while (chunk := next(stream, None)) is not None:
        kind = type(chunk)
        if kind is TextDelta:
            chars += len(chunk.text)
            crc = zlib.crc32(chunk.text.encode("utf-8"), crc)
        elif kind is BlockEnd and type(chunk.block) is TextBlock:
            text = chunk.block.text
            end_chars += len(text)
            end_crc = _crc(text, end_crc)
            size = max(size, sys.getsizeof(text))
            del text
        del chunk
    return Seen(chars, crc, end_chars, end_crc, size)


_SEPARATORS: Final = {"gemini": b"\r\n\r\n", "ollama": b"\n"}


def raw_floor(family: str, port: int, path: str) -> Seen:
    """A plain socket, chunk framing stripped, each event cut off as soon as it
    is complete and its payload given to ``json.loads`` (nothing kept); a
    Bedrock frame is cut by its prelude's length, its CRCs unchecked."""
    import socket

    separator = _SEPARATORS.get(family, b"\n\n")
    events = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\n{}".encode()
        )
        raw = bytearray()
        while b"\r\n\r\n" not in raw:
            raw += sock.recv(65536)
        del raw[: raw.index(b"\r\n\r\n") + 4]
        body = bytearray()
        while True:
            # Chunk framing: move every complete chunk's data onto the body.
            at = 0
            last = False
            while (line := raw.find(b"\r\n", at)) >= 0:
                size = int(raw[at:line], 16)
                if len(raw) < line + 4 + size:
                    break
                body += raw[line + 2 : line + 2 + size]
                at = line + 4 + size
                last = size == 0
            del raw[:at]
            at = 0
            if family == "bedrock":
                while len(body) - at >= 12:
                    total, headers = struct.unpack_from(">II", body, at)
                    if len(body) - at < total:
                        break
                    json.loads(body[at + 12 + headers : at + total - 4])
                    events += 1
                    at += total
            else:
                while (end := body.find(separator, at)) >= 0:
                    start = body.find(b"{", at, end)
                    if start >= 0:
                        json.loads(body[start:end])
                        events += 1
                    at = end + len(separator)
            del body[:at]
            piece = b"" if last else sock.recv(65536)
            if not piece:
                return Seen(events, 0, 0, 0, 0)
            raw += piece


def adapter_stream(
    family: str, base: str, client: str = "adapter"
) -> Callable[[], Iterable[Any]]:
    """A function streaming the family's adapter from ``base``, through
    ``client`` (see ``CLIENTS``)."""
    from dsh_llm import BlockAssembler
    from dsh_llm import LlmRuntime
    from dsh_llm import validate_stream
    from dsh_llm.protocol import GenerateOptions
    from dsh_llm.protocol import create_user_message

    adapter: Any
    route = "bench"
    if family == "chat":
        from dsh_llm.adapters.openai_compat import OpenAICompatAdapter

        adapter = OpenAICompatAdapter(base, api_key="sk-bench")
    elif family == "anthropic":
        from dsh_llm.adapters import anthropic

        adapter = anthropic.AnthropicAdapter("sk-bench", base_url=base)
        route = anthropic.PROVIDER_ROUTE
    elif family == "gemini":
        from dsh_llm.adapters import gemini

        adapter = gemini.GeminiAdapter("bench-key", base_url=base)
        route = gemini.PROVIDER_ROUTE
    elif family == "ollama":
        from dsh_llm.adapters import ollama

        adapter = ollama.OllamaAdapter(base)
        route = ollama.PROVIDER_ROUTE
    elif family == "responses":
        from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter

        adapter = OpenAIResponsesAdapter(base, api_key="sk-bench", server="openai")
    elif family == "bedrock":
        from dsh_llm.adapters import bedrock

        adapter = bedrock.BedrockAdapter(
            "ABSK-bench-key", base_url=base, region="us-east-1"
        )
        route = bedrock.PROVIDER_ROUTE
    else:
        raise SystemExit(f"unknown family {family!r}")
    options = GenerateOptions(
        provider=route, model=MODEL, messages=(create_user_message("hi"),)
    )
    if client == "adapter":
        return lambda: adapter.stream(options)
    runtime = LlmRuntime()
    runtime.register_adapter([route], adapter)
    if client == "runtime":
        return lambda: runtime.stream(options)
    if client == "validator":
        return lambda: validate_stream(runtime.stream(options))

    def assembled() -> Iterable[Any]:
        assembler = BlockAssembler()
        for chunk in adapter.stream(options):
            assembler.push(chunk)
            yield chunk
            del chunk
        assembler.message()

    return assembled


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux 4.0+)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def peak_over(run: Callable[[], Seen]) -> tuple[int, Seen, bool]:
    """The peak RSS above the current RSS while ``run`` runs, in bytes, what it
    saw, and whether the kernel's peak mark was reset (else ``ru_maxrss``)."""
    gc.collect()
    exact = _reset_peak()
    before = _status_kib("VmRSS") if exact else None
    if before is None:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seen = run()
    peak = _status_kib("VmHWM") if exact else None
    if peak is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(peak - before, 0) * 1024, seen, exact


def _measure(pipe: Connection, family: str, client: str, port: int, count: int) -> None:
    def base(events: int) -> str:
        return f"http://127.0.0.1:{port}{_prefix(family, events)}"

    if client == "floor":
        path = _prefix(family, count) + WIRES[family].path
        raw_floor(family, port, _prefix(family, WARM_UP_EVENTS) + WIRES[family].path)
        pipe.send(peak_over(lambda: raw_floor(family, port, path)))
        return
    warm = adapter_stream(family, base(WARM_UP_EVENTS), client)
    consume(warm())
    stream = adapter_stream(family, base(count), client)
    pipe.send(peak_over(lambda: consume(stream())))


def measure(family: str, client: str, port: int, count: int) -> tuple[int, Seen, bool]:
    """``peak_over`` one ``count``-event answer of ``family`` through ``client``
    (``floor`` or one of ``CLIENTS``), in a fresh process."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(
        target=_measure, args=(child, family, client, port, count)
    )
    process.start()
    result: tuple[int, Seen, bool] = parent.recv()
    process.join(30)
    return result


def _row(count: int, name: str, chars: int, string: int, peak: int) -> str:
    return (
        f"{count:>9,}  {name:<20} {chars:>10,} {string / MIB:>10.2f} "
        f"{peak / MIB:>9.2f} {peak / string:>8.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument(
        "--families", nargs="+", default=list(FAMILIES), choices=FAMILIES
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="every family's raw floor (Responses' is always measured)",
    )
    parser.add_argument(
        "--clients",
        nargs="+",
        default=["adapter"],
        choices=CLIENTS,
        help="what reads the adapter's stream (default: the bare adapter)",
    )
    args = parser.parse_args(argv)

    print(f"Python {sys.version.split()[0]}; peak RSS over one answer, fresh process")
    print()
    print(
        f"{'events':>9}  {'family':<20} {'chars':>10} {'string MiB':>10} "
        f"{'peak MiB':>9} {'x string':>8} {'target MiB':>10}  ok"
    )
    with server_process(replies, args.families, args.events, spawn=True) as port:
        for count in args.events:
            text = full_text(count)
            expected = (len(text), _crc(text, 0))
            chars, string = len(text), sys.getsizeof(text)
            del text
            for family in args.families:
                if args.floor or family == "responses":
                    peak, _, exact = measure(family, "floor", port, count)
                    mark = "" if exact else "  (ru_maxrss)"
                    print(_row(count, f"{family} floor", chars, string, peak) + mark)
                for client in args.clients:
                    peak, seen, exact = measure(family, client, port, count)
                    name = family if client == "adapter" else f"{family} {client}"
                    seen_deltas = (seen.delta_chars, seen.delta_crc)
                    if expected != seen_deltas or expected != (
                        seen.end_chars,
                        seen.end_crc,
                    ):
                        raise SystemExit(f"{name}: the answer was not the text sent")
                    if seen.string_bytes != string:
                        raise SystemExit(
                            f"{name}: the block-end string is not the text's"
                        )
                    target = TARGET_RATIO * string + TARGET_CONSTANT
                    print(
                        _row(count, name, chars, string, peak)
                        + f" {target / MIB:>10.2f}  {'yes' if peak <= target else 'NO'}"
                        + ("" if exact else "  (ru_maxrss)")
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
