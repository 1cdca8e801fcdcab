"""Errors and their stable codes.

Contracts callers may rely on:

- Every failure the library reports is an ``LlmError`` (a ``HarnessError``) whose
  ``code`` is a stable UPPER_SNAKE string; route on ``code``, never on the message.
  The known codes are the members of ``ErrorCode``; ``ERROR_CODES`` documents when
  each is raised and whether a retry may help. The set is open: an unknown finish
  reason becomes its upper-cased value (``CONTENT_FILTER``) and an unlisted HTTP
  status becomes ``HTTP_<status>``.
- ``LlmError.failure`` is a frozen ``LlmFailure`` holding only the facts that were
  supplied; constructing an ``LlmError`` with invalid facts raises ``TypeError`` or
  ``ValueError`` (not ``LlmError``).
- Messages never contain a secret. ``LlmError`` pickles (for process pools).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any
from typing import Final

import attrs

from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import RateLimits
from dsh_llm.protocol import TokenUsage

__all__ = [
    "CONTEXT_WINDOW_EXCEEDED_CODE",
    "EMPTY_RESPONSE_CODE",
    "ERROR_CODES",
    "INVALID_CREDENTIAL_CODE",
    "QUOTA_EXCEEDED_CODE",
    "ErrorCode",
    "ErrorCodeInfo",
    "HarnessError",
    "LlmError",
    "error_chain",
    "is_context_window_exceeded_error",
    "is_harness_error",
    "is_quota_exceeded_error",
    "normalize_llm_failure",
]


class ErrorCode(StrEnum):
    """The known stable error codes. Values equal the TypeScript harness's.

    ``LlmError.code`` is typed ``str`` because the set is open; compare with
    ``error.code == ErrorCode.RATE_LIMIT`` (members are ``str``).
    """

    UNKNOWN = "UNKNOWN"
    NO_ADAPTER = "NO_ADAPTER"
    INVALID_ADAPTER = "INVALID_ADAPTER"
    DUPLICATE_ADAPTER = "DUPLICATE_ADAPTER"
    REGISTRATION_DISPOSED = "REGISTRATION_DISPOSED"
    INVALID_CATALOG = "INVALID_CATALOG"
    INVALID_MODEL_INFO = "INVALID_MODEL_INFO"
    INVALID_MODEL_CONTEXT = "INVALID_MODEL_CONTEXT"
    INVALID_MODEL_MAX_TOKENS = "INVALID_MODEL_MAX_TOKENS"
    INVALID_MODEL_REASONING = "INVALID_MODEL_REASONING"
    UNSUPPORTED_REASONING_EFFORT = "UNSUPPORTED_REASONING_EFFORT"
    INVALID_PREPARED_CALL = "INVALID_PREPARED_CALL"
    ABORTED = "ABORTED"
    TIMEOUT = "TIMEOUT"
    TRANSPORT = "TRANSPORT"
    AUTH = "AUTH"
    RATE_LIMIT = "RATE_LIMIT"
    QUOTA = "QUOTA"
    CONTEXT_WINDOW_EXCEEDED = "CONTEXT_WINDOW_EXCEEDED"
    INVALID_REQUEST = "INVALID_REQUEST"
    SERVER = "SERVER"
    EMPTY_RESPONSE = "EMPTY_RESPONSE"
    STREAM_CLOSED = "STREAM_CLOSED"
    MALFORMED_RESPONSE = "MALFORMED_RESPONSE"
    MISSING_CREDENTIAL = "MISSING_CREDENTIAL"
    INVALID_CREDENTIAL = "INVALID_CREDENTIAL"
    UNSUPPORTED_CONTENT = "UNSUPPORTED_CONTENT"
    INVARIANT = "INVARIANT"
    # Raised only by optional TypeScript features this library does not have;
    # listed so logs written by either side share one vocabulary.
    INVALID_DIRECTORY = "INVALID_DIRECTORY"
    DUPLICATE_DIRECTORY = "DUPLICATE_DIRECTORY"
    INVALID_DISCOVERY = "INVALID_DISCOVERY"
    DUPLICATE_DISCOVERY = "DUPLICATE_DISCOVERY"
    NO_DISCOVERY = "NO_DISCOVERY"
    FILES_API = "FILES_API"
    INVALID_RESPONSE = "INVALID_RESPONSE"
    # Added by this project (not in the TypeScript harness).
    UNSUPPORTED_OPTION = "UNSUPPORTED_OPTION"
    INVALID_CHUNK = "INVALID_CHUNK"
    INVALID_MESSAGE = "INVALID_MESSAGE"
    PLUGIN_LOAD = "PLUGIN_LOAD"
    UNKNOWN_FINISH_REASON = "UNKNOWN_FINISH_REASON"
    INVALID_BATCH_REQUEST = "INVALID_BATCH_REQUEST"
    INVALID_CASSETTE = "INVALID_CASSETTE"
    PAUSE_TURN = "PAUSE_TURN"
    INVALID_OPTIONS = "INVALID_OPTIONS"
    INVALID_JSON_OUTPUT = "INVALID_JSON_OUTPUT"
    MISSING_ATTACHMENT = "MISSING_ATTACHMENT"
    INVALID_ATTACHMENT = "INVALID_ATTACHMENT"


@attrs.frozen(kw_only=True)
class ErrorCodeInfo:
    """What a code means: when it is raised and whether retrying may help."""

    when: str
    """The situation that produces the code."""
    retry_may_help: bool
    """Whether an identical retry can succeed (the default retry policy retries
    ``EMPTY_RESPONSE``, ``RATE_LIMIT``, ``SERVER``, ``TIMEOUT`` and ``TRANSPORT``)."""


def _info(when: str, retry_may_help: bool = False) -> ErrorCodeInfo:
    return ErrorCodeInfo(when=when, retry_may_help=retry_may_help)


ERROR_CODES: Final[dict[ErrorCode, ErrorCodeInfo]] = {
    ErrorCode.UNKNOWN: _info(
        "An adapter raised something that is not a HarnessError; the runtime "
        "reports it with this code."
    ),
    ErrorCode.NO_ADAPTER: _info("No adapter is registered for the requested route."),
    ErrorCode.INVALID_ADAPTER: _info(
        "A registration names no route, an empty route, or an adapter whose "
        "provider_info does not match the route."
    ),
    ErrorCode.DUPLICATE_ADAPTER: _info(
        "A route is already registered, or listed twice in one registration."
    ),
    ErrorCode.REGISTRATION_DISPOSED: _info(
        "replace() was called on a disposed registration."
    ),
    ErrorCode.INVALID_CATALOG: _info(
        "An adapter's list_models() returned a bad or duplicate entry."
    ),
    ErrorCode.INVALID_MODEL_INFO: _info(
        "resolve_model() returned info for another provider or model, or an empty name."
    ),
    ErrorCode.INVALID_MODEL_CONTEXT: _info(
        "Resolved model info has a context window that is not a positive int."
    ),
    ErrorCode.INVALID_MODEL_MAX_TOKENS: _info(
        "Resolved model info has a default max tokens that is not a positive int."
    ),
    ErrorCode.INVALID_MODEL_REASONING: _info(
        "Resolved model info lists no efforts, a bad or duplicate effort, or a "
        "default effort that is not listed."
    ),
    ErrorCode.UNSUPPORTED_REASONING_EFFORT: _info(
        "The requested reasoning effort is not offered by the model or deployment; "
        "raised before any request is sent."
    ),
    ErrorCode.INVALID_PREPARED_CALL: _info(
        "A prepared call was reused, or its options changed the call config it "
        "was prepared for."
    ),
    ErrorCode.ABORTED: _info("The caller aborted the request through its signal."),
    ErrorCode.TIMEOUT: _info(
        "No connection within the connect bound (10 s), no data within "
        "stream_idle_timeout_ms, the stream outlived total_timeout_ms, or a "
        "non-streaming request (a model listing) outlived its deadline. "
        "call_with_retry's normal policy does not re-run it once content reached "
        "the consumer.",
        True,
    ),
    ErrorCode.TRANSPORT: _info(
        "Sending the request or reading the body failed (DNS, refused connection, "
        "TLS, a reset). call_with_retry's normal policy does not re-run it once "
        "content reached the consumer: the provider dropped mid-generation.",
        True,
    ),
    ErrorCode.AUTH: _info("The provider rejected the credentials (HTTP 401/403)."),
    ErrorCode.RATE_LIMIT: _info(
        "The provider is rate limiting (HTTP 429 that is not a quota problem); "
        "provider_retry_after_ms tells how long to wait when the provider said.",
        True,
    ),
    ErrorCode.QUOTA: _info(
        "The account's quota, balance or credits are exhausted; retrying does not "
        "help until they are topped up."
    ),
    ErrorCode.CONTEXT_WINDOW_EXCEEDED: _info(
        "The request does not fit the model's context window."
    ),
    ErrorCode.INVALID_REQUEST: _info(
        "The provider rejected the request as invalid (HTTP 400/413/422 and similar)."
    ),
    ErrorCode.SERVER: _info(
        "The provider failed (HTTP 5xx, or an error reported inside the stream: "
        "an error payload, an error: field or an event: error frame such as "
        "Overloaded).",
        True,
    ),
    ErrorCode.EMPTY_RESPONSE: _info(
        "The provider completed without any content (no body, or a stop with no "
        "block).",
        True,
    ),
    ErrorCode.STREAM_CLOSED: _info(
        "The answer was cut short: the body ended before its terminal marker "
        "([DONE] or equivalent), whatever its framing (a close-delimited body, or "
        "a chunked one closed before its last chunk), including an unterminated "
        "final event; or the marker came after content without any finish reason "
        "(a server interrupting a running request, see local-servers.md); or an "
        "adapter's stream ended without a finish (the runtime's error finish). "
        "Partial output must be discarded; the default retry policy does not "
        "retry it, since the provider may have done the work already."
    ),
    ErrorCode.MALFORMED_RESPONSE: _info(
        "The provider sent a payload that is not the documented format (e.g. an "
        "SSE data payload that is not JSON), or a non-streaming answer (a model "
        "listing) larger than its cap (8 MiB by default)."
    ),
    ErrorCode.MISSING_CREDENTIAL: _info(
        "No API key was given and its environment variable is unset or empty."
    ),
    ErrorCode.INVALID_CREDENTIAL: _info(
        "The API key is blank or has characters no HTTP header can carry."
    ),
    ErrorCode.UNSUPPORTED_CONTENT: _info(
        "The request holds content the model or adapter cannot take (e.g. an "
        "image for a text-only model), or the answer holds content no block of "
        "the chunk protocol carries (e.g. audio from a Gemini speech model)."
    ),
    ErrorCode.INVARIANT: _info(
        "A chunk stream broke the protocol's rules (see dsh_llm.validator)."
    ),
    ErrorCode.INVALID_DIRECTORY: _info(
        "TypeScript harness only (configurable-provider directory): an empty or "
        "invalid directory entry. Never raised by this library."
    ),
    ErrorCode.DUPLICATE_DIRECTORY: _info(
        "TypeScript harness only: a configurable provider declared twice. Never "
        "raised by this library."
    ),
    ErrorCode.INVALID_DISCOVERY: _info(
        "TypeScript harness only (model discovery): an empty namespace or a "
        "request without provider and base URL. Never raised by this library."
    ),
    ErrorCode.DUPLICATE_DISCOVERY: _info(
        "TypeScript harness only: a second model discovery for one namespace. "
        "Never raised by this library."
    ),
    ErrorCode.NO_DISCOVERY: _info(
        "TypeScript harness only: no model discovery serves the namespace. Never "
        "raised by this library."
    ),
    ErrorCode.FILES_API: _info(
        "TypeScript harness only (DeepSeek Files API): a non-2xx Files API reply. "
        "Never raised by this library."
    ),
    ErrorCode.INVALID_RESPONSE: _info(
        "TypeScript harness only (DeepSeek Files API): a malformed Files API reply. "
        "Never raised by this library."
    ),
    ErrorCode.UNSUPPORTED_OPTION: _info(
        "A request field the adapter cannot honour was set (a caching control the "
        "wire lacks, too); it is refused rather than silently dropped. Also a "
        "token count asked of a wire without a counting endpoint."
    ),
    ErrorCode.INVALID_CHUNK: _info(
        "JSON given to chunk_from_dict or a JSON Lines reader is not a valid "
        "chunk, or an adapter yielded an object that is not a chunk (the "
        "runtime's error finish)."
    ),
    ErrorCode.INVALID_MESSAGE: _info(
        "JSON given to message_from_dict is not a valid message."
    ),
    ErrorCode.UNKNOWN_FINISH_REASON: _info(
        "The provider ended with a finish reason outside the vocabulary that is "
        "not a short identifier (or holds a secret), so it cannot serve as the "
        "code itself; the message shows it, redacted and cut short."
    ),
    ErrorCode.PAUSE_TURN: _info(
        "The provider paused the turn before it was complete (Anthropic's "
        "pause_turn: a server tool loop reached its iteration limit); send the "
        "partial assistant turn back unchanged to let the model continue."
    ),
    ErrorCode.PLUGIN_LOAD: _info(
        "A plugin or composition entry could not be loaded (bad config, missing "
        "module or injected service); nothing was registered."
    ),
    ErrorCode.INVALID_BATCH_REQUEST: _info(
        "A line of a batch requests file is not a valid request (not a JSON "
        "object, an unknown, missing or ill-typed key, or an id an earlier line "
        "already used); the message names the line and the key."
    ),
    ErrorCode.INVALID_CASSETTE: _info(
        "A cassette file (dsh_llm.testing.cassette) cannot be read: not JSON "
        "Lines, an unknown format version, or a missing or mistyped field; the "
        "message names the line and key path."
    ),
    ErrorCode.INVALID_OPTIONS: _info(
        "JSON given to dsh_llm.serde.options_from_dict is not a valid request "
        "(GenerateOptions); the message names the key path."
    ),
    ErrorCode.INVALID_JSON_OUTPUT: _info(
        "A structured answer read by dsh_llm.structured.parse_json (or "
        "reply.parsed) is not JSON, does not match its schema (the supported "
        "subset), or does not fit its type; the message says where (the path of "
        "the first mismatch)."
    ),
    ErrorCode.MISSING_ATTACHMENT: _info(
        "An image block names an attachment the attachment store does not hold; "
        "raised before any request is sent."
    ),
    ErrorCode.INVALID_ATTACHMENT: _info(
        "Bytes given to dsh_llm.attachments are not a PNG, JPEG, GIF or WebP image "
        "whose size can be read from its header, or are empty."
    ),
}
"""When each known code is raised and whether a retry may help."""

CONTEXT_WINDOW_EXCEEDED_CODE: Final = ErrorCode.CONTEXT_WINDOW_EXCEEDED.value
"""The code of a request rejected because it exceeds the context window."""
QUOTA_EXCEEDED_CODE: Final = ErrorCode.QUOTA.value
"""The code of an exhausted account quota or balance."""
EMPTY_RESPONSE_CODE: Final = ErrorCode.EMPTY_RESPONSE.value
"""The code of a completed response that carried no content."""
INVALID_CREDENTIAL_CODE: Final = ErrorCode.INVALID_CREDENTIAL.value
"""The code of a supplied API key that cannot be used."""


class HarnessError(Exception):
    """Base of the library's errors: a message plus a stable routing ``code``.

    ``cause`` becomes ``__cause__`` (as with ``raise ... from cause``).
    """

    def __init__(
        self, message: str, code: str, *, cause: BaseException | None = None
    ) -> None:
        _require_text("message", message)
        _require_text("code", code)
        # Plain str copies: an ``ErrorCode`` member would otherwise show up as
        # ``<ErrorCode.X: 'X'>`` in reprs and carry its class into pickles.
        super().__init__(str.__str__(message))
        self.code: str = str.__str__(code)
        """The stable routing key."""
        if cause is not None:
            self.__cause__ = cause

    @property
    def message(self) -> str:
        """The human-readable message (``str(error)`` puts the code in front)."""
        return str(self.args[0])

    def __str__(self) -> str:
        """``[CODE] message``: the code reads first in a log line or a notebook."""
        return f"[{self.code}] {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.__getstate__()))

    def __getstate__(self) -> dict[str, Any]:
        # ``vars`` keeps attributes a subclass sets in its own ``__init__``
        # (and ``__notes__``), which ``_rebuild`` restores without calling it.
        return {
            **vars(self),
            "message": self.message,
            "code": self.code,
            **self._extra_state(),
        }

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


def _rebuild(cls: type[HarnessError], state: dict[str, Any]) -> HarnessError:
    error = cls.__new__(cls)
    HarnessError.__init__(error, state.pop("message"), state.pop("code"))
    for key, value in state.items():
        object.__setattr__(error, key, value)
    return error


def _require_text(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"error {name} must be a str, got {type(value).__name__}")
    if value == "":
        raise ValueError(f"error {name} must not be empty")


class LlmError(HarnessError):
    """A model call failed. Carries the failure's facts besides message and code.

    Args:
        message: One plain sentence naming the provider and the fact.
        code: Stable routing code (an ``ErrorCode`` value or another UPPER_SNAKE
            string).
        status: HTTP status (int in 100..599), when there was a response.
        provider_retry_after_ms: Delay the provider asked for, finite and > 0.
        request_id: Provider-issued request id, non-empty.
        rate_limits: The rate limits the refusing response reported (a 429's
            headers).
        cause: The underlying exception, kept as ``__cause__``.

    Raises:
        TypeError, ValueError: when a fact is invalid (naming the field).
    """

    def __init__(
        self,
        message: str,
        code: str,
        *,
        status: int | None = None,
        provider_retry_after_ms: float | None = None,
        request_id: str | None = None,
        rate_limits: RateLimits | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, code, cause=cause)
        self.failure: LlmFailure = LlmFailure(
            message=self.message,
            code=self.code,
            status=status,
            provider_retry_after_ms=provider_retry_after_ms,
            request_id=request_id,
            rate_limits=rate_limits,
        )
        """A frozen snapshot of the facts, ready for a ``Finish``."""
        self.usage: TokenUsage | None = None
        """The usage the provider reported before the failure (set by
        ``dsh_llm.collect``, so a failed attempt can still be billed);
        ``None`` when none was reported or the error did not come from a
        stream."""

    @classmethod
    def from_failure(
        cls, failure: LlmFailure, *, cause: BaseException | None = None
    ) -> LlmError:
        """The error that carries exactly ``failure``'s facts."""
        return cls(
            failure.message,
            failure.code,
            status=failure.status,
            provider_retry_after_ms=failure.provider_retry_after_ms,
            request_id=failure.request_id,
            rate_limits=failure.rate_limits,
            cause=cause,
        )

    @property
    def status(self) -> int | None:
        """The HTTP status, when known."""
        return self.failure.status

    @property
    def provider_retry_after_ms(self) -> float | None:
        """The provider-requested retry delay in ms, when given."""
        return self.failure.provider_retry_after_ms

    @property
    def request_id(self) -> str | None:
        """The provider's request id, when given."""
        return self.failure.request_id

    @property
    def rate_limits(self) -> RateLimits | None:
        """The rate limits the refusing response reported, when it did."""
        return self.failure.rate_limits

    @property
    def retryable(self) -> bool:
        """Whether an identical retry may succeed: the code's ``retry_may_help``
        in ``ERROR_CODES`` (``False`` for a code outside the table). Advice for
        callers; the retry policies decide on their own code lists."""
        info = ERROR_CODES.get(self.code)  # type: ignore[call-overload]
        return info is not None and info.retry_may_help

    def _extra_state(self) -> dict[str, Any]:
        return {"failure": self.failure}

    def __repr__(self) -> str:
        parts = [repr(self.message), f"code={self.code!r}"]
        for name in ("status", "provider_retry_after_ms", "request_id", "rate_limits"):
            value = getattr(self.failure, name)
            if value is not None:
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


