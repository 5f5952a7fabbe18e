"""Distributed state vectors (:mod:`ozsim.distributed`) on CPU ranks: ``mpiexec -n 2`` and
``-n 4`` runs of tests/mpi_worker.py, whose gathered state is compared with the one-process run
of the same circuit and backend: bitwise for the INT8 backends, within 1e-13 for zgemm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ozsim import Simulator
from ozsim.distributed import initial_layout

HERE = Path(__file__).parent
QASMBENCH = HERE / "data" / "qasmbench"


def _mpiexec() -> list[str]:
    """The launcher: ``$MPIEXEC`` (split on blanks, e.g. ``mpirun --allow-run-as-root`` for a
    system Open MPI that mpi4py was built against), else the environment's ``mpiexec`` (the
    MPICH wheel of the ``mpi`` extra), else the one on PATH."""
    pytest.importorskip("mpi4py")
    if os.environ.get("MPIEXEC"):
        return os.environ["MPIEXEC"].split()
    exe = Path(sys.executable).parent / "mpiexec"
    path = str(exe) if exe.exists() else shutil.which("mpiexec")
    if path is None:
        pytest.skip("no mpiexec (pip install -e '.[mpi]')")
    return [path]


def _run(ranks: int, cases: list[dict], device: str = "cpu") -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    if device == "cpu":
        env["OZSIM_DEVICE"] = "cpu"
    out = subprocess.run([*_mpiexec(), "-n", str(ranks), sys.executable,
                          str(HERE / "mpi_worker.py"), json.dumps(cases)],
                         capture_output=True, text=True, timeout=600, env=env,
                         cwd=HERE.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(cases), out.stdout + out.stderr
    return rows


def _check(rows):
    for r in rows:
        name = r["case"]["backend"]
        assert np.isfinite(r["max_abs_diff"]) and abs(r["norm"] - 1) < 1e-10, r
        assert r["ev_diff"] < 1e-12, r  # Pauli expectations by allreduce over the shards
        assert r.get("same_distribution", True), r  # shard-by-shard sampling
        if name == "zgemm":
            assert r["max_abs_diff"] <= 1e-13, r
        else:
            assert r["bitwise"], r
            assert r["splits"] == r["ref_splits"], r


BACKENDS = [("zgemm", 1.0), ("int8-auto", 0.0), ("int8-auto", 1.0), ("int8-crt-auto", 0.0),
            ("int8x7", 1.0)]


@pytest.mark.slow
def test_two_ranks_random_circuits_match_one_process():
    cases = [{"circuit": f"brickwork:{n}:{depth}:{d}:{seed}", "backend": b, "T": t, "fusion": f}
             for (n, depth, d, seed, f) in [(9, 8, 2, 5, 2), (10, 4, 3, 1, None), (8, 6, 2, 2, 0)]
             for b, t in BACKENDS]
    rows = _run(2, cases)
    _check(rows)
    assert any(r["swaps"] > 0 for r in rows)  # global qubits were touched and swapped in


@pytest.mark.slow
def test_two_ranks_qasmbench_circuits_match_one_process():
    names = ["adder_n10", "multiply_n13", "qf21_n15", "sat_n7", "bv_n14", "simon_n6"]
    cases = [{"circuit": str(QASMBENCH / f"{n}.qasm"), "backend": b, "T": t, "shots": 3000}
             for n in names for b, t in [("zgemm", 1.0), ("int8-auto", 1.0),
                                         ("int8-crt-auto", 0.0)]]
    rows = _run(2, cases)
    _check(rows)
    assert all(r["counts"] == 3000 and r["same_distribution"] for r in rows)


@pytest.mark.slow
def test_four_ranks_match_one_process():
    cases = [{"circuit": "brickwork:9:8:2:7", "backend": b, "T": t, "fusion": 2}
             for b, t in [("zgemm", 1.0), ("int8-auto", 0.0), ("int8-crt-auto", 0.0)]]
    rows = _run(4, cases)
    _check(rows)
    assert all(r["ranks"] == 4 for r in rows)


def test_initial_layout_puts_the_least_touched_qubits_on_global_bits():
    uses = [(0, 1), (1, 2), (2, 3), (0, 1), (1, 2)]  # qubit 4 never, qubit 3 once
    phys = initial_layout(uses, 5, 2)
    assert sorted(phys) == list(range(5))
    assert {phys[4], phys[3]} == {3, 4}  # the two global bits of N = 5 over 4 ranks
    assert [phys[q] for q in (0, 1, 2)] == [0, 1, 2]


def test_comm_must_be_a_communicator():
    with pytest.raises(TypeError, match="comm must be an mpi4py communicator or None"):
        Simulator(comm="world")


@pytest.mark.gpu
def test_two_gpus_match_one_gpu():
    from conftest import cupy_or_skip

    cp = cupy_or_skip()
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    cases = [{"circuit": f"brickwork:{n}:6:{d}:3", "backend": b, "T": t, "device": "gpu",
              "shots": shots}  # (10 qubits: ~20 counts an outcome, a fair chi-square test)
             for n, d, shots in [(10, 2, 20000), (16, 4, 0)]
             for b, t in [("zgemm", 1.0), ("int8-auto", 1.0), ("int8-crt-auto", 0.0),
                          ("int8x8", 1.0)]]
    env_rows = _run(2, cases, device="gpu")
    _check(env_rows)
    assert any(r["swaps"] > 0 for r in env_rows)


class _FakeComm:
    """Just enough of a communicator for the checks made before any message is sent."""

    def __init__(self, size, rank=0):
        self.size, self.rank = size, rank

    def Get_size(self):
        return self.size

    def Get_rank(self):
        return self.rank


def test_distributed_state_refuses_bad_rank_counts_layouts_and_sizes():
    from ozsim.distributed import DistributedStateVector

    with pytest.raises(ValueError, match="power-of-two number of ranks, got 3"):
        DistributedStateVector(6, _FakeComm(3))
    with pytest.raises(ValueError, match="2 qubits over 4 ranks leave 0 local qubits"):
        DistributedStateVector(2, _FakeComm(4))
    with pytest.raises(ValueError, match="layout must be a permutation of 0..3"):
        DistributedStateVector(4, _FakeComm(2), layout=[0, 1, 1, 3])


def test_a_gate_wider_than_the_local_qubits_is_refused():
    from ozsim.distributed import DistributedStateVector

    sv = DistributedStateVector(4, _FakeComm(4))  # 2 local qubits, 2 global
    with pytest.raises(ValueError, match="needs more than the 2 local qubits"):
        sv.aligned(np.eye(8, dtype=np.complex128), (0, 1, 2))


def test_distributed_runs_refuse_mid_circuit_measurements():
    from ozsim import Circuit
    from ozsim.errors import UnsupportedOperationError

    h = np.array([[1, 1], [1, -1]], dtype=np.complex128) / np.sqrt(2)
    c = Circuit(4, 1)
    c.unitary(h, (0,))
    c.measure(0, 0)
    c.unitary(h, (0,))  # (after the measurement: it is mid-circuit)
    with pytest.raises(UnsupportedOperationError, match="distributed runs take circuits whose "
                       "measurements are final"):
        Simulator(device="cpu", comm=_FakeComm(2)).run(c, shots=10)
