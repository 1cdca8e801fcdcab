"""The names ``dsh_llm`` exports: the vocabulary other code and its tests rely
on, sorted and complete."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import dsh_llm

# Names the foundation provides.
FOUNDATION_NAMES = {
    "GenerateOptions",
    "Message",
    "ToolSchema",
    "TextBlock",
    "ReasoningBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "BlockStart",
    "TextDelta",
    "ReasoningDelta",
    "ToolCallDelta",
    "BlockEnd",
    "UsageChunk",
    "Finish",
    "FinishReason",
    "TokenUsage",
    "LlmFailure",
    "LlmError",
    "CallId",
    "AbortController",
    "AbortSignal",
    "chunk_to_dict",
    "chunk_from_dict",
    "attribution_headers",
}

# Names later issues add; checked once they exist.
LATER_NAMES = (
    "LlmAdapter",
    "LlmRuntime",
    "BlockAssembler",
    "assert_chunk_sequence",
    "validate_stream",
    "trace_stream",
)


def test_all_is_sorted_without_duplicates() -> None:
    assert dsh_llm.__all__ == sorted(dsh_llm.__all__)
    assert len(set(dsh_llm.__all__)) == len(dsh_llm.__all__)


def test_all_holds_the_foundation_names_of_the_design() -> None:
    assert set(dsh_llm.__all__) >= FOUNDATION_NAMES


@pytest.mark.parametrize("name", LATER_NAMES)
def test_later_design_names_are_exported_once_importable(name: str) -> None:
    if not hasattr(dsh_llm, name):
        pytest.skip(f"{name} is provided by a later issue")
    assert name in dsh_llm.__all__


def test_every_name_in_all_is_importable() -> None:
    module = importlib.import_module("dsh_llm")
    for name in dsh_llm.__all__:
        assert getattr(module, name) is not None, name


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from dsh_llm import *", namespace)
    namespace.pop("__builtins__")

    assert set(namespace) == set(dsh_llm.__all__)


def test_exports_are_the_defining_objects() -> None:
    from dsh_llm.errors import LlmError
    from dsh_llm.protocol import Message
    from dsh_llm.serde import chunk_to_dict
    from dsh_llm.signal import AbortSignal

    assert dsh_llm.LlmError is LlmError
    assert dsh_llm.Message is Message
    assert dsh_llm.chunk_to_dict is chunk_to_dict
    assert dsh_llm.AbortSignal is AbortSignal


def test_version_is_a_string() -> None:
    assert isinstance(dsh_llm.__version__, str)
    assert dsh_llm.__version__.count(".") >= 2


def _api_page() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "tools" / "api_page.py"
    spec = importlib.util.spec_from_file_location("api_page", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_root_exports_at_most_40_names() -> None:
    assert len(dsh_llm.__all__) <= 40


def test_no_private_module_keeps_an_all() -> None:
    # A private module's names are re-exported by its package, which is the
    # one place to import them from.
    for info in pkgutil.walk_packages(dsh_llm.__path__, "dsh_llm."):
        if any(part.startswith("_") for part in info.name.split(".")):
            module = importlib.import_module(info.name)
            assert not hasattr(module, "__all__"), info.name


def test_docs_api_lists_every_public_name_once() -> None:
    page = _api_page()
    text = page.PAGE.read_text(encoding="utf-8")
    assert text == page.render(), "docs/api.md is out of date: python tools/api_page.py"
    # Every root name and every name of a public module is on the page.
    listed = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", text))
    for module in page.public_modules():
        for name in getattr(module, "__all__", ()):
            assert name in listed, f"{module.__name__}.{name}"
