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
        assert set(r) == {"device", "N", "d", "method", "seconds", "floor_s", "x_floor"}
        assert r["seconds"] > 0 and r["x_floor"] > 0 and r["N"] == 8
