"""The ``ozsim`` command line, in-process through ``main(argv)`` and once as a real console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ozsim.cli import main

ROOT = Path(__file__).resolve().parents[1]
GHZ = ROOT / "circuits" / "ghz_n20.qasm"
BRICK = ROOT / "circuits" / "brickwork_n12_d4_L8.qasm"


def test_run_prints_summary(capsys):
    assert main(["run", str(BRICK), "-T", "1", "--device", "cpu", "--backend", "int8-auto"]) == 0
    out = capsys.readouterr().out
    assert "12 qubits" in out and "int8-auto (T = 1 bits) on cpu" in out
    assert "splits    {" in out and "peak working memory" in out and "top 8 probabilities" in out


def test_run_defaults_to_auto(capsys):
    assert main(["run", str(BRICK), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "backend   auto (T = 1 bits) on cpu; blocks by backend: zgemm 10" in out


def test_run_shots_counts_and_json_output(tmp_path, capsys):
    out_json = tmp_path / "r.json"
    argv = ["run", str(GHZ), "--shots", "400", "--seed", "7", "--device", "cpu",
            "--output", str(out_json)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "counts (400 shots, 2 outcomes)" in out
    doc = json.loads(out_json.read_text())
    assert set(doc["counts"]) == {"0" * 20, "1" * 20} and sum(doc["counts"].values()) == 400
    assert doc["probabilities"] == pytest.approx({"0" * 20: 0.5, "1" * 20: 0.5}, abs=1e-12)
    # same seed, same counts
    assert main(argv) == 0
    assert json.loads(out_json.read_text())["counts"] == doc["counts"]


def test_run_npy_output_matches_backend_zgemm(tmp_path):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    assert main(["run", str(BRICK), "--backend", "zgemm", "--output", str(a)]) == 0
    assert main(["run", str(BRICK), "--backend", "int8x10", "--output", str(b)]) == 0
    psi_a, psi_b = np.load(a), np.load(b)
    assert psi_a.shape == (2**12,) and np.max(np.abs(psi_a - psi_b)) < 1e-13


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "missing.qasm"], "missing.qasm"),
        (["run", str(GHZ), "--backend", "int4x2"], "unknown backend 'int4x2'"),
        (["run", str(GHZ), "-T", "-1"], "T must be >= 0"),
        (["run", str(GHZ), "--shots", "-3"], "argument --shots: must be an integer >= 0, got -3"),
        (["run", str(GHZ), "--shots", "1.5"], "argument --shots: must be an integer >= 0, got '1.5'"),
        (["run", str(GHZ), "--top", "-1"], "argument --top: must be an integer >= 0, got -1"),
        (["run", str(GHZ), "--seed", "-2"], "argument --seed: must be an integer >= 0, got -2"),
        (["run", str(GHZ), "--fusion-max-qubits", "-1"],
         "argument --fusion-max-qubits: must be an integer >= 0, got -1"),
        (["check", str(GHZ), "--fusion-max-qubits", "x"],
         "argument --fusion-max-qubits: must be an integer >= 0, got 'x'"),
        (["run", str(GHZ), "-T", "nan"], "T must be >= 0 bits and finite, got nan"),
        (["run", str(GHZ), "--output", "r.txt"], "--output must end in .json or .npy"),
        (["run", str(GHZ), "--output", "/nonexistent/dir/r.json"],
         "the directory '/nonexistent/dir' does not exist"),
        (["run", str(GHZ), "--output", str(ROOT / "circuits.json" / "r.json")], "does not exist"),
    ],
)
def test_bad_input_exit_2_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ozsim: error: ") and message in err and err.count("\n") == 1


def test_malformed_qasm_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.qasm"
    bad.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0]\ncx q[0], q[1];\n')
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.qasm:" in err and err.count("\n") == 1 and "Traceback" not in err


def test_unsupported_operation_exit_2(tmp_path, capsys):
    f = tmp_path / "opaque.qasm"
    f.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nopaque magic(a) q;\nqreg q[2];\n'
                 'h q[0];\nmagic(0.5) q[1];\n')
    assert main(["run", str(f)]) == 2
    err = capsys.readouterr().err
    assert "magic" in err and err.count("\n") == 1


def test_mid_circuit_circuit_prints_counts(tmp_path, capsys):
    f = tmp_path / "reset.qasm"
    f.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncreg c[2];\nx q[0];\n'
                 'measure q[0] -> c[0];\nreset q[0];\nmeasure q[0] -> c[1];\n')
    assert main(["run", str(f), "--shots", "64", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "per-shot trajectories" in out and "counts (64 shots, 1 outcomes)" in out
    assert "  01  64" in out  # c0 = 1 (x then measure), c1 = 0 (after reset)
    assert main(["run", str(f), "--output", str(tmp_path / "psi.npy")]) == 2
    assert "needs a final state" in capsys.readouterr().err


def test_fusion_flag(capsys):
    assert main(["run", str(BRICK), "--fusion-max-qubits", "0", "--backend", "zgemm"]) == 0
    assert "fusion    off" in capsys.readouterr().out
    assert main(["run", str(BRICK), "--fusion-max-qubits", "6", "--backend", "zgemm"]) == 0
    out = capsys.readouterr().out
    assert "blocks of <= 6 qubits (user)" in out


def test_gpu_requested_without_gpu_exit_2(monkeypatch, capsys):
    monkeypatch.setattr("ozsim.simulator.gpu_available", lambda: (False, "CuPy is not importable"))
    assert main(["run", str(GHZ), "--device", "gpu"]) == 2
    assert "device='gpu' was requested" in capsys.readouterr().err


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ozsim ") and "numpy" in out and ("GPU" in out)


def test_console_script_runs_the_readme_example():
    exe = shutil.which("ozsim", path=str(Path(sys.executable).parent))
    assert exe, "the ozsim console script is not installed next to this Python"
    proc = subprocess.run([exe, "run", str(BRICK), "-T", "1"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "splits" in proc.stdout


def test_version_has_one_source():
    import importlib.metadata
    from pathlib import Path

    import ozsim

    assert importlib.metadata.version("ozsim") == ozsim.__version__
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    assert ozsim.__version__ not in pyproject  # the version is written once, in ozsim/__init__.py
