"""dsh_llm.transport.attribution: the user-agent every provider request carries."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import attrs
import pytest

import dsh_llm
from dsh_llm.transport.attribution import APP_IDENTITY
from dsh_llm.transport.attribution import PROJECT_URL
from dsh_llm.transport.attribution import AppIdentity
from dsh_llm.transport.attribution import attribution_headers
from dsh_llm.transport.attribution import user_agent

FORK = AppIdentity(
    product="fork-agent", version="9.9.9", url="https://example.com/fork-agent"
)


def test_version_comes_from_the_installed_package_metadata() -> None:
    assert APP_IDENTITY.version == metadata.version("dsh-llm")


def test_the_version_is_the_package_version_read_without_package_metadata() -> None:
    assert APP_IDENTITY.version == dsh_llm.__version__
    # Importing the library reads no installed-package metadata (I/O at import).
    script = "import sys, dsh_llm\nprint('importlib.metadata' in sys.modules)\n"
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "False\n", "")


def test_identity_holds_only_static_public_facts() -> None:
    assert attrs.asdict(APP_IDENTITY) == {
        "product": "dsh-llm",
        "version": metadata.version("dsh-llm"),
        "url": "https://github.com/deepseek-ai/deepseek-harness",
    }
    assert APP_IDENTITY.url == PROJECT_URL


def test_user_agent_renders_product_version_and_url_comment() -> None:
    assert user_agent() == (
        f"dsh-llm/{metadata.version('dsh-llm')} "
        "(+https://github.com/deepseek-ai/deepseek-harness)"
    )
    assert user_agent(FORK) == "fork-agent/9.9.9 (+https://example.com/fork-agent)"


def test_headers_contain_only_a_lowercase_user_agent() -> None:
    assert attribution_headers() == {"user-agent": user_agent()}
    assert attribution_headers(FORK) == {
        "user-agent": "fork-agent/9.9.9 (+https://example.com/fork-agent)"
    }


def test_headers_are_a_new_dict_each_call() -> None:
    first = attribution_headers()
    first["x-extra"] = "1"

    assert attribution_headers() == {"user-agent": user_agent()}


@pytest.mark.parametrize(
    ("changes", "error", "field"),
    [
        ({"product": ""}, ValueError, "product"),
        ({"product": "fork agent"}, ValueError, "product"),
        ({"product": "fork/agent"}, ValueError, "product"),
        ({"product": 7}, TypeError, "product"),
        ({"version": "1.0\r\nx-evil: 1"}, ValueError, "version"),
        ({"version": ""}, ValueError, "version"),
        ({"url": "https://e.com/a b"}, ValueError, "url"),
        ({"url": "https://e.com/)"}, ValueError, "url"),
        ({"url": "https://e.com/\n"}, ValueError, "url"),
        ({"url": ""}, ValueError, "url"),
    ],
)
def test_identity_that_cannot_form_a_header_is_rejected(
    changes: dict[str, object], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=f"AppIdentity.{field}"):
        attrs.evolve(FORK, **changes)  # type: ignore[arg-type]


def test_identity_accepts_local_versions_and_query_urls() -> None:
    identity = AppIdentity(
        product="acme_bot", version="0.1.0+local.2", url="https://e.com/p?q=1#x"
    )

    assert user_agent(identity) == "acme_bot/0.1.0+local.2 (+https://e.com/p?q=1#x)"
