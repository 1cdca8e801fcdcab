"""One model request: ``GenerateOptions`` and the values it is built from.

``GenerateOptions`` is immutable; derive a changed copy with ``options.evolve(...)``
(``attrs.evolve``). Construction checks every field's type and domain, so an adapter
receives only well-formed requests; whether a provider can honour a field is the
adapter's decision (it raises ``LlmError`` rather than dropping it).
"""

from __future__ import annotations

from typing import Any
from typing import Final

import attrs

from dsh_llm.protocol import checks as c
from dsh_llm.protocol import extras
from dsh_llm.protocol.content import ToolResultBlock
from dsh_llm.protocol.content import schema_field
from dsh_llm.protocol.display import clip
from dsh_llm.protocol.display import escaped
from dsh_llm.protocol.extras import ResponseFormat
from dsh_llm.protocol.message import Message
from dsh_llm.protocol.message import create_user_message
from dsh_llm.protocol.message import source_label
from dsh_llm.signal import AbortSignal

__all__ = [
    "DIRECT_ROUTE",
    "TOOL_CHOICE_KEYWORDS",
    "GenerateOptions",
    "LlmCallConfig",
    "ToolSchema",
    "call_config_equals",
]

TOOL_CHOICE_KEYWORDS: Final = ("auto", "none", "required")
"""``tool_choice`` values that are not tool names."""

DIRECT_ROUTE: Final = "direct"
"""``GenerateOptions.provider`` when none is given: enough to call an adapter
directly (``adapter.stream(options)``), where the route only names the caller in
messages. A runtime still needs a registered route: ``runtime.stream`` with it
raises ``NO_ADAPTER`` unless something is registered as ``"direct"``."""

PURPOSES: Final = ("compaction", "session-title")
"""Values of ``GenerateOptions.purpose`` for auxiliary calls."""


@attrs.frozen(kw_only=True)
class ToolSchema:
    """A tool the model may call, described by a JSON Schema."""

    name: str = attrs.field(validator=c.non_empty_str)
    """The tool's name, as the model will call it."""
    description: str = attrs.field(validator=c.is_str)
    """What the tool does, for the model."""
    parameters: dict[str, Any] = schema_field()  # noqa: RUF009
    """JSON Schema of the arguments object, sent verbatim. A private deep copy:
    changing the dict passed in later does not change the schema."""