def is_harness_error(value: object) -> bool:
    """Whether ``value`` is a real ``HarnessError`` instance."""
    return isinstance(value, HarnessError)


_FALLBACK_MESSAGE: Final = "LLM adapter failed"


def normalize_llm_failure(exc: BaseException) -> LlmFailure:
    """The ``LlmFailure`` to report for an exception an adapter raised.

    An exception carrying a valid ``failure`` whose code equals its own ``code``
    keeps those facts. Otherwise the message is ``str(exc)`` (or ``"LLM adapter
    failed"`` when empty or unreadable) and the code is the ``HarnessError``'s code
    or ``UNKNOWN``; foreign ``code`` attributes are never trusted. Hostile
    ``__str__`` or properties cannot make this raise.
    """
    carried = _carried_failure(exc)
    if carried is not None:
        return carried
    return LlmFailure(message=_safe_message(exc), code=_harness_code(exc))


def _harness_code(exc: BaseException) -> str:
    """The code of a ``HarnessError`` when it is a non-empty str, else ``UNKNOWN``.

    A subclass may turn ``code`` into a property that raises or returns junk.
    """
    try:
        if isinstance(exc, HarnessError):
            code = exc.code
            if isinstance(code, str) and code != "":
                return str.__str__(code)
    except Exception:
        pass
    return ErrorCode.UNKNOWN.value


