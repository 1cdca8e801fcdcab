"""What each server that speaks ``POST /v1/responses`` gets wrong, as values.

Contracts callers may rely on:

- ``ResponsesProfile`` is frozen; ``PROFILES`` holds one per known server
  (``openai``, ``vllm``, ``ollama``, ``lmstudio``, ``openrouter``,
  ``llamacpp``), keyed by ``ResponsesProfile.server``.
- Only what changes the request or the meaning of a reported value is a switch
  (accepted reasoning efforts, ``tool_choice`` support, images in tool
  results, zeros that mean "unknown", a cap cut the server does not mark).
  Every stream quirk (items out of
  order, repeated first argument fragments, missing ``output_item.done``...)
  is absorbed for every server by the translator, since reading one server's
  quirk is harmless on another.
- ``guess_server(base_url)`` is pure and total: OpenRouter's and OpenAI's hosts,
  then the default local ports (Ollama 11434, LM Studio 1234, vLLM 8000), else
  ``openai`` (never ``llamacpp``: its default port 8080 is too common, and its
  profile reads a cut into the usage, which only the user may ask for).
  ``profile_for(server)`` raises ``ValueError`` for an unknown name.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

import attrs

OPENAI_EFFORTS: Final = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""Every ``reasoning.effort`` the OpenAI 2026 types list."""


@attrs.frozen(kw_only=True)
class ResponsesProfile:
    """What differs between servers that speak the Responses API."""

    server: str
    """The profile's name (``openai``, ``vllm``...), the adapter's ``server=``."""
    provider: str
    """Display name used in messages, e.g. ``"Ollama (Responses API)"``."""
    reasoning_efforts: tuple[str, ...]
    """The ``reasoning.effort`` values the server accepts; any other effort is
    refused before I/O with ``UNSUPPORTED_REASONING_EFFORT``."""
    tool_choice: bool = True
    """Whether the server honours ``tool_choice``; when not, a choice other
    than ``auto`` is refused with ``UNSUPPORTED_OPTION``."""
    tool_result_images: bool = False
    """Whether the server reads a ``function_call_output`` whose ``output`` is
    a list of ``input_text``/``input_image`` parts; when not, an image in a
    tool result is refused with ``UNSUPPORTED_CONTENT``."""
    zero_means_unknown: bool = False
    """The server writes 0 for counts it does not track (Ollama: input on a
    KV-cache hit, cached and reasoning tokens always): a 0 there is ``None``."""
    named_tool_choice: bool = True
    """Whether the server honours a ``tool_choice`` naming one function; when
    not (llama-server falls back to ``auto``), such a choice is sent as
    ``required`` with only that function in ``tools``, which forces it."""
    unmarked_cap_cut: bool = False
    """The server ends an answer its output cap cut as ``completed``, with
    nothing marking the cut (llama-server): a ``completed`` answer whose
    ``usage.output_tokens`` reached the ``max_output_tokens`` sent is
    ``max-tokens`` (one whose natural end fell exactly on the cap too)."""


def _profile(
    server: str, name: str, reasoning_efforts: tuple[str, ...], **switches: bool
) -> ResponsesProfile:
    """``server``'s profile, displayed as ``<name> (Responses API)``;
    ``switches`` are the ``ResponsesProfile`` flags that differ from the
    defaults."""
    return ResponsesProfile(
        server=server,
        provider=f"{name} (Responses API)",
        reasoning_efforts=reasoning_efforts,
        **switches,
    )


_LOW_TO_HIGH: Final = ("low", "medium", "high")

OPENAI: Final = _profile(
    "openai",
    "OpenAI",
    OPENAI_EFFORTS,
    # The 2026 types let a function_call_output's output be a list of
    # input_text / input_image / input_file parts.
    tool_result_images=True,
)
# vLLM passes the effort to the chat template (gpt-oss reads low/medium/high).
VLLM: Final = _profile("vllm", "vLLM", _LOW_TO_HIGH)
OLLAMA: Final = _profile(
    "ollama",
    "Ollama",
    # Ollama maps minimal to low, xhigh to max and none to thinking off; any
    # other value is a 400 (ollama openai/openai.go).
    OPENAI_EFFORTS,
    # Ollama reads no tool_choice on this endpoint (openai/responses.go), so a
    # forced choice is refused rather than silently ignored.
    tool_choice=False,
    # Ollama reads a list output's images like a user message's
    # (openai/responses.go); vLLM, LM Studio and OpenRouter are not known to.
    tool_result_images=True,
    zero_means_unknown=True,
)
LMSTUDIO: Final = _profile("lmstudio", "LM Studio", _LOW_TO_HIGH)
OPENROUTER: Final = _profile(
    "openrouter",
    "OpenRouter",
    ("none", "minimal", "low", "medium", "high", "xhigh"),
)
LLAMACPP: Final = _profile(
    "llamacpp",
    "llama.cpp",
    # llama-server hands reasoning.effort to the chat template as
    # reasoning_effort (gpt-oss templates read low/medium/high).
    _LOW_TO_HIGH,
    # A named choice reaches its chat handler as an object where it wants a
    # string, and falls back to auto; required is enforced.
    named_tool_choice=False,
    # A max_output_tokens cut ends status "completed", like a natural end.
    unmarked_cap_cut=True,
)

PROFILES: Final[dict[str, ResponsesProfile]] = {
    profile.server: profile
    for profile in (OPENAI, VLLM, OLLAMA, LMSTUDIO, OPENROUTER, LLAMACPP)
}
"""Every known profile by name."""

DEFAULT_SERVER: Final = "openai"
"""The profile used when nothing in the base URL points at another server."""

_PORTS: Final = {11434: "ollama", 1234: "lmstudio", 8000: "vllm"}
"""The servers' default ports (``ollama serve``, ``lms server start``,
``vllm serve``)."""


def guess_server(base_url: str) -> str:
    """The profile name for ``base_url`` (see the module docstring); never raises."""
    try:
        parts = urlsplit(base_url.strip())
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return DEFAULT_SERVER
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return "openrouter"
    if host == "api.openai.com":
        return "openai"
    if port is not None and port in _PORTS:
        return _PORTS[port]
    return DEFAULT_SERVER


def profile_for(server: str) -> ResponsesProfile:
    """The profile named ``server``.

    Raises:
        ValueError: for a name not in ``PROFILES`` (the message lists them).
    """
    try:
        return PROFILES[server]
    except KeyError:
        names = ", ".join(PROFILES)
        raise ValueError(
            f"unknown Responses API server {server!r}; expected one of {names}"
        ) from None
