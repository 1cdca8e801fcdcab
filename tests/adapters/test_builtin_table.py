"""The one table of built-in routes (dsh_llm.adapters.BUILTIN_FAMILIES) agrees
with the families, the hosted-service profiles, the plugins and the entry points."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from dsh_llm.adapters import BUILTIN_FAMILIES
from dsh_llm.adapters import WireAdapter
from dsh_llm.adapters import builtin_family
from dsh_llm.adapters.chat.services import SERVICES
from dsh_llm.plugins.builtin import PLUGINS
from dsh_llm.plugins.builtin import BuiltinPlugin

SETUP_CFG = Path(__file__).resolve().parents[2] / "setup.cfg"


@pytest.mark.parametrize("row", BUILTIN_FAMILIES, ids=lambda row: row.route)
def test_every_row_names_a_wire_adapter_class(row) -> None:
    cls = row.adapter_class()
    assert issubclass(cls, WireAdapter)
    assert builtin_family(row.route) is row
    config = cls.family.config_class
    if row.service is None and row.wire is None and row.key_env is not None:
        # The default key variable the CLI names is the config's own default.
        fields = {field.name: field for field in config.__attrs_attrs__}
        assert fields["api_key_env"].default == row.key_env


def test_a_hosted_service_row_is_its_profile() -> None:
    rows = {row.service: row for row in BUILTIN_FAMILIES if row.service is not None}
    assert set(rows) == set(SERVICES)
    for name, row in rows.items():
        profile = SERVICES[name]
        assert (row.route, row.display_name, row.key_env) == (
            name,
            profile.display_name,
            profile.api_key_env,
        )


def test_each_family_row_has_its_plugin_and_entry_point() -> None:
    parser = configparser.ConfigParser()
    parser.read(SETUP_CFG, encoding="utf-8")
    lines = parser["options.entry_points"]["dsh_llm.plugins"].strip().splitlines()
    points = dict(line.split(" = ") for line in lines)
    for row in BUILTIN_FAMILIES:
        if row.service is not None:
            assert (
                row.plugin not in points or PLUGINS[row.plugin].family.service is None
            )
            continue
        plugin = PLUGINS[row.plugin]
        assert isinstance(plugin, BuiltinPlugin)
        assert plugin.family is row
        module, _, name = points[row.plugin].partition(":")
        assert module == "dsh_llm.plugins.builtin"
        import dsh_llm.plugins.builtin as builtin

        assert getattr(builtin, name) is plugin