def _carried_failure(exc: BaseException) -> LlmFailure | None:
    try:
        if not isinstance(exc, HarnessError):
            return None
        failure = getattr(exc, "failure", None)
        code = getattr(exc, "code", None)
        if not isinstance(failure, LlmFailure) or not isinstance(code, str):
            return None
        return failure if failure.code == str.__str__(code) else None
    except Exception:
        return None


def _safe_message(exc: BaseException) -> str:
    try:
        if isinstance(exc, HarnessError) and type(exc).__str__ is HarnessError.__str__:
            # The message alone: the code is reported beside it.
            text = exc.message
        else:
            text = str(exc)
    except Exception:
        return _FALLBACK_MESSAGE
    return text if isinstance(text, str) and text != "" else _FALLBACK_MESSAGE


_CONTEXT_PATTERNS: Final = tuple(
    re.compile(p, re.I)
    for p in (
        r"(?:^|[^a-z0-9])context[\s_-](?:length|window)[\s_-]"
        r"(?:exceed(?:ed|s)?|overflow(?:ed)?|limit[\s_-]exceeded)(?:$|[^a-z0-9])",
        r"\b(?:maximum|max)(?:\s+(?:allowed|supported))?\s+context\s+(?:length|window)\b",
        r"\b(?:request|prompt|input|messages?)\s+(?:is\s+|are\s+)?too\s+(?:large|long)"
        r"\s+for\s+(?:(?:this|the)\s+)?(?:model(?:'s)?\s+)?context(?:\s+window)?\b",
        r"\b(?:input|prompt|request)\s+(?:is\s+)?too\s+(?:long|large)\s+for\s+"
        r"(?:this|the)\s+model\b",
        r"\b(?:input|prompt|request|messages?)\b.{0,40}"
        r"\b(?:exceed(?:s|ed)?|overflows?|is\s+larger\s+than)\b.{0,40}"
        r"\b(?:the\s+)?(?:model(?:'s)?\s+)?context(?:\s+(?:length|window))?\b",
    )
)

