"""A complete adapter plugin: the skeleton to copy for your own provider.

``MyAdapter`` is a stand-in model that echoes the last user text back, word by
word, so the plugin runs without a network or a real key. Replace its ``stream``
with a call to your provider and a translation of its events into chunks.

Load it from ``my_llm_adapter.yml`` (next to this file)::

    from dsh_llm.plugins import load_composition

    composition = load_composition("examples/my_llm_adapter.yml")
    for chunk in composition.runtime.stream(options):  # options.provider="my-provider"
        ...

or run ``MY_API_KEY=anything python examples/my_llm_adapter.py "hello there"``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs

from dsh_llm import ErrorCode
from dsh_llm import Finish
from dsh_llm import FinishReason
from dsh_llm import GenerateOptions
from dsh_llm import LlmAdapter
from dsh_llm import LlmError
from dsh_llm import StreamChunk
from dsh_llm import TextBlock
from dsh_llm import TextDelta
from dsh_llm.adapters import BlockWriter
from dsh_llm.credentials import Secret
from dsh_llm.plugins import PluginContext


class MyAdapter(LlmAdapter):
    """Echoes the last user message's text (a deterministic stand-in model)."""

    def __init__(self, api_key: str) -> None:
        # A Secret never shows itself in a repr, a log line or a traceback.
        self._api_key = Secret(api_key)

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        """Yield one text block echoing the last user text, then usage and finish
        (written by a ``BlockWriter``).

        Raises:
            LlmError: ``UNSUPPORTED_OPTION`` for a request an echo cannot honour
                (a system prompt, a temperature, tools, a reasoning effort, structured
                output or provider fields): an
                adapter refuses what it would otherwise drop without a word;
                ``ABORTED`` when ``options.signal`` aborts.
        """
        _refuse_what_an_echo_cannot_honour(options)
        if options.response_format or options.extra_body or options.extra_headers:
            raise LlmError(
                "my-llm-adapter: response_format, extra_body and extra_headers "
                "are not supported",
                ErrorCode.UNSUPPORTED_OPTION,
            )
        text = _cut_at_stop(_last_user_text(options), options.stop or ())
        words = re.findall(r"\s*\S+", text)
        limited = words[: options.max_tokens] if options.max_tokens else words
        # The writer keeps the protocol's rules (block order, usage then finish,
        # a failure raised after the usage already reported); an echo of
        # nothing is a plain stop here, not EMPTY_RESPONSE.
        writer = BlockWriter(provider="my-llm-adapter", empty_response_as_stop=True)
        try:
            block = writer.open("text")
            for word in limited:
                if options.signal is not None and options.signal.aborted:
                    raise LlmError(
                        "my-llm-adapter: the request was aborted", ErrorCode.ABORTED
                    )
                writer.append(block, word)
                yield from writer.take()
            writer.end(block)
            # An echo has no token counts: none is reported, so the usage says
            # null, never an invented 0.
            cut = len(limited) < len(words)
            writer.finish(FinishReason.MAX_TOKENS if cut else FinishReason.STOP)
            yield from writer.take()
        except LlmError:
            yield from writer.before_failure()
            raise


def _refuse_what_an_echo_cannot_honour(options: GenerateOptions) -> None:
    # Your provider honours most of these: send them, and refuse only the rest.
    refused = {
        "system": options.system is not None,
        "temperature": options.temperature is not None,
        "tools": bool(options.tools),
        "tool_choice": options.tool_choice not in (None, "auto", "none"),
        "reasoning_effort": options.reasoning_effort is not None,
    }
    for option, given in refused.items():
        if given:
            raise LlmError(
                f"my-llm-adapter: this model cannot honour {option}",
                ErrorCode.UNSUPPORTED_OPTION,
            )


def _last_user_text(options: GenerateOptions) -> str:
    for message in reversed(options.messages):
        if message.role == "user":
            return "".join(
                block.text for block in message.content if isinstance(block, TextBlock)
            )
    return ""


def _cut_at_stop(text: str, stop: tuple[str, ...]) -> str:
    cuts = [text.find(sequence) for sequence in stop if sequence in text]
    return text[: min(cuts)] if cuts else text


# --- the plugin: what a composition file loads ----------------------------------

name = "my-llm-adapter"
inject = ("llm",)


@attrs.frozen(kw_only=True)
class Config:
    """The plugin's config; YAML writes the keys in camelCase (``apiKey``)."""

    api_key: str = attrs.field(repr=False, validator=attrs.validators.min_len(1))
    """The provider key (write ``${MY_API_KEY}`` in YAML, not the key itself);
    ``repr=False`` keeps it out of the config's repr."""
    providers: list[str] = attrs.field(validator=attrs.validators.min_len(1))
    """The routes this adapter serves, e.g. ``[my-provider]``."""


def apply(ctx: PluginContext, config: Config) -> None:
    """Register ``MyAdapter`` for the configured routes (undone on dispose)."""
    ctx.llm.register_adapter(config.providers, MyAdapter(config.api_key))


if __name__ == "__main__":
    from dsh_llm import create_user_message
    from dsh_llm.plugins import load_composition

    prompt = " ".join(sys.argv[1:]) or "hello from my adapter"
    composition_file = Path(__file__).with_name("my_llm_adapter.yml")
    with load_composition(composition_file) as composition:
        request = GenerateOptions(
            provider="my-provider",
            model="echo-1",
            messages=(create_user_message(prompt),),
        )
        for chunk in composition.runtime.stream(request):
            if isinstance(chunk, TextDelta):
                print(chunk.text, end="", flush=True)
            elif isinstance(chunk, Finish):
                print(f"\n[finish: {chunk.reason.kind}]")
