"""backend="auto": each fused block through the candidate with the lowest modelled cost; the
choice follows the cost table in use, which the metadata names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ozsim.simulator as simulator_module
from ozsim import Simulator
from ozsim.auto import CANDIDATES, AutoPlan, is_auto, plan
from ozsim.cli import main
from ozsim.gemm.cost import CostModel

ROOT = Path(__file__).resolve().parents[1]
QFT = ROOT / "circuits" / "qft_n16.qasm"
BRICK = ROOT / "circuits" / "brickwork_n12_d4_L8.qasm"


def _model(rate: float) -> CostModel:
    """A model whose d-qubit gate costs 2**d / rate (no memory term)."""
    return CostModel(1e30, rate, 0.0, 0.0, 8)


def _plan(cheapest: dict[int, str]) -> AutoPlan:
    """Candidates whose costs make ``cheapest[d]`` win at d (others 10x dearer)."""
    class Pick(CostModel):
        def gate_time(self, n, d):  # noqa: D102 - the test's own table
            return 1.0 if cheapest.get(d, "zgemm") == self.name else 10.0

    models = []
    for name in CANDIDATES:
        m = Pick(1e12, 1e12, 1.0, 0.0, 8)
        object.__setattr__(m, "name", name)
        models.append((name, m))
    return AutoPlan(tuple(models), "test table")


def test_on_the_cpu_auto_runs_every_block_natively_and_is_the_zgemm_run():
    auto = Simulator(backend="auto", device="cpu").run(QFT)
    native = Simulator(backend="zgemm", device="cpu").run(QFT)
    md = auto.metadata["auto"]
    assert md["table"] == "registry defaults" and md["blocks"] == {"zgemm": auto.metadata["num_gates"]}
    assert auto.metadata["fusion"]["blocks"] == native.metadata["fusion"]["blocks"]
    np.testing.assert_array_equal(auto.statevector, native.statevector)
    d, backend, predicted, measured, passes = md["choices"][0]
    assert backend == "zgemm" and predicted > 0 and measured > 0
    one_pass = 32 * 2**auto.metadata["num_qubits"] / dict(plan("cpu").models)["zgemm"].bandwidth
    assert passes == pytest.approx(measured / one_pass)


@pytest.mark.parametrize("winner", CANDIDATES)
def test_the_choice_follows_the_cost_table(winner, monkeypatch):
    monkeypatch.setattr(simulator_module, "auto_plan",
                        lambda device: _plan({d: winner for d in range(1, 9)}))
    res = Simulator(backend="auto", device="cpu", max_fused_qubits=3).run(BRICK)
    assert res.metadata["auto"]["blocks"] == {winner: res.metadata["num_gates"]}
    assert res.metadata["auto"]["table"] == "test table"
    ref = Simulator(backend="zgemm", device="cpu", max_fused_qubits=3).run(BRICK)
    np.testing.assert_allclose(res.statevector, ref.statevector, rtol=0, atol=1e-13)
    kinds = set(map(str, res.metadata["splits"]))  # what the GEMMs themselves report
    expect = {"zgemm": lambda k: k == "zgemm", "int8-auto": str.isdigit,
              "int8-crt-auto": lambda k: k.startswith("crt")}[winner]
    assert kinds and all(expect(k) for k in kinds), kinds


def test_blocks_of_different_sizes_go_to_different_schemes(monkeypatch):
    monkeypatch.setattr(simulator_module, "auto_plan",
                        lambda device: _plan({1: "int8-auto", 2: "int8-crt-auto", 3: "zgemm"}))
    res = Simulator(backend="auto", device="cpu", max_fused_qubits=0).run(QFT)
    by_d = {}
    for d, backend, *_ in res.metadata["auto"]["choices"]:
        by_d.setdefault(d, set()).add(backend)
    assert by_d == {1: {"int8-auto"}, 2: {"int8-crt-auto"}}


def test_plan_takes_the_cheapest_with_ties_to_the_earlier_candidate():
    p = AutoPlan((("zgemm", _model(1e9)), ("int8-auto", _model(1e9)),
                  ("int8-crt-auto", _model(2e9))), "t")
    assert p.choose(10, 3)[0] == "int8-crt-auto"
    p = AutoPlan((("zgemm", _model(1e9)), ("int8-auto", _model(1e9))), "t")
    assert p.choose(10, 3) == ("zgemm", pytest.approx(8 * 2**13 / 1e9))
    assert p.gate_time(10, 3) == p.choose(10, 3)[1] and p.max_limit == 8


def test_the_metadata_names_a_calibrated_table(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from ozsim import calibration

    path = calibration.cache_path("cpu")
    path.parent.mkdir(parents=True)
    table = {"zgemm": {"1": 1e-6, "2": 1e-6}, "int8-auto": {"1": 1e-12, "2": 1e-12}}
    path.write_text(json.dumps({"format": calibration.FORMAT, "device": "cpu", "costs": table}))
    p = plan("cpu")
    assert p.table == f"calibrated ({path})"
    assert p.choose(12, 2)[0] == "int8-auto"  # measured far cheaper on this (made-up) machine
    res = Simulator(backend="auto", device="cpu", max_fused_qubits=2).run(BRICK)
    assert res.metadata["auto"]["table"] == f"calibrated ({path})"
    assert set(res.metadata["auto"]["blocks"]) == {"int8-auto"}


def test_names_and_messages():
    assert is_auto("auto") and is_auto(" AUTO ") and not is_auto("int8-auto") and not is_auto(3)
    with pytest.raises(ValueError, match=r"unknown backend 'autox'; .*, or auto"):
        Simulator(backend="autox")
    with pytest.raises(ValueError, match=r"splits must be in 3\.\.18"):
        Simulator(backend="int8x30")


def test_cli_prints_the_choice_in_one_line(capsys):
    assert main(["run", str(QFT), "--backend", "auto", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("backend"))
    assert line.startswith("backend   auto (T = 1 bits) on cpu; blocks by backend: zgemm ")
    assert line.endswith("(cost table: registry defaults)")


def test_check_takes_auto_with_its_threshold():
    from ozsim.accuracy import BackendSpec, parse_backend_specs

    assert parse_backend_specs("zgemm,auto,auto:T=0", (1.0, 2.0)) == [
        BackendSpec("zgemm"), BackendSpec("auto", 1.0), BackendSpec("auto", 2.0),
        BackendSpec("auto", 0.0)]


@pytest.mark.gpu
def test_auto_on_the_gpu_runs_and_agrees_with_zgemm():
    from conftest import cupy_or_skip

    cupy_or_skip()
    from ozsim.gates import brickwork

    circuit = brickwork(12, 8, gate_qubits=4, seed=3)  # no QASM: the GPU machine lacks Qiskit
    res = Simulator(backend="auto", device="gpu").run(circuit)
    ref = Simulator(backend="zgemm", device="cpu").run(circuit)
    md = res.metadata["auto"]
    assert md["blocks"] and set(md["blocks"]) <= set(CANDIDATES)
    assert all(c[3] > 0 and c[4] > 0 for c in md["choices"])  # CUDA events, read at the end
    assert sum(c[3] for c in md["choices"]) <= res.metadata["wall_time_s"]
    np.testing.assert_allclose(res.statevector, ref.statevector, rtol=0, atol=1e-13)


def test_auto_is_the_default_everywhere(capsys):
    from ozsim.primitives import EstimatorV2, SamplerV2
    from ozsim.qiskit import OzsimBackend

    assert Simulator().backend == "auto"
    assert OzsimBackend().options.backend == "auto"
    assert EstimatorV2().options["backend"] == SamplerV2().options["backend"] == "auto"
    res = Simulator(device="cpu").run(BRICK)
    assert res.metadata["backend"] == "auto" and res.metadata["auto"]["blocks"]
    forced = Simulator(backend="int8-auto", device="cpu").run(BRICK)  # one scheme, forced
    assert forced.metadata["backend"] == "int8-auto" and "auto" not in forced.metadata
