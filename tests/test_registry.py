"""The backend registry: one list that name parsing, fusion, ``ozsim info`` and ``ozsim check``
read."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ozsim.accuracy import parse_backend_specs
from ozsim.cli import main
from ozsim.fusion import cost_model
from ozsim.gemm import parse_backend, registry, zgemm
from ozsim.testing import exact_zgemm, max_relative_error, ozaki_matrix


def test_every_name_parses_to_its_scheme():
    seen = {}
    for scheme in registry.SCHEMES:
        for pat in scheme.names:
            lo, hi = pat.counts or (None, None)
            names = [pat.pattern] if lo is None else [
                pat.pattern.replace("{" + pat.pattern.split("{")[1].split("}")[0] + "}", str(c))
                for c in (lo, hi)]
            for name in names:
                b = registry.parse(name.upper())
                assert b.scheme is scheme and b.pattern is pat and b.name == name
                seen[name] = b.count
    assert seen == {"zgemm": None, "int8x3": 3, "int8x18": 18, "int8-auto": None,
                    "int8-crt2": 2, "int8-crt20": 20, "int8-crt-auto": None,
                    "fp16x3": 3, "fp16x24": 24, "fp16-auto": None, "int8-cr": None,
                    "fp16-cr": None}
    assert parse_backend("int8x9") == ("int8", 9)


@pytest.mark.parametrize("bad,msg", [("int8x2", "number of splits must be in 3..18"),
                                     ("int8-crt21", "number of moduli must be in 2..20"),
                                     ("fp16x25", "number of splits must be in 3..24"),
                                     ("fp16x", "unknown backend 'fp16x'; expected zgemm, "
                                      "int8x{s} with s = 3..18, int8-auto")])
def test_bad_names_say_what_is_allowed(bad, msg):
    with pytest.raises(ValueError, match=msg.replace("{", r"\{").replace("}", r"\}")):
        registry.parse(bad)


def test_each_scheme_runs_its_names_through_zgemm():
    rng = np.random.default_rng(5)
    a, b = ozaki_matrix(rng, 6, 16, 1.0), ozaki_matrix(rng, 16, 7, 1.0)
    exact = exact_zgemm(a, b)
    for name in registry.all_names():
        c, info = zgemm(a, b, backend=name, T=0, return_info=True)
        assert info.backend == name
        assert max_relative_error(c, exact) < 1e-13, name
        prepared = registry.parse(name).scheme.prepare(a)
        np.testing.assert_array_equal(zgemm(prepared, b, backend=name, T=0), c)


def test_costs_come_from_the_registry():
    for scheme in registry.SCHEMES:
        for device in scheme.devices:
            for name in registry.all_names():
                if registry.parse(name).scheme is scheme:
                    got, want = cost_model(device, name), scheme.costs[device]
                    if scheme.one_pass_check is None or device != "gpu":
                        assert got is want
                    else:  # (the one-pass range this GPU's kernels take: test_one_pass)
                        assert replace(got, one_pass_qubits=want.one_pass_qubits) == want
    with pytest.raises(ValueError, match="does not run on 'tpu'"):
        cost_model("tpu", "zgemm")


def test_check_all_expands_to_one_name_per_pattern():
    specs = parse_backend_specs("all", [0])
    assert [s.backend for s in specs] == registry.all_names()
    assert [s.T for s in specs] == [None, None, 0.0, None, 0.0, None, 0.0, None, None]


def test_info_lists_every_backend_and_switch(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for scheme in registry.SCHEMES:
        for pat in scheme.names:
            assert pat.display() in out and pat.summary in out
    assert "OZSIM_CRT_FUSED=" in out
