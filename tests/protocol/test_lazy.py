"""``lazy_exports``: names imported from their modules on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dsh_llm.adapters
import dsh_llm.testing


def test_a_name_is_imported_once_then_stored_in_the_package() -> None:
    script = (
        "import sys, dsh_llm.adapters as a\n"
        "assert 'dsh_llm.adapters._wire.writer' not in sys.modules\n"
        "assert 'BlockWriter' in dir(a)\n"
        "writer = a.BlockWriter\n"
        "assert 'dsh_llm.adapters._wire.writer' in sys.modules\n"
        "assert vars(a)['BlockWriter'] is writer\n"
        "from dsh_llm.adapters._wire.writer import BlockWriter\n"
        "assert writer is BlockWriter\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


@pytest.mark.parametrize("package", [dsh_llm.adapters, dsh_llm.testing])
def test_an_unknown_name_is_an_attribute_error(package: object) -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        _ = package.nothing_here  # type: ignore[attr-defined]
    assert not hasattr(package, "nothing_here")