def _temperature(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    c.finite_number(inst, attribute, value)
    assert isinstance(value, int | float)
    if value < 0:
        raise c.bad_value(inst, attribute.name, f"must be >= 0, got {value}")


def _stop_items(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    c.tuple_of(str)(inst, attribute, value)
    assert isinstance(value, tuple)
    if any(item == "" for item in value):
        raise c.bad_value(inst, attribute.name, "must not hold an empty string")


@attrs.frozen(kw_only=True)
class GenerateOptions:
    """One fully assembled model request.

    Only ``model`` and ``messages`` are required (``provider`` defaults to
    ``DIRECT_ROUTE``). ``signal`` is not compared, hashed or serialised; the
    mapping fields (``response_format.schema``, ``extra_body``,
    ``extra_headers``) are compared but not hashed.
    """

    provider: str = attrs.field(default=DIRECT_ROUTE, validator=c.non_empty_str)
    """The registered route that selects the adapter instance (``DIRECT_ROUTE``
    by default, for a direct adapter call)."""
    model: str = attrs.field(validator=c.non_empty_str)
    """The adapter-owned model id, passed through as is."""
    messages: tuple[Message, ...] = attrs.field(
        converter=c.to_tuple, validator=c.tuple_of(Message)
    )
    """The conversation after the system slot, in provider order."""
    system: str | None = attrs.field(default=None, validator=c.optional(c.is_str))
    """The system prompt, mapped to the provider's system slot."""
    reasoning_effort: str | None = attrs.field(
        default=None, validator=c.optional(c.non_empty_str)
    )
    """An adapter-owned reasoning effort id (e.g. ``high``), or the default."""
    tools: tuple[ToolSchema, ...] | None = attrs.field(
        default=None,
        converter=c.to_optional_tuple,
        validator=c.optional(c.tuple_of(ToolSchema)),
    )
    """The tools the model may call."""
    tool_choice: str | None = attrs.field(
        default=None, validator=c.optional(c.non_empty_str)
    )
    """``None`` (provider default), ``"auto"``, ``"none"``, ``"required"``, or the
    name of one of ``tools`` to force that tool."""
    temperature: float | None = attrs.field(default=None, validator=_temperature)
    """Sampling temperature, >= 0."""
    max_tokens: int | None = attrs.field(
        default=None, validator=c.optional(c.positive_int)
    )
    """Output cap in tokens."""
    stop: tuple[str, ...] | None = attrs.field(
        default=None, converter=c.to_optional_tuple, validator=_stop_items
    )
    """Stop sequences; output halts on any of them and the stop text is not emitted."""
    signal: AbortSignal | None = attrs.field(
        default=None,
        eq=False,
        hash=False,
        repr=False,
        validator=c.optional(c.instance_of(AbortSignal)),
    )
    """Cancellation; adapters must honour it."""
    session_id: str | None = attrs.field(
        default=None, validator=c.optional(c.non_empty_str)
    )
    """Routing identity of the session, when the caller has one."""
    purpose: str | None = attrs.field(
        default=None, validator=c.optional(c.one_of(*PURPOSES))
    )
    """``compaction`` or ``session-title`` for auxiliary calls, else ``None``."""
    response_format: ResponseFormat | None = attrs.field(
        default=None,
        converter=extras.to_response_format,
        validator=extras.check_response_format,
    )
    """Structured output: the JSON Schema the final text must follow (a bare
    schema mapping is converted, and so is a pydantic model, dataclass or
    ``TypedDict`` class: ``ResponseFormat.from_type``). An adapter that cannot
    honour it raises ``UNSUPPORTED_OPTION``; ``reply.parsed(City)`` or
    ``dsh_llm.structured.parse_json`` reads the answer."""
    extra_body: dict[str, Any] | None = attrs.field(
        default=None,
        converter=extras.to_extra_body,
        validator=extras.check_extra_body,
        hash=False,
    )
    """Provider fields merged last into the JSON request body, overriding what
    the adapter wrote. Unchecked: the provider judges them. Adapters that cannot
    send them raise ``UNSUPPORTED_OPTION``."""
    extra_headers: dict[str, str] | None = attrs.field(
        default=None,
        converter=extras.to_extra_headers,
        validator=extras.check_extra_headers,
        hash=False,
        repr=False,
    )
    """Request headers added to the call (values may be credentials: they are
    never shown in a ``repr`` or a message). A name the adapter sets itself is
    refused with ``UNSUPPORTED_OPTION``, never silently replaced."""
    cache_key: str | None = attrs.field(
        default=None, validator=c.optional(c.non_empty_str)
    )
    """A prompt-cache key: requests sharing a key and a prefix are routed to
    the same cache (OpenAI's ``prompt_cache_key``, chat completions and
    Responses). A wire without one refuses it with ``UNSUPPORTED_OPTION``
    (``docs/caching.md``)."""
    cached_content: str | None = attrs.field(
        default=None, validator=c.optional(c.non_empty_str)
    )
    """The name of content the provider already caches, used as the prompt's
    prefix (Gemini's ``cachedContent``: ``cachedContents/...``). A wire without
    one refuses it with ``UNSUPPORTED_OPTION``."""

    @classmethod
    def from_prompt(
        cls,
        model: str,
        text: str,
        *,
        system: str | None = None,
        provider: str = DIRECT_ROUTE,
        **options: Any,
    ) -> GenerateOptions:
        """A request of one user message ``text`` (the notebook shortcut).

        ``options`` are any other fields (``temperature=0``, ``tools=[...]``).

        Raises:
            TypeError, ValueError: as the constructor, for a bad field.
        """
        return cls(
            provider=provider,
            model=model,
            messages=(create_user_message(text),),
            system=system,
            **options,
        )

    def __attrs_post_init__(self) -> None:
        choice = self.tool_choice
        if choice is None or choice in ("auto", "none"):
            return
        names = [tool.name for tool in self.tools or ()]
        if not names:
            raise c.bad_value(
                self, "tool_choice", f"{choice!r} needs at least one tool in tools"
            )
        if choice != "required" and choice not in names:
            raise c.bad_value(
                self,
                "tool_choice",
                f"{choice!r} is neither 'auto', 'none', 'required' nor the name of "
                f"a tool in tools ({', '.join(names)})",
            )

    def evolve(self, **changes: Any) -> GenerateOptions:
        """A copy with ``changes`` applied (validated like a new value)."""
        return attrs.evolve(self, **changes)

    def _shown(self) -> list[tuple[str, str]]:
        """The fields a person reads, in order: model, route, the messages, then
        every field that is set. Header values and body values stay hidden."""
        shown = [("model", repr(self.model))]
        if self.provider != DIRECT_ROUTE:
            shown.append(("provider", repr(self.provider)))
        count = len(self.messages)
        messages = f"{count} message{'' if count == 1 else 's'}"
        if self.messages:
            last = self.messages[-1]
            messages += f" (last: {last.role} {clip(last.text, 40)})"
        shown.append(("messages", messages))
        if self.system is not None:
            shown.append(("system", clip(self.system, 40)))
        if self.tools is not None:
            shown.append(("tools", f"[{', '.join(t.name for t in self.tools)}]"))
        for name in (
            "tool_choice",
            "reasoning_effort",
            "temperature",
            "max_tokens",
            "stop",
            "session_id",
            "purpose",
            "cache_key",
            "cached_content",
        ):
            value = getattr(self, name)
            if value is not None:
                shown.append((name, repr(value)))
        if self.response_format is not None:
            strict = " (strict)" if self.response_format.strict else ""
            shown.append(("response_format", f"{self.response_format.name}{strict}"))
        if self.extra_body is not None:
            shown.append(("extra_body", f"keys [{', '.join(self.extra_body)}]"))
        if self.extra_headers is not None:
            shown.append(("extra_headers", f"[{', '.join(self.extra_headers)}]"))
        return shown

    def __repr__(self) -> str:
        """``GenerateOptions(model='m', messages=1 message (last: user 'Hi'),
        temperature=0)``: the fields that are set, the messages summed up; no
        header or ``extra_body`` value."""
        inner = ", ".join(f"{name}={value}" for name, value in self._shown())
        return f"GenerateOptions({inner})"

    def _repr_markdown_(self) -> str:
        """The request for a notebook: its fields, then each message."""
        rows = [
            f"| {name} | {escaped(value)} |"
            for name, value in self._shown()
            if name != "messages"
        ]
        lines = ["| field | value |", "|---|---|", *rows, ""]
        for position, message in enumerate(self.messages, 1):
            what = clip(message.text, 200) if message.text else ""
            calls = ", ".join(call.name for call in message.tool_calls)
            if calls:
                what += f" tool calls: {calls}"
            results = sum(
                isinstance(block, ToolResultBlock) for block in message.content
            )
            if results:
                what += f" {results} tool result{'' if results == 1 else 's'}"
            lines.append(
                f"{position}. **{message.role}** "
                f"({escaped(source_label(message.source))}) {escaped(what.strip())}"
            )
        return "\n".join(lines)

    def call_config(self) -> LlmCallConfig:
        """The six fields that decide what is called and how (those of
        ``LlmCallConfig``, copied from these options)."""
        return LlmCallConfig(
            **{name: getattr(self, name) for name in CALL_CONFIG_FIELDS}
        )


@attrs.frozen(kw_only=True)
class LlmCallConfig:
    """The call-shaping subset of ``GenerateOptions``: route, model and sampling."""

    provider: str = attrs.field(validator=c.non_empty_str)
    """The registered route."""
    model: str = attrs.field(validator=c.non_empty_str)
    """The model id."""
    reasoning_effort: str | None = attrs.field(
        default=None, validator=c.optional(c.non_empty_str)
    )
    """The reasoning effort id, or ``None`` for the default."""
    temperature: float | None = attrs.field(default=None, validator=_temperature)
    """Sampling temperature."""
    max_tokens: int | None = attrs.field(
        default=None, validator=c.optional(c.positive_int)
    )
    """Output cap in tokens."""
    stop: tuple[str, ...] | None = attrs.field(
        default=None, converter=c.to_optional_tuple, validator=_stop_items
    )
    """Stop sequences."""


CALL_CONFIG_FIELDS: Final = tuple(field.name for field in attrs.fields(LlmCallConfig))
"""The names of ``LlmCallConfig``'s fields, which ``GenerateOptions`` has too."""


def call_config_equals(a: LlmCallConfig, b: LlmCallConfig) -> bool:
    """Whether two configs select the same call: all six fields equal, ``stop``
    compared element-wise, and ``None`` different from any tuple (even empty)."""
    return a == b
