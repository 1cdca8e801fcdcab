"""What the plugin tests share: composition files and load errors."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition


def load_error(*args: Any, **kwargs: Any) -> PluginLoadError:
    """The ``PluginLoadError`` ``load_composition(*args, **kwargs)`` raises."""
    with pytest.raises(PluginLoadError) as caught:
        load_composition(*args, **kwargs)
    error = caught.value
    assert error.code == ErrorCode.PLUGIN_LOAD
    assert isinstance(error, LlmError)
    return error


def write(path: Path, text: str) -> Path:
    """Write ``text`` (dedented, UTF-8) to ``path`` and return it."""
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path
