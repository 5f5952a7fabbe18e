"""``ozsim calibrate``: measured costs cached per device and read by fusion."""

from __future__ import annotations

import json

import pytest

from ozsim import Simulator, gates
from ozsim.calibration import cache_path, calibrate, cost_model, load
from ozsim.cli import main
from ozsim.gemm.cost import CostModel


def test_measured_costs_replace_the_model_and_extrapolate_by_its_ratios():
    m = CostModel(1e10, 1e10, 2, 1e-5, 8)
    cal = CostModel(1e10, 1e10, 2, 1e-5, 8, measured=((2, 1e-9), (3, 4e-9)))
    assert cal.gate_time(20, 2) == pytest.approx(1e-9 * 2**20 + 1e-5)
    assert cal.gate_time(20, 3) == pytest.approx(4e-9 * 2**20 + 1e-5)
    ratio = (m.gate_time(20, 6) - 1e-5) / (m.gate_time(20, 3) - 1e-5)
    assert cal.gate_time(20, 6) == pytest.approx(4e-9 * 2**20 * ratio + 1e-5)


def test_calibrate_writes_the_cache_and_runs_plan_with_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert load("cpu") is None and cost_model("cpu", "zgemm")[1] is False
    assert main(["calibrate", "--device", "cpu", "--qubits", "8", "--max-gate-qubits", "3",
                 "--backends", "zgemm,int8x9"]) == 0
    out = capsys.readouterr().out
    assert "nanoseconds per amplitude" in out and str(cache_path("cpu")) in out
    doc = json.loads(cache_path("cpu").read_text())
    assert set(doc["costs"]) == {"zgemm", "int8x9"} and doc["num_qubits"] == 8
    table = load("cpu")
    assert set(table["zgemm"]) == {1, 2, 3} and all(t > 0 for t in table["int8x9"].values())
    model, calibrated = cost_model("cpu", "int8x9")
    assert calibrated and dict(model.measured) == table["int8x9"]
    assert cost_model("cpu", "int8-auto")[1] is False  # not measured: the shipped model
    res = Simulator(backend="zgemm", device="cpu").run(gates.brickwork(8, depth=3, seed=1))
    assert res.metadata["fusion"]["chosen_by"] == "cost model (calibrated)"


def test_calibrate_rejects_bad_sizes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(ValueError, match="need 1 <= max_gate_qubits < num_qubits"):
        calibrate("cpu", ["zgemm"], 4, 4)
    with pytest.raises(ValueError, match="unknown backend"):
        calibrate("cpu", ["fp99"], 6, 2)
