"""The benchmarks a user runs keep running: their CPU-sized modes, briefly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def test_gate_bench_cpu_mode_writes_its_table_and_json(tmp_path):
    out = tmp_path / "gate.json"
    res = subprocess.run(
        [sys.executable, str(BENCH / "gate_bench.py"), "--device", "cpu", "--qubits", "8",
         "--gates", "1,2", "--reps", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=True)
    assert "| method | d=1 | d=2 |" in res.stdout
    doc = json.loads(out.read_text())
    rows = doc["rows"]
    assert {r["method"] for r in rows} == {"zgemm-gemm", "int8-auto:T=1", "int8-crt-auto:T=0"}
    assert {r["d"] for r in rows} == {1, 2}
    for r in rows:
        assert set(r) == {"device", "N", "d", "method", "seconds", "floor_s", "x_floor",
                          "applied_qubits"}
        assert r["seconds"] > 0 and r["x_floor"] > 0 and r["N"] == 8
        # 1- and 2-qubit gates as a Simulator applies them: scheme I's on 3 qubits, scheme
        # II's (up to 15 moduli) and native ones as they are
        assert r["applied_qubits"] == (3 if r["method"] == "int8-auto:T=1" else r["d"])
    assert "* applied as I (x) U on more qubits" in res.stdout


def test_gate_bench_unpadded_times_the_d_qubit_kernels(tmp_path):
    out = tmp_path / "gate.json"
    subprocess.run(
        [sys.executable, str(BENCH / "gate_bench.py"), "--device", "cpu", "--qubits", "6",
         "--gates", "2", "--reps", "1", "--methods", "int8-crt-auto:T=0", "--unpadded",
         "--json", str(out)], capture_output=True, text=True, timeout=300, check=True)
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["d"], row["applied_qubits"]) == (2, 2)


def test_single_bench_cpu_mode_writes_its_table_and_json(tmp_path):
    out = tmp_path / "single.json"
    res = subprocess.run(
        [sys.executable, str(BENCH / "single_bench.py"), "--device", "cpu", "--sizes", "64",
         "--reps", "1", "--karatsuba", "--phi", "0.1,1", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=True)
    assert ("| n | phi | backend | ms | TFLOP/s | x CGEMM | max rel err | norm-wise err | x err |"
            in res.stdout)
    rows = json.loads(out.read_text())["rows"]
    names = ["cgemm", "tf32x3", "tf32x4", "fp16-le", "int8-auto", "tf32x3+S", "tf32x4+S",
             "fp16-le+S", "tf32x3+K", "tf32x4+K", "fp16-le+K"]
    assert [(r["phi"], r["backend"]) for r in rows] == [(p, b) for p in (0.1, 1.0) for b in names]
    for r in rows:
        assert r["n"] == 64 and r["ms"] > 0 and r["x_cgemm"] > 0
        assert 0 < r["normwise_err"] < 1e-5  # FP32-level against the complex128 product
        assert 0 < r["x_cgemm_err"] < 5


def test_qv_bench_cpu_brickwork_with_the_gemm_path_baseline(tmp_path):
    out = tmp_path / "qv.json"
    res = subprocess.run(
        [sys.executable, str(BENCH / "qv_bench.py"), "--device", "cpu", "--qubits", "8",
         "--depth", "3", "--brickwork", "2", "--backends", "zgemm,zgemm-gemm,int8-auto:T=1@3",
         "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=True)
    assert "zgemm-gemm" in res.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [r["backend"] for r in rows] == ["zgemm", "zgemm-gemm", "int8-auto:T=1@3"]
    assert max(map(int, rows[2]["blocks"])) <= 3
    for r in rows[1:]:
        assert r["seconds"] > 0 and r["N"] == 8
        assert 0 <= r["max_abs_diff_vs_first"] < 1e-12  # the same state, whichever path


def test_qv_bench_compares_the_first_amplitudes_and_takes_the_norm(tmp_path):
    out = tmp_path / "qv.json"
    subprocess.run(
        [sys.executable, str(BENCH / "qv_bench.py"), "--device", "cpu", "--qubits", "8",
         "--depth", "3", "--brickwork", "2", "--backends", "zgemm,int8-crt-auto:T=0",
         "--compare-first", "16", "--repeat", "2", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=True)
    rows = json.loads(out.read_text())["rows"]
    assert [r["backend"] for r in rows] == ["zgemm", "int8-crt-auto:T=0"]
    for r in rows:
        assert abs(r["norm"] - 1) < 1e-13 and r["peak_memory_bytes"] >= 16 * 2**8
        assert len(r["all_seconds"]) == 2 and r["seconds"] == min(r["all_seconds"])
    assert 0 <= rows[1]["max_abs_diff_vs_first"] < 1e-12


def test_gate_bench_baseline_marks_the_cells_slower_than_an_earlier_run(tmp_path):
    # an earlier run whose d = 1 cell was (impossibly) fast and d = 2 cell slow: now, d = 1 is
    # slower than it and marked, d = 2 is not; a cell the baseline lacks is not compared
    base = tmp_path / "base.json"
    row = dict(device="cpu", N=6, method="zgemm-gemm", seconds=1.0, floor_s=1.0)
    base.write_text(json.dumps({"device": "cpu", "rows": [
        dict(row, d=1, x_floor=1e-9, applied_qubits=1),
        dict(row, d=2, x_floor=1e9, applied_qubits=2)]}))
    out = tmp_path / "gate.json"
    res = subprocess.run(
        [sys.executable, str(BENCH / "gate_bench.py"), "--device", "cpu", "--qubits", "6",
         "--gates", "1,2,3", "--reps", "1", "--methods", "zgemm-gemm", "--baseline", str(base),
         "--json", str(out)], capture_output=True, text=True, timeout=300, check=True)
    assert "1 of 2 cells slower than the baseline" in res.stdout
    assert "d = 1 zgemm-gemm:" in res.stdout and "d = 2 zgemm-gemm:" not in res.stdout
    rows = {r["d"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows[1]["x_baseline"] > 1e6 and rows[2]["x_baseline"] < 1e-6
    assert "x_baseline" not in rows[3]


def test_gate_bench_baseline_that_cannot_be_read_fails_before_timing(tmp_path):
    res = subprocess.run(
        [sys.executable, str(BENCH / "gate_bench.py"), "--device", "cpu", "--qubits", "6",
         "--gates", "1", "--baseline", str(tmp_path / "missing.json"),
         "--json", str(tmp_path / "gate.json")], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "missing.json" in res.stderr
    assert not (tmp_path / "gate.json").exists()
