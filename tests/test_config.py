"""Environment switches: validated, with an error naming the allowed values."""

from __future__ import annotations

import pytest

from ozsim import config
from ozsim.simulator import get_array_module


def test_defaults_and_values(monkeypatch):
    for sw in config.SWITCHES:
        monkeypatch.delenv(sw.name, raising=False)
        assert config.get(sw.name) == sw.default
        assert sw.default in sw.allowed
    monkeypatch.setenv("OZSIM_CRT_FUSED", " 0 ")
    assert config.get("OZSIM_CRT_FUSED") == "0"
    monkeypatch.setenv("OZSIM_DEVICE", "CPU")
    assert config.get("OZSIM_DEVICE") == "cpu"


@pytest.mark.parametrize("name,bad", [("OZSIM_DEVICE", "gpu"), ("OZSIM_CRT_FUSED", "yes"),
                                      ("OZSIM_GATHER", "off"), ("OZSIM_CUBLASLT", "2")])
def test_bad_values_are_rejected_naming_the_allowed_ones(monkeypatch, name, bad):
    monkeypatch.setenv(name, bad)
    allowed = ", ".join(config.switch(name).allowed)
    with pytest.raises(config.ConfigError, match=f"{name}='{bad}' is not allowed; use one of "
                       f"{allowed}"):
        config.get(name)


def test_device_switch_reaches_the_simulator(monkeypatch):
    monkeypatch.setenv("OZSIM_DEVICE", "gpu")
    with pytest.raises(config.ConfigError, match="OZSIM_DEVICE"):
        get_array_module("auto")
    monkeypatch.setenv("OZSIM_DEVICE", "cpu")
    assert get_array_module("auto")[1] == "cpu"


def test_readme_documents_every_switch():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = readme[readme.index("## Configuration"):]
    for sw in config.SWITCHES:
        assert f"| `{sw.name}` | `{sw.default}`" in table, sw.name