_QUOTA_PATTERNS: Final = tuple(
    re.compile(p, re.I)
    for p in (
        r"\binsufficient[\s_-]+(?:quota|balance|credits?)\b",
        r"\b(?:quota|usage[\s_-]+limit)[\s_-]+(?:exceeded|exhausted|reached)\b",
        r"\bexceed(?:ed|s)?[\s_-]+(?:(?:your|the)[\s_-]+)?(?:current[\s_-]+)?quota\b",
        r"\b(?:balance|credits?)[\s_-]+(?:exhausted|depleted)\b",
        r"\bout[\s_-]+of[\s_-]+(?:credits?|budget)\b",
    )
)


def is_context_window_exceeded_error(detail: str) -> bool:
    """Whether provider error ``detail`` (code, type and message joined by spaces)
    says the request exceeded the model's context window."""
    return any(p.search(detail) for p in _CONTEXT_PATTERNS)


def is_quota_exceeded_error(detail: str) -> bool:
    """Whether provider error ``detail`` says the account's quota, balance, credits
    or budget are exhausted (as opposed to a transient rate limit)."""
    return any(p.search(detail) for p in _QUOTA_PATTERNS)


def error_chain(exc: BaseException) -> str:
    """Render ``exc`` with its ``__cause__`` chain, for logs and notices only.

    The outermost message comes first (the type name when the message is empty);
    each cause is appended with ``": "`` unless it repeats the text before it;
    exception-group members are bracketed and ``"; "``-joined. Cycles render as
    ``<circular cause>`` and a node that cannot be rendered as
    ``<unrenderable value>``. Never parse the result; route on codes.
    """
    path: set[int] = set()

    def render(node: BaseException) -> str:
        if id(node) in path:
            return "<circular cause>"
        path.add(id(node))
        try:
            # A group's str() appends "(N sub-exceptions)"; the members are
            # rendered below, so only its own message is wanted here.
            # A library error shows its message alone, as its code is routed on
            # (and printed) apart.
            text = (
                node.message
                if isinstance(node, BaseExceptionGroup | HarnessError)
                else str(node)
            )
            message = text if text != "" else type(node).__name__
            members = ""
            if isinstance(node, BaseExceptionGroup) and node.exceptions:
                members = f" [{'; '.join(render(e) for e in node.exceptions)}]"
            cause = node.__cause__
            cause_text = "" if cause is None else render(cause)
            suffix = "" if cause_text in ("", message) else f": {cause_text}"
            return f"{message}{members}{suffix}"
        except Exception:
            return "<unrenderable value>"
        finally:
            path.discard(id(node))

    return render(exc)
